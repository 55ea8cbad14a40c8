"""``detect``: which stored runs a new run resembles; ``list_runs``: every run, summarized.

``detect`` never raises and never takes longer than its time limit: on overrun or any error it
returns an empty ``Detection`` whose ``skipped_reason`` says why, and the caller starts fresh::

    found = detect(workflow, {"framework": "fastapi"})
    if found.exact:
        ...  # same workflow hash and inputs: resume it
    for candidate in found.candidates:
        print(candidate.run_id, candidate.score, candidate.matched)
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..base.errors import FileNotFoundFlowError, InputError
from ..progress.model import RESUMABLE_STATUSES, RUN_STATUSES
from ..workflow.records import Workflow
from .index import Gathered, gather, light_row
from .keywords import keywords_for
from .origin import written_here
from .score import (
    MAX_CANDIDATES,
    RECENCY_BUCKETS,
    RECENCY_FLOOR,
    THRESHOLD,
    parse_time,
    recency_factor,
)
from .sources import Budget, sources_for
from .summary import INVALID, Reader, RunSummary, canonical_json, iso_utc, owner_alive

#: The check's time limit when ``flow run`` looks for similar runs (seconds).
DEFAULT_TIME_LIMIT = 0.2


@dataclass(frozen=True)
class Candidate:
    """A stored run offered for resuming instead of starting a new one."""

    path: Path
    run_id: str
    status: str
    reason: str | None
    steps_done: int
    steps_total: int
    cost_usd: float
    updated: str
    description: str | None
    #: ``similarity * recency``, rounded to 4 places.
    score: float
    #: The keywords both runs share, sorted.
    matched: tuple[str, ...]
    #: Same workflow hash and same inputs: resumed without asking.
    exact: bool
    workflow_name: str | None = None
    #: Jaccard overlap of the keywords (0..1).
    similarity: float = 0.0
    #: The recency factor applied (1.0 within a day, down to 0.2).
    recency: float = 0.0
    #: Inputs whose value in this run differs from the new run's: (name, this run's value,
    #: the new value); a value missing on one side is None. Empty for an exact match.
    input_changes: tuple[tuple[str, Any, Any], ...] = ()
    #: flow on this machine made or last resumed the run (its seal matches this machine's
    #: key): only such a run is resumed without asking (docs/spec.md 10.1).
    written_here: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for ``--json`` output."""
        return {
            "path": str(self.path),
            "run_id": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "workflow": self.workflow_name,
            "description": self.description,
            "steps_done": self.steps_done,
            "steps_total": self.steps_total,
            "cost_usd": self.cost_usd,
            "updated": self.updated,
            "score": self.score,
            "similarity": round(self.similarity, 4),
            "recency": self.recency,
            "matched": list(self.matched),
            "exact": self.exact,
            "written_here": self.written_here,
            "input_changes": [
                {"name": name, "run": old, "given": new} for name, old, new in self.input_changes
            ],
        }


@dataclass(frozen=True)
class Detection:
    """The outcome of a check: candidates best first (an exact match always first)."""

    candidates: tuple[Candidate, ...] = ()
    exact: Candidate | None = None
    elapsed_ms: float = 0.0
    #: Why the check gave up (time limit, error); None when it ran to the end.
    skipped_reason: str | None = None
    #: The new run's keywords, for ``flow detect`` and ``--verbose``.
    keywords: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for ``--json`` output."""
        return {
            "keywords": list(self.keywords),
            "exact": self.exact.to_dict() if self.exact else None,
            "candidates": [c.to_dict() for c in self.candidates],
            "elapsed_ms": round(self.elapsed_ms, 1),
            "skipped_reason": self.skipped_reason,
        }


def _moment(updated: str | None, mtime_ns: int) -> datetime:
    """When a run was last updated: its ``updated`` field, else the file's mtime."""
    moment = parse_time(updated)
    if moment is None:
        moment = datetime.fromtimestamp(mtime_ns / 1e9, tz=timezone.utc)
    return moment


