"""The steps of a run on a time line: when each ran, for how long, its turns, tokens and cost.

Times come from the steps' ``started``/``finished`` stamps (whole seconds); a step still
running ends at the run's ``updated`` stamp. Turns are the model replies recorded in the step::

    for row in timeline(run):
        print(row.step, row.seconds, row.tokens, row.cost_usd)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from ..progress.model import Run


@dataclass(frozen=True)
class StepRow:
    """One step of the time line."""

    step: str
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


def parse_stamp(stamp: str | None) -> datetime | None:
    """``2026-11-21T23:25:29Z`` as an aware datetime; None for None or a malformed stamp."""
    if not stamp:
        return None
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def duration_text(seconds: float | None) -> str:
    """``45s``, ``3m 05s``, ``2h 01m``; ``—`` when unknown."""
    if seconds is None:
        return "—"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def timeline(run: Run) -> list[StepRow]:
    """The run's steps in order, with their times and usage."""
    origin = parse_stamp(run.created)
    end_of_run = parse_stamp(run.updated)
    rows = []
    for sid, state in run.steps.items():
        started = parse_stamp(state.started)
        finished = parse_stamp(state.finished) or (end_of_run if started else None)
        offset = seconds = None
        if started is not None and origin is not None:
            offset = max(0.0, (started - origin).total_seconds())
        if started is not None and finished is not None:
            seconds = max(0.0, (finished - started).total_seconds())
        mine = [e for e in run.transcript if e.step == sid]
        rows.append(
            StepRow(
                step=sid,
                status=state.status,
                offset=offset,
                seconds=seconds,
                turns=state.turns,
                tool_calls=sum(e.role == "tool_call" for e in mine),
                tokens=state.usage.total_tokens,
                cost_usd=state.usage.cost_usd,
                attempts=state.attempts,
                entries=(mine[0].id, mine[-1].id) if mine else None,
            )
        )
    return rows
