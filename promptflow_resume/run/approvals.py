"""A person's answers to a paused run: ``flow approve``, ``flow deny`` and ``flow answer``.

Each writes into the progress file, under the run's lock, what a hand edit would write, so
``flow resume`` continues from there on any machine (docs/spec.md 4.17):

- ``decide``: the ``decision`` of calls held in the file's ``approvals:`` (``approved`` or
  ``denied``), with who decided (``git config user.name``, else ``$USER``), when, on which
  host and why. It chooses only whether a recorded call runs: the call is the one in the
  transcript, and it runs only when this machine recorded it (its seal, spec 10.1);
- ``answer``: the text of a human step's answer, in place of the placeholder (in a child's
  file when the question was asked in a sub-workflow).

::

    decide(Path("progress.md"), ["call_0_0"], approve=True)
    decide(Path("progress.md"), ["call_0_1"], approve=False, reason="not on main")
    answer(Path("progress.md"), "Ship it on Friday.")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.clock import now_iso
from ..base.errors import InputError
from ..progress import ProgressStore
from ..progress.location import progress_file
from ..progress.model import Approval
from ..tools.approval import decider
from .humananswers import ANSWER_PLACEHOLDER
from .subworkflows import question_at


@dataclass
class Decided:
    """What ``decide`` recorded."""

    path: Path
    decision: str
    calls: list[Approval] = field(default_factory=list)
    #: Calls still pending after this decision.
    pending: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form of ``flow approve`` / ``flow deny``."""
        return {
            "path": str(self.path),
            "decision": self.decision,
            "calls": [
                {
                    "call_id": a.call_id,
                    "tool": a.tool,
                    "step": a.step,
                    "entry": a.entry,
                    "by": a.by,
                    "at": a.at,
                    "host": a.host,
                    "reason": a.reason,
                }
                for a in self.calls
            ],
            "pending": self.pending,
        }


def decide(
    path: str | Path,
    call_ids: Sequence[str],
    *,
    approve: bool,
    every: bool = False,
    reason: str | None = None,
    by: str | None = None,
    where: str | None = None,
) -> Decided:
    """Record a person's decision on calls the run holds for approval (``every``: all the
    pending ones), as this machine's user unless ``by`` (and ``where``, recorded as the
    decision's place) say who decided elsewhere. An id the file does not hold is an
    ``InputError``; nothing is written."""
    p = progress_file(path)
    store, run, _ = ProgressStore.open(p)
    with store:
        held = {a.call_id: a for a in run.approvals}
        waiting = [a.call_id for a in run.approvals if a.decision == "pending"]
        if not call_ids and not every:
            raise InputError(
                f"name the calls to decide with --call ID (or --all); {_listing(p, waiting)}"
            )
        unknown = [c for c in call_ids if c not in held]
        if unknown:
            raise InputError(
                f"{p}: no tool call {', '.join(map(repr, unknown))} waits for approval in this "
                f"run; {_listing(p, waiting)}"
            )
        chosen = [held[c] for c in dict.fromkeys(call_ids)] if call_ids else []
        if every:
            chosen += [a for a in run.approvals if a.decision == "pending" and a not in chosen]
        who, host = decider()
        who, host = by or who, where or host
        for item in chosen:
            item.decision = "approved" if approve else "denied"
            item.by, item.at, item.host = who, now_iso(), host
            item.reason = reason
        store.checkpoint(run)
        left = [a.call_id for a in run.approvals if a.decision == "pending"]
    return Decided(p, "approved" if approve else "denied", chosen, left)


def _listing(path: Path, waiting: list[str]) -> str:
    if not waiting:
        return f"none does (flow status {path} says where the run stands)."
    return "waiting: " + ", ".join(waiting) + "."


def read_answer(text: str) -> str:
    """``--text`` as given, or ``@FILE``'s content."""
    if not text.startswith("@"):
        return text
    source = Path(text[1:])
    try:
        return source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the answer from {source}: {error}.") from error


def answer(path: str | Path, text: str) -> Path:
    """Write ``text`` as the answer the run's open question waits for (where the placeholder
    stands); returns the file written, the run's own or a child's."""
    p = progress_file(path)
    if not text.strip():
        raise InputError("the answer is empty; give the text with --text TEXT or --text @FILE.")
    found = question_at(p)
    if found is None:
        raise InputError(
            f"{p}: the run waits for no answer (no {ANSWER_PLACEHOLDER!r} in the file); "
            f"flow status {p} says where it stands."
        )
    where = found[0]
    store, run, _ = ProgressStore.open(where)
    with store:
        entry = next((e for e in run.transcript if ANSWER_PLACEHOLDER in e.content), None)
        if entry is None:  # the placeholder was outside an entry: nothing to answer
            raise InputError(f"{where}: the answer placeholder is not in a transcript entry.")
        entry.content = entry.content.replace(ANSWER_PLACEHOLDER, text.strip(), 1)
        store.checkpoint(run)
    return where