class _RecencyClock:
    """Recency factors for one ``now``; canonical ``...Z`` times compare as strings (fast)."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        # (oldest time still in the bucket, factor), newest bucket first
        self.edges = [(iso_utc(now - limit), factor) for limit, factor in RECENCY_BUCKETS]

    def __call__(self, updated: str | None, mtime_ns: int) -> float:
        if updated is not None and len(updated) == 20 and updated[-1] == "Z":
            for edge, factor in self.edges:
                if updated >= edge:
                    return factor
            return RECENCY_FLOOR
        return recency_factor(self.now - _moment(updated, mtime_ns))


@dataclass(frozen=True)
class _Scored:
    path: str
    value: float
    similarity: float
    recency: float
    moment: datetime
    shared: tuple[str, ...]
    exact: bool


def _score_rows(
    rows: Iterable[tuple[Any, ...]],
    keywords: Sequence[str],
    workflow_hash: str,
    inputs_json: str,
    now: datetime,
    alive: Callable[[str], bool],
) -> list[_Scored]:
    """Score light rows (``LIGHT_COLUMNS``); keep exact matches and scores >= THRESHOLD."""
    new = frozenset(keywords)
    kept: list[_Scored] = []
    recency_of = _RecencyClock(now)
    for path, mtime_ns, status, updated, wf_hash, inputs, stored_text in rows:
        exact = wf_hash == workflow_hash and inputs == inputs_json
        stored = stored_text.split() if stored_text else []
        shared = new.intersection(stored)
        if not shared and not exact:
            continue  # the common case, decided without parsing a date
        similarity = len(shared) / (len(new) + len(stored) - len(shared)) if shared else 0.0
        if similarity < THRESHOLD and not exact:
            continue  # recency can only lower it
        recency = recency_of(updated, mtime_ns)
        value = similarity * recency
        if value < THRESHOLD and not exact:
            continue
        if status == "running" and alive(path):
            continue  # a live process owns it: not resumable
        moment = _moment(updated, mtime_ns)
        kept.append(_Scored(path, value, similarity, recency, moment, tuple(sorted(shared)), exact))
    return kept


def _choose_scored(scored: list[_Scored]) -> tuple[list[_Scored], _Scored | None]:
    """Best first (score, then most recent, then path); the newest exact match leads."""
    exacts = [s for s in scored if s.exact]
    exact = max(exacts, key=lambda s: (s.moment, s.path)) if exacts else None
    ranked = sorted(
        (s for s in scored if s.value >= THRESHOLD and s is not exact),
        key=lambda s: (-s.value, -s.moment.timestamp(), s.path),
    )
    if exact is not None:
        ranked.insert(0, exact)
    return ranked[:MAX_CANDIDATES], exact


def input_changes(
    stored: Mapping[str, Any], given: Mapping[str, Any]
) -> tuple[tuple[str, Any, Any], ...]:
    """(name, stored value, given value) for every input on which two runs disagree."""
    names = sorted(set(stored) | set(given))
    return tuple(
        (name, stored.get(name), given.get(name))
        for name in names
        if canonical_json(stored.get(name)) != canonical_json(given.get(name))
    )


def _candidate(summary: RunSummary, scored: _Scored, given: Mapping[str, Any]) -> Candidate:
    stored = json.loads(summary.inputs_json or "{}")
    return Candidate(
        path=summary.path,
        run_id=summary.run_id,
        status=summary.status,
        reason=summary.reason,
        steps_done=summary.steps_done,
        steps_total=summary.steps_total,
        cost_usd=summary.cost_usd,
        updated=summary.updated or iso_utc(scored.moment),
        description=summary.description,
        score=round(scored.value, 4),
        matched=scored.shared,
        exact=scored.exact,
        workflow_name=summary.workflow_name,
        similarity=scored.similarity,
        recency=scored.recency,
        input_changes=input_changes(stored if isinstance(stored, dict) else {}, given),
        written_here=written_here(summary.path),
    )


def _rank_light(
    rows: Iterable[tuple[Any, ...]],
    keywords: Sequence[str],
    *,
    workflow_hash: str,
    inputs_json: str,
    now: datetime,
    full: Callable[[Sequence[str]], Mapping[str, RunSummary]],
    alive: Callable[[str], bool],
) -> tuple[tuple[Candidate, ...], Candidate | None]:
    scored = _score_rows(rows, keywords, workflow_hash, inputs_json, now, alive)
    best, exact = _choose_scored(scored)
    summaries = full([s.path for s in best])
    given = json.loads(inputs_json)
    candidates = tuple(_candidate(summaries[s.path], s, given) for s in best if s.path in summaries)
    chosen = next((c for c in candidates if exact is not None and str(c.path) == exact.path), None)
    return candidates, chosen


def rank(
    summaries: Sequence[RunSummary],
    keywords: Sequence[str],
    *,
    workflow_hash: str,
    inputs_json: str,
    now: datetime,
) -> tuple[tuple[Candidate, ...], Candidate | None]:
    """Score resumable ``summaries`` against a new run; return (candidates, exact match).

    A ``running`` summary counts only when ``owner_alive`` is False.
    """
    usable = [s for s in summaries if s.resumable]
    by_path = {str(s.path): s for s in usable}
    return _rank_light(
        [light_row(s) for s in usable],
        keywords,
        workflow_hash=workflow_hash,
        inputs_json=inputs_json,
        now=now,
        full=lambda paths: {p: by_path[p] for p in paths},
        alive=lambda path: False,
    )


def _root(root: Path | None) -> Path:
    return Path(os.path.abspath(root if root is not None else Path.cwd()))


def _detect_now(
    workflow: Workflow,
    inputs: Mapping[str, Any],
    folders: Sequence[Path],
    root: Path,
    now: datetime | None,
    budget: Budget,
    reader: Reader | None,
    started: float,
) -> tuple[Detection, Gathered | None]:
    keywords = keywords_for(workflow, inputs)
    found = gather(
        sources_for(folders, root),
        statuses=RESUMABLE_STATUSES,
        budget=budget,
        reader=reader,
        light=True,
    )
    elapsed = (time.perf_counter() - started) * 1000
    if not found.complete:
        reason = (
            f"the similar-run check ran out of its time limit after {elapsed:.0f} ms while "
            "reading progress files the run index had not seen yet; what was read is now "
            "indexed, so a later check is faster (`flow list` indexes everything)"
        )
        return Detection(elapsed_ms=elapsed, skipped_reason=reason, keywords=tuple(keywords)), found
    moment = now or datetime.now(timezone.utc)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    candidates, exact = _rank_light(
        found.rows,
        keywords,
        workflow_hash=workflow.hash,
        inputs_json=canonical_json(dict(inputs)),
        now=moment,
        full=found.full,
        alive=lambda path: owner_alive(Path(path)),
    )
    elapsed = (time.perf_counter() - started) * 1000
    detection = Detection(candidates, exact, elapsed, None, tuple(keywords))
    return detection, found


def detect(
    workflow: Workflow,
    inputs: Mapping[str, Any],
    *,
    folders: Sequence[Path] = (),
    root: Path | None = None,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
    now: datetime | None = None,
    reader: Reader | None = None,
) -> Detection:
    """Find stored runs like a new run of ``workflow`` with ``inputs``; never raises.

    Looks in ``<root>/.flow/runs`` and ``folders``. ``time_limit`` (seconds; None or 0 for
    none) bounds the whole check: on overrun, or on any error, the result is empty and
    ``skipped_reason`` says why. ``reader`` replaces the front matter reader (tests).
    """
    started = time.perf_counter()
    base = _root(root)
    limit = time_limit if time_limit is not None and 0 < time_limit < float("inf") else None
    cancel = threading.Event()
    budget = Budget(deadline=None if limit is None else started + limit, cancel=cancel)
    box: dict[str, Any] = {}
    finished = threading.Event()

    def work() -> None:
        found: Gathered | None = None
        try:
            box["detection"], found = _detect_now(
                workflow, inputs, folders, base, now, budget, reader, started
            )
        except Exception as error:  # reported as a skip: the check must never stop a run
            box["error"] = error
        finally:
            finished.set()
        if found is not None:
            # After the answer is published: storing the index never delays the caller.
            with contextlib.suppress(Exception):
                found.flush()

    if limit is None:
        work()
    else:
        # A worker thread makes the limit hard even if one read blocks (a slow network disk):
        # we stop waiting, and the worker stops at its next check.
        thread = threading.Thread(target=work, name="flow-detect", daemon=True)
        thread.start()
        if not finished.wait(limit):
            cancel.set()
            elapsed = (time.perf_counter() - started) * 1000
            return Detection(
                elapsed_ms=elapsed,
                skipped_reason=(
                    f"the similar-run check did not finish within its time limit of "
                    f"{limit * 1000:.0f} ms; starting fresh"
                ),
            )
    detection: Detection | None = box.get("detection")
    if detection is None:
        error = box.get("error")
        elapsed = (time.perf_counter() - started) * 1000
        return Detection(
            elapsed_ms=elapsed,
            skipped_reason=f"the similar-run check failed: {type(error).__name__}: {error}",
        )
    return detection


def list_runs(
    folders: Sequence[Path] = (),
    *,
    root: Path | None = None,
    include_completed: bool = False,
    status: str | None = None,
    reader: Reader | None = None,
) -> list[RunSummary]:
    """Summaries of the runs in ``folders`` (default ``<root>/.flow/runs``), unfinished first.

    Then most recently updated first. Completed runs only with ``include_completed`` or
    ``status="completed"``. Files that cannot be read are listed with status ``invalid``.
    """
    base = _root(root)
    known = (*RUN_STATUSES, INVALID)
    if status is not None and status not in known:
        raise InputError(
            f"--status {status!r} is not a run status.",
            hint=f"Use one of: {', '.join(known)}.",
        )
    for folder in folders:
        if not (base / folder).exists():
            raise FileNotFoundFlowError(
                "no such file or folder.",
                path=folder,
                hint="Name a folder holding progress files, e.g. .flow/runs, or a progress.md.",
            )
    if status is not None:
        # A dead owner's "running" run is interrupted, a live one's running (progress.state):
        # either filter reads the recorded "running" runs too and keeps the effective match.
        extra = {"running"} if status in ("running", "interrupted") else set()
        statuses: frozenset[str] | None = frozenset({status, *extra})
    elif include_completed:
        statuses = None
    else:
        statuses = frozenset(known) - {"completed"}
    sources = sources_for(folders, base, include_root=not folders)
    found = gather(sources, statuses=statuses, reader=reader)
    found.flush()

    def order(summary: RunSummary) -> tuple[bool, float, str]:
        moment = _moment(summary.updated, summary.mtime_ns)
        return (summary.status == "completed", -moment.timestamp(), str(summary.path))

    summaries = found.summaries
    if status is not None:
        summaries = [s for s in summaries if s.state.status == status]
    return sorted(summaries, key=order)


__all__ = [
    "DEFAULT_TIME_LIMIT",
    "Candidate",
    "Detection",
    "detect",
    "list_runs",
    "rank",
]
