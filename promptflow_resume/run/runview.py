"""What a run is, for every view of it: one record made from the loaded run and its effective
state, from which ``flow show`` (terminal, ``--json``, the page, ``--summary``), ``flow status
--json`` and the dashboard (its pages and ``/api/run/KEY``) take every fact they show.

Views that counted for themselves disagreed: a skipped step was done for ``flow list`` and not
for ``flow status``, and a step the run stopped in stayed ``running`` on the dashboard and in
the CI summary of a failed, budget-exhausted or held run. The rules live here once:

- a step's shown status is the recorded one, except that a step recorded ``running`` in a run
  that is not going on shows how the run stopped (``failed``, ``awaiting_approval``,
  ``budget_exhausted``, ``interrupted``, ...): the file keeps ``running`` (the step goes on
  mid-step on resume), a reader sees that nothing runs;
- steps done and in all: ``progress.model.step_counts``;
- the run's state: ``progress.state`` (a dead owner's ``running`` run is ``interrupted``).

::

    facts = run_facts(run, run_state(path, run.status, run.reason))
    facts.steps_done, facts.steps[0].status, facts.to_dict()
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from ..progress.model import Run, Usage, approvals_view, model_attempts, run_models
from ..progress.state import RunState, state_of
from .handoffs import chain_view


def shown_step_status(recorded: str, run_status: str) -> str:
    """The status a step is shown with: a step recorded ``running`` in a run that is not
    going on (``run_status``, the effective one) shows how the run stopped."""
    if recorded == "running" and run_status not in ("running", "completed"):
        return run_status
    return recorded


@dataclass(frozen=True)
class StepRow:
    """One step of a run, as every view shows it."""

    step: str
    #: The shown status (``shown_step_status``); ``recorded_status`` is the file's.
    status: str
    #: Seconds from the run's creation to the step's start (None: not started).
    offset: float | None
    #: How long the step ran, in seconds (None: not started).
    seconds: float | None
    turns: int
    tool_calls: int
    tokens: int
    cost_usd: float
    attempts: int
    #: Ids of the step's transcript entries (first, last), or None when it has none.
    entries: tuple[int, int] | None
    recorded_status: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON form (``entries`` as a list, as JSON reads it back)."""
        data = asdict(self)
        data["entries"] = list(self.entries) if self.entries is not None else None
        return data


def parse_stamp(stamp: str | None) -> datetime | None:
    """``2026-11-21T23:25:29Z`` as an aware datetime; None for None or a malformed stamp."""
    if not stamp:
        return None
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def step_rows(run: Run, run_status: str | None = None) -> list[StepRow]:
    """The run's steps in order, with their shown status, times and usage. Times come from the
    steps' whole-second stamps; a step still running ends at the run's ``updated`` stamp.
    ``run_status`` is the run's effective status (default: the recorded one)."""
    status = run_status or run.status
    origin = parse_stamp(run.created)
    end_of_run = parse_stamp(run.updated)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    calls: dict[str, int] = {}
    for entry in run.transcript:
        if entry.step is None:
            continue
        first.setdefault(entry.step, entry.id)
        last[entry.step] = entry.id
        if entry.role == "tool_call":
            calls[entry.step] = calls.get(entry.step, 0) + 1
    rows = []
    for sid, state in run.steps.items():
        started = parse_stamp(state.started)
        finished = parse_stamp(state.finished) or (end_of_run if started else None)
        offset = seconds = None
        if started is not None and origin is not None:
            offset = max(0.0, (started - origin).total_seconds())
        if started is not None and finished is not None:
            seconds = max(0.0, (finished - started).total_seconds())
        rows.append(
            StepRow(
                step=sid,
                status=shown_step_status(state.status, status),
                offset=offset,
                seconds=seconds,
                turns=state.turns,
                tool_calls=calls.get(sid, 0),
                tokens=state.usage.total_tokens,
                cost_usd=state.usage.cost_usd,
                attempts=state.attempts,
                entries=(first[sid], last[sid]) if sid in first else None,
                recorded_status=state.status,
            )
        )
    return rows


@dataclass(frozen=True)
class RunFacts:
    """Every fact the views show about one run (see the module's docstring)."""

    run: Run
    state: RunState
    steps: list[StepRow]
    steps_done: int
    steps_total: int

    @property
    def usage(self) -> Usage:
        """Tokens, cost and turns over every attempt."""
        return self.run.usage

    @property
    def percent(self) -> int:
        """Steps done, in percent of all steps (100 for a run without steps)."""
        return round(100 * self.steps_done / self.steps_total) if self.steps_total else 100

    @property
    def pending_approvals(self) -> int:
        """Tool calls that wait for a person's decision."""
        return sum(1 for a in self.run.approvals if a.decision == "pending")

    def to_dict(self) -> dict[str, Any]:
        """The facts as JSON (``flow show --json``, the dashboard's ``/api/run/KEY``; ``flow
        status --json`` has the same keys with the same values)."""
        run, state = self.run, self.state
        return {
            "run_id": run.run_id,
            "title": run.title(),
            "status": state.status,
            "reason": state.reason,
            "until": run.until,
            "recorded_status": run.status,
            "owner_alive": state.owner_alive,
            "resumable": state.resumable,
            "state": state.text(),
            "step": run.cursor.step,
            "step_index": run.cursor.index,
            "steps_total": self.steps_total,
            "steps_done": self.steps_done,
            "percent": self.percent,
            "usage": run.usage.to_dict(),
            "attempts": len(run.attempts),
            "entries": len(run.transcript),
            "trace_id": run.trace_id(),
            "models": run_models(run),
            "model_attempts": model_attempts(run),
            "permissions": {
                "commands": list(run.config.permissions.commands),
                "hosts": list(run.config.permissions.hosts),
            },
            "approvals": approvals_view(run),
            "steps": [row.to_dict() for row in self.steps],
            # The handoff chain, part by part (docs/spec.md 4.13); null for a run without one.
            "handoffs": chain_view(run),
        }


def run_facts(run: Run, state: RunState | None = None) -> RunFacts:
    """The facts of ``run`` in its effective ``state`` (default: the recorded status read as
    is, for a run whose file is not at hand)."""
    state = state or state_of(run.status, run.reason, alive=run.status == "running")
    done, total = run.step_counts()
    return RunFacts(run, state, step_rows(run, state.status), done, total)
