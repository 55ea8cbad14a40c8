"""How a part of the engine ends the run with a status other than ``failed`` by an error.

Any part (the budget, the model call, an approval hold, a human step, a child run) raises
``RunEnds``; the engine's loop catches it and checkpoints the run with its status and reason::

    raise RunEnds("budget_exhausted", "turn budget used: 5 of 5 turns; resume with ...")
"""

from __future__ import annotations


class RunEnds(Exception):
    """End the run with a status and reason (budget, timeout, review, input), and for
    ``suspended`` the moment the provider's window opens."""

    def __init__(self, status: str, reason: str, until: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.until = until


def timeout_reason() -> str:
    """The status reason of a run stopped by its time limit."""
    return "the time limit was reached; resume to continue (with a larger --timeout if needed)"
