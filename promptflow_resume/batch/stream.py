"""A batch's event stream (``flow batch --events FILE``, docs/spec.md 4.16).

Each row's run writes its events beside its progress file (``rows/<n>/events.jsonl``, every
event tagged with ``row``), wherever the row runs: a local worker process or a Ray task on
another machine, which shares no pipe with the batch but does share the batch folder. As each
row stops, the batch copies what the row's file gained into the batch's stream, between a
``batch_started`` and a ``batch_finished`` event. So a row's events reach the stream when the
row stops, not as they happen; the row's own file is live.
"""

from __future__ import annotations

from pathlib import Path

from ..eventstream import EventStream
from .checkpoint import Batch, RowState
from .reporting import BatchReporter, batch_exit_code

#: The name of a row's events file, beside its progress file.
ROW_EVENTS = "events.jsonl"


class BatchStream(BatchReporter):
    """Tells ``inner`` everything, and writes the batch's events to ``stream``."""

    def __init__(self, inner: BatchReporter, stream: EventStream, folder: Path) -> None:
        self.inner = inner
        self.stream = stream
        self.folder = folder
        #: Bytes of each row's events file already in the stream (a resumed batch skips what
        #: earlier attempts' streams had).
        self._offsets: dict[int, int] = {}

    def _row_file(self, row: RowState) -> Path:
        return (self.folder / row.progress).parent / ROW_EVENTS

    def begin(self, batch: Batch) -> None:
        """``batch_started``."""
        for row in batch.rows:
            path = self._row_file(row)
            self._offsets[row.row] = path.stat().st_size if path.exists() else 0
        self.stream.emit("batch_started", batch_id=batch.batch_id, rows=len(batch.rows))
        self.inner.begin(batch)

    def update(self, batch: Batch, live_usage: dict[int, tuple[int, int, float]]) -> None:
        """Told to the inner reporter."""
        self.inner.update(batch, live_usage)

    def row_finished(self, batch: Batch, row: RowState) -> None:
        """The row's new events, copied whole-line into the batch's stream."""
        path = self._row_file(row)
        if path.exists():
            with path.open("rb") as handle:
                handle.seek(self._offsets.get(row.row, 0))
                data = handle.read()
            # A row killed mid-write leaves a part of a line: only whole lines are copied.
            whole = data[: data.rfind(b"\n") + 1]
            self._offsets[row.row] = self._offsets.get(row.row, 0) + len(whole)
            for line in whole.decode("utf-8", errors="replace").splitlines():
                if line.strip():
                    self.stream.copy_line(line)
        self.inner.row_finished(batch, row)

    def end(self, batch: Batch) -> None:
        """``batch_finished``, with the batch's exit code and counts."""
        self.inner.end(batch)
        done = sum(1 for r in batch.rows if r.status == "completed")
        self.stream.emit(
            "batch_finished",
            batch_id=batch.batch_id,
            status=batch.status,
            exit_code=batch_exit_code(batch.status),
            rows_done=done,
            rows=len(batch.rows),
        )
