"""The steps of a run on a time line: when each ran, for how long, its turns, tokens and cost.

The rows are the run's facts (``runview.step_rows``): every view shows the same steps with the
same statuses. Times come from the steps' ``started``/``finished`` stamps (whole seconds); a
step still running ends at the run's ``updated`` stamp::

    for row in timeline(run):
        print(row.step, row.status, row.seconds, row.tokens, row.cost_usd)
"""

from __future__ import annotations

from ..progress.model import Run
from ..run.runview import StepRow, parse_stamp, step_rows

__all__ = ["StepRow", "duration_text", "parse_stamp", "timeline"]


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


def timeline(run: Run, run_status: str | None = None) -> list[StepRow]:
    """The run's steps in order, with their shown status (``run_status``: the run's effective
    status; default the recorded one), times and usage."""
    return step_rows(run, run_status)
