"""What a batch tells whoever watches it (the terminal, an event stream), and its exit code."""

from __future__ import annotations

from ..base.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_INCOMPLETE
from .checkpoint import Batch, RowState


def batch_exit_code(status: str) -> int:
    """The documented exit code of a batch that stopped with ``status`` (docs/spec.md 8)."""
    if status == "completed":
        return EXIT_OK
    if status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_RUN_INCOMPLETE


class BatchReporter:
    """Hooks called as a batch progresses; every method does nothing by default."""

    def begin(self, batch: Batch) -> None:
        """The batch starts or resumes."""

    def update(self, batch: Batch, live_usage: dict[int, tuple[int, int, float]]) -> None:
        """A row changed (or usage came in); ``live_usage`` holds running rows' usage."""

    def row_finished(self, batch: Batch, row: RowState) -> None:
        """A row's run stopped (completed or not)."""

    def end(self, batch: Batch) -> None:
        """The batch stopped; the file is written."""
