"""``flow log``: a run's attempt history, one record per process that ran or changed it.

Each attempt shows when it started and ended, the status it left the run in and why, the
tokens and cost it spent, and its notes: resume decisions, retries, archived entries, rewinds,
and the hand edits flow detected before it continued. Edits made since the last attempt (not
yet seen by a resume) are listed separately as pending.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..base.clock import parse_iso
from ..progress import load_progress
from ..progress.location import progress_file
from ..progress.model import Attempt, Usage, run_models
from ..progress.state import RunState, run_state
from ..providers.givenprices import from_record
from ..providers.pricing import priced


@dataclass
class AttemptView:
    """One attempt as ``flow log`` shows it."""

    n: int
    started: str
    ended: str | None
    status: str | None
    reason: str | None
    usage: Usage
    notes: list[str] = field(default_factory=list)
    #: The notes that report hand edits detected before this attempt continued the run (the
    #: attempt's ``edits`` field; docs/spec.md 2.5).
    edits: list[str] = field(default_factory=list)
    #: For a run with fallback models: the model the attempt ended on, and the models the
    #: provider refused during it (``{model, message}``; docs/spec.md 5.3).
    model: str | None = None
    refused: list[dict[str, str]] = field(default_factory=list)
    #: The release of flow that ran the attempt (None: not recorded).
    flow: str | None = None

    @property
    def seconds(self) -> int | None:
        """How long the attempt took, in whole seconds (None while it has not ended)."""
        if self.ended is None:
            return None
        return max(0, int((parse_iso(self.ended) - parse_iso(self.started)).total_seconds()))

    @classmethod
    def of(cls, attempt: Attempt) -> AttemptView:
        """The view of one recorded attempt."""
        return cls(
            n=attempt.n,
            started=attempt.started,
            ended=attempt.ended,
            status=attempt.status,
            reason=attempt.reason,
            usage=attempt.usage,
            notes=list(attempt.notes),
            edits=list(attempt.edits),
            model=attempt.model,
            refused=[{"model": r.model, "message": r.message} for r in attempt.refused],
            flow=attempt.flow,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        data = asdict(self)
        data["seconds"] = self.seconds
        return data


@dataclass
class RunLog:
    """The whole history of a run: its attempts, totals, origin and unseen edits."""

    path: Path
    run_id: str
    status: str
    reason: str | None
    usage: Usage
    attempts: list[AttemptView]
    #: Where the run was forked from (path, run_id, step), if it was.
    parent: dict[str, str] | None = None
    #: Entries edited by hand since the last attempt; the next resume will note and use them.
    pending_edits: list[int] = field(default_factory=list)
    #: Inputs edited by hand since the last attempt, as ``name: old -> new``.
    pending_inputs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: The effective state: a dead owner's ``running`` run is ``interrupted`` (progress.state).
    state: RunState | None = None
    #: Whether the run's models have a price: without one the cost is unknown, not $0.
    priced: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The ``flow log --json`` document."""
        state = self.state or run_state(self.path, self.status, self.reason)
        return {
            "path": str(self.path),
            "run_id": self.run_id,
            "status": state.status,
            "reason": state.reason,
            "recorded_status": self.status,
            "owner_alive": state.owner_alive,
            "resumable": state.resumable,
            "state": state.text(),
            "usage": asdict(self.usage),
            "priced": self.priced,
            "parent": self.parent,
            "attempts": [a.to_dict() for a in self.attempts],
            "pending_edits": self.pending_edits,
            "pending_inputs": self.pending_inputs,
            "warnings": self.warnings,
        }


def read_log(path: str | Path) -> RunLog:
    """The attempt history of the run at ``path`` (read only; a live run may be read too)."""
    progress = progress_file(path)
    run, report = load_progress(progress)
    state = run_state(progress, run.status, run.reason)
    attempts = [AttemptView.of(a) for a in run.attempts]
    for earlier in attempts[:-1]:
        if earlier.ended is None:
            # A file from before resumes closed a killed attempt: one followed by another
            # ended when its process died.
            earlier.status = earlier.status or "interrupted"
            earlier.reason = earlier.reason or "its process ended without a checkpoint"
    if attempts and attempts[-1].ended is None and state.owner_alive is False:
        # The last attempt's process died without recording its end: it ended interrupted.
        attempts[-1].status = attempts[-1].status or state.status
        attempts[-1].reason = attempts[-1].reason or state.reason
    return RunLog(
        path=progress,
        run_id=run.run_id,
        status=run.status,
        reason=run.reason,
        usage=run.usage,
        attempts=attempts,
        parent=dict(run.parent) if run.parent else None,
        pending_edits=list(report.edited_entries),
        pending_inputs=list(report.edited_inputs),
        warnings=list(report.warnings),
        state=state,
        priced=priced(run_models(run), from_record(run.config.prices)),
    )


def run_log(path: str | Path) -> list[AttemptView]:
    """The attempts of the run at ``path``, oldest first (see ``read_log`` for the rest)."""
    return read_log(path).attempts
