"""The question ``flow run`` asks when similar unfinished runs exist, and its line formats.

One match: a short description, then ``Resume it? [Y/n]``. Several: a numbered list, then
``Resume which? [1/2/3/n — start fresh]``. Without a terminal nothing waits for input.

Inputs given for the new run are never dropped silently: a match whose inputs differ is shown
with the differences, the question's default becomes a new run (``[y/N]``), and ``--yes``
never picks such a match (an exact match, same workflow and inputs, still resumes)::

    chosen = choose(detection, interactive=sys.stdin.isatty(), assume_yes=False)
    if chosen is not None:
        ...  # resume chosen.path

``run_to_resume`` is the whole policy ``flow run`` follows before starting: detect, resume an
identical run, otherwise ``choose``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..base.paths import display_path
from ..workflow.records import Workflow
from .core import Candidate, Detection, detect
from .score import parse_time

#: How many times an unusable answer is asked again before starting fresh.
MAX_ASKS = 3

_YES = frozenset({"y", "yes"})
_NO = frozenset({"n", "no"})


def _can_encode(text: str) -> bool:
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def progress_bar(done: int, total: int, width: int = 10, *, unicode: bool | None = None) -> str:
    """``[████░░░░░░]`` for 4 of 10 (``[####------]`` where the terminal cannot show blocks)."""
    fancy = _can_encode("█░") if unicode is None else unicode
    full, empty = ("█", "░") if fancy else ("#", "-")
    filled = 0 if total <= 0 else round(width * min(max(done, 0), total) / total)
    return "[" + full * filled + empty * (width - filled) + "]"


def format_age(updated: str | None, now: datetime | None = None) -> str:
    """``just now``, ``12 min ago``, ``3 h ago``, ``5 days ago`` (``unknown`` if unparsable)."""
    moment = parse_time(updated)
    if moment is None:
        return "unknown"
    current = now or datetime.now(timezone.utc)
    if current.tzinfo is None:
        current = current.replace(tzinfo=timezone.utc)
    seconds = max((current - moment).total_seconds(), 0.0)
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86400)
    return "1 day ago" if days == 1 else f"{days} days ago"


def format_cost(usd: float) -> str:
    """``$0.12``; costs under a cent show as ``<$0.01`` rather than a misleading ``$0.00``."""
    if 0 < usd < 0.005:
        return "<$0.01"
    return f"${usd:,.2f}"


def status_text(status: str, reason: str | None) -> str:
    """``interrupted (Ctrl-C)``: the status, and the reason when there is one."""
    return f"{status} ({reason})" if reason else status


def exact_line(candidate: Candidate) -> str:
    """The one line printed when an identical run is resumed without asking."""
    return (
        f"Resuming run {candidate.run_id} ({candidate.status}, "
        f"{candidate.steps_done}/{candidate.steps_total} steps done): same workflow and inputs. "
        "To start fresh instead, run again with --new."
    )


def _summary_lines(candidate: Candidate, now: datetime | None) -> list[str]:
    lines = [
        f"  {candidate.run_id}  {status_text(candidate.status, candidate.reason)}: "
        f"{candidate.steps_done}/{candidate.steps_total} steps done, "
        f"{format_cost(candidate.cost_usd)} used, updated {format_age(candidate.updated, now)}"
    ]
    what = candidate.description or candidate.workflow_name
    if what:
        lines.append(f"  {what}")
    if candidate.matched:
        lines.append(f"  matched: {', '.join(candidate.matched)}")
    lines.append(f"  {display_path(candidate.path)}")
    lines.extend(f"  {line}" for line in input_lines(candidate))
    return lines


def _value(value: object) -> str:
    return "(not set)" if value is None else repr(value) if not isinstance(value, str) else value


def input_lines(candidate: Candidate) -> list[str]:
    """``inputs differ: topic: bees (that run) -> ants (given)``, one line per input."""
    return [
        f"inputs differ: {name}: {_value(old)} (that run) -> {_value(new)} (given)"
        for name, old, new in candidate.input_changes
    ]


def _list_lines(candidates: Sequence[Candidate], now: datetime | None) -> list[str]:
    width = max(len(c.run_id) for c in candidates)
    lines = []
    for number, c in enumerate(candidates, start=1):
        what = c.description or c.workflow_name or ""
        lines.append(
            f"  {number}. {c.run_id:<{width}}  {c.status:<16} "
            f"{c.steps_done}/{c.steps_total} {progress_bar(c.steps_done, c.steps_total)}  "
            f"{format_cost(c.cost_usd):>7}  {format_age(c.updated, now):<12} {what}".rstrip()
        )
        lines.extend(f"     {line}" for line in input_lines(c))
    return lines


def render_matches(candidates: Sequence[Candidate], now: datetime | None = None) -> list[str]:
    """The lines that describe the matches, as shown before the question."""
    if len(candidates) == 1:
        return ["A similar unfinished run exists:", *_summary_lines(candidates[0], now)]
    return [f"{len(candidates)} similar unfinished runs exist:", *_list_lines(candidates, now)]


def question(count: int, *, default_resume: bool = True) -> str:
    """The question for ``count`` matches; ``default_resume``: Enter resumes the best one."""
    if count == 1:
        return "Resume it? [Y/n] " if default_resume else "Resume it with its own inputs? [y/N] "
    numbers = "/".join(str(n) for n in range(1, count + 1))
    if default_resume:
        return f"Resume which? [{numbers}/n — start fresh] "
    return f"Resume which? [{numbers}/N — start fresh with the given inputs] "


def _interpret(answer: str, count: int, *, default_resume: bool = True) -> int | str | None:
    """An answer -> index of the chosen match, None (start fresh), or "again" (unusable)."""
    text = answer.strip().casefold()
    if text in _NO:
        return None
    if text == "":
        # Enter takes the capital letter: the best match, or a new run when its inputs differ.
        return 0 if default_resume else None
    if text in _YES:
        return 0
    if count > 1 and text.isdigit() and 1 <= int(text) <= count:
        return int(text) - 1
    return "again"


def choose(
    detection: Detection,
    *,
    interactive: bool,
    assume_yes: bool,
    read: Callable[[str], str] = input,
    write: Callable[[str], None] = print,
    now: datetime | None = None,
) -> Candidate | None:
    """Decide which run to resume, asking on a terminal; None means start fresh.

    An exact match is returned with one printed line. No candidates: prints nothing.
    ``assume_yes`` takes the best match. Not ``interactive``: prints the matches and starts
    fresh without waiting. Unusable answers are asked again at most ``MAX_ASKS`` times.
    """
    if detection.exact is not None and detection.exact.written_here:
        write(exact_line(detection.exact))
        return detection.exact
    candidates = detection.candidates
    if not candidates:
        return None
    if assume_yes:
        # --yes takes a run only when flow on this machine wrote it: never a file from elsewhere.
        same = [c for c in candidates if not c.input_changes and c.written_here]
        if same:
            best = same[0]
            write(
                f"Resuming similar run {best.run_id} (best match with the same inputs, score "
                f"{best.score:.2f}; --yes)."
            )
            return best
        best = candidates[0]
        why = (
            "has other inputs, and --yes never resumes a run with inputs other than the given ones."
            if best.input_changes
            else "was not written by flow on this machine, and --yes never resumes such a run."
        )
        write(f"Starting a new run: the similar run {best.run_id} {why}")
        for line in input_lines(best):
            write(f"  {line}")
        write(f"To resume it anyway: flow resume {display_path(best.path)}")
        return None
    for line in render_matches(candidates, now):
        write(line)
    if not interactive:
        write(
            "Starting fresh (no terminal to ask on). To resume one instead: "
            f"flow resume {display_path(candidates[0].path)}"
        )
        return None
    count = len(candidates)
    default_resume = not candidates[0].input_changes
    for _ in range(MAX_ASKS):
        try:
            answer = read(question(count, default_resume=default_resume))
        except EOFError:
            write("")
            return None
        choice = _interpret(answer, count, default_resume=default_resume)
        if choice is None:
            return None
        if isinstance(choice, int):
            return candidates[choice]
        options = "y or n" if count == 1 else f"a number from 1 to {count}, or n"
        write(f"Please answer {options}.")
    write("No usable answer; starting fresh.")
    return None


def would_do(detection: Detection) -> str:
    """What ``flow run`` (``run_to_resume``) does with this detection, in a few words."""
    if detection.skipped_reason:
        return "start fresh (check skipped)"
    if detection.exact is not None and detection.exact.written_here:
        return f"resume {detection.exact.run_id} without asking (identical run)"
    count = len(detection.candidates)
    if count == 0:
        return "start fresh (no similar unfinished run)"
    if count == 1:
        return "ask: Resume it? [Y/n]"
    return "ask which of the listed runs to resume, or start fresh"


def run_to_resume(
    workflow: Workflow,
    inputs: Mapping[str, Any],
    *,
    interactive: bool,
    assume_yes: bool,
    read: Callable[[str], str] = input,
    write: Callable[[str], None] = print,
    verbose: bool = False,
) -> Path | None:
    """``flow run``'s run-or-resume policy: the progress file of a run to resume, or None.

    An identical incomplete run (same workflow hash and inputs) is resumed without asking;
    similar ones go through ``choose`` (asked on a terminal, ``assume_yes`` takes the best
    with the same inputs). ``verbose`` also says why the check was skipped, when it was.
    """
    detection = detect(workflow, inputs)
    if detection.skipped_reason and verbose:
        write(f"flow: similar-run check skipped: {detection.skipped_reason}")
    if detection.exact is not None and detection.exact.written_here:
        exact = detection.exact
        write(
            f"flow: resuming identical incomplete run {exact.run_id} ({exact.status}, "
            f"{exact.steps_done}/{exact.steps_total} steps); use --new to start fresh instead."
        )
        return exact.path
    if detection.exact is not None:
        write(
            f"flow: the identical incomplete run {detection.exact.run_id} was not written by flow "
            "on this machine (it came from elsewhere, or was made before runs were sealed), so "
            "it is not resumed without asking."
        )
        detection = replace(detection, exact=None)
    if not detection.candidates:
        return None
    chosen = choose(
        detection, interactive=interactive, assume_yes=assume_yes, read=read, write=write
    )
    return chosen.path if chosen is not None else None
