"""The batch loop: rows to an engine's workers until every row has stopped.

``run_rows`` keeps the engine's free workers busy with the rows that are not done, applies
each worker's events to the batch (``Started``, ``UsageSeen``, ``Done``, ``Lost``), rewrites
``batch.md`` at most every ``WRITE_INTERVAL`` seconds, and settles the batch's status at the
end::

    outcome = run_rows(path, batch, template, inputs, LocalEngine(2, log=...), reporter)

Rules: a row's failure never stops the others; a row whose worker died is taken up again, at
most ``MAX_ROW_ATTEMPTS`` times; once the batch's cost ledger cannot take a call no new row
starts. Ctrl-C (or SIGTERM) stops every worker, each running row checkpoints
``interrupted``, and ``BatchInterrupted`` propagates after the batch file is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ..base import faults
from ..base.clock import now_iso
from ..base.costledger import CostLedger
from ..base.paths import display_path
from .checkpoint import BUDGET_FILE, DONE, Batch, RowState, save_batch
from .reporting import BatchReporter, batch_exit_code
from .rowevents import Done, EngineEvent, Lost, Started, UsageSeen
from .worker import RowResult, RowTask, ledger_owner

#: Seconds between rewrites of the batch file while rows run. Every row's own progress file is
#: the truth about the row (read again on resume), so the batch file can lag a moment behind;
#: rewriting it (some 30 ms at 200 rows) on every event would cost more than a row itself.
WRITE_INTERVAL = 0.5
#: How many times a row is taken up after its worker died before it counts as failed.
MAX_ROW_ATTEMPTS = 3


class Engine(Protocol):
    """Where rows run: ``local`` worker processes or Ray tasks."""

    name: str

    def free_slots(self) -> int:
        """How many more rows can be submitted now."""

    def submit(self, task: RowTask) -> None:
        """Start ``task`` on a free worker."""

    def poll(self, timeout: float) -> Any:
        """Events about submitted rows, waiting at most ``timeout`` seconds."""

    def busy(self) -> int:
        """Rows submitted and not yet reported."""

    def stop(self) -> None:
        """Ask every running row to checkpoint and stop; take no new rows."""

    def close(self) -> None:
        """Release the workers."""


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a batch; every row is checkpointed and so is ``path``."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path


@dataclass
class BatchOutcome:
    """How a ``start_batch`` / ``resume_batch`` call ended."""

    batch: Batch
    path: Path
    exit_code: int
    #: Rows run (started or resumed) by this call.
    ran: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ``flow batch --json`` document; ``path`` as messages show it (relative to the
        working directory when below it)."""
        return {
            "path": display_path(self.path),
            "batch_id": self.batch.batch_id,
            "status": self.batch.status,
            "reason": self.batch.reason,
            "totals": self.batch.totals(),
            "ran": self.ran,
            "exit_code": self.exit_code,
        }

    def unfinished_rows(self) -> list[RowState]:
        """Rows that were started and did not complete: failed, stopped or still running."""
        return [row for row in self.batch.rows if row.status not in ("completed", "pending")]


def task_for(
    row: RowState,
    folder: Path,
    template: RowTask,
    inputs: dict[int, dict[str, Any]],
    start_settings: dict[str, Any],
) -> RowTask:
    """The task of ``row``: the template with the row's file and inputs; a row not started
    yet takes the batch's connection (``start_settings``), a started one keeps its own."""
    progress = (folder / row.progress).resolve()
    options = dict(template.options)
    if not progress.exists():
        options.update({k: v for k, v in start_settings.items() if v is not None})
    return replace(
        template,
        row=row.row,
        progress=str(progress),
        inputs=inputs.get(row.row, {}),
        options=options,
    )


def _apply(row: RowState, result: RowResult) -> None:
    row.status = result.status
    row.worker = None
    row.turns = result.turns
    row.input_tokens, row.output_tokens = result.input_tokens, result.output_tokens
    row.cost_usd = result.cost_usd
    row.error = result.error


def open_ledger(batch: Batch, folder: Path, template: RowTask) -> CostLedger | None:
    """The batch's shared cost budget, written afresh from the rows' recorded costs, or None
    without a ``--max-cost``; the rows' tasks are pointed at it (docs/spec.md 8.3)."""
    if batch.max_cost_usd is None:
        template.budget = None
        return None
    path = (folder / BUDGET_FILE).resolve()
    ledger = CostLedger(path, owner="batch")
    ledger.reset(float(batch.max_cost_usd), sum(r.cost_usd for r in batch.rows))
    template.budget = str(path)
    return ledger


class _RowLoop:
    """One run of the loop over a batch's rows (``run_rows``)."""

    def __init__(
        self,
        path: Path,
        batch: Batch,
        template: RowTask,
        inputs: dict[int, dict[str, Any]],
        engine: Engine,
        reporter: BatchReporter,
        start_settings: dict[str, Any],
    ) -> None:
        self.path, self.batch, self.engine, self.reporter = path, batch, engine, reporter
        self.template, self.inputs, self.start_settings = template, inputs, start_settings
        self.queue = [r for r in batch.rows if r.status not in DONE]
        self.by_row = {r.row: r for r in batch.rows}
        self.live: dict[int, tuple[int, int, float]] = {}
        self.ran: list[int] = []
        self.budget_hit = False
        self.interrupted = False
        self.ledger = open_ledger(batch, path.parent, template)
        self.last_write = 0.0
        self.dirty = False

    def budget_used(self) -> bool:
        """Whether the batch's cost budget can take no more calls."""
        if self.ledger is not None:
            return self.ledger.read().exhausted()
        limit = self.batch.max_cost_usd
        # "not below" rather than "at or above": a NaN (a hostile row file) stops.
        return limit is not None and not self.batch.usage_now(self.live)[1] < limit

    def write(self, *, now: bool = True) -> None:
        """Rewrite the batch file (``now=False``: unless it was written a moment ago)."""
        self.dirty = True
        if not now and time.monotonic() - self.last_write < WRITE_INTERVAL:
            return
        self.batch.updated = now_iso()
        save_batch(self.path, self.batch)
        self.last_write, self.dirty = time.monotonic(), False

    def handle(self, event: EngineEvent) -> None:
        """Apply one of the engine's events to the batch."""
        if isinstance(event, Started):
            row = self.by_row[event.row]
            row.status, row.worker = "running", event.worker
            self.write(now=False)
        elif isinstance(event, UsageSeen):
            self.live[event.row] = (event.input_tokens, event.output_tokens, event.cost_usd)
        elif isinstance(event, Done):
            row = self.by_row[event.result.row]
            self.live.pop(row.row, None)
            _apply(row, event.result)
            self.write(now=False)
            faults.point("batch.after_row")
            self.reporter.row_finished(self.batch, row)
        elif isinstance(event, Lost):
            self._lost(event)
        self.reporter.update(self.batch, self.live)

    def _lost(self, event: Lost) -> None:
        """A worker died with its row: take the row up again, or count it failed."""
        row = self.by_row[event.row]
        self.live.pop(row.row, None)
        row.worker = None
        if self.ledger is not None:
            self.ledger.release_owner(ledger_owner(row.row))
        if row.attempts < MAX_ROW_ATTEMPTS and not self.interrupted:
            row.status = "pending"
            self.queue.insert(0, row)
        else:
            row.status, row.error = "failed", f"{event.reason} ({row.attempts} attempts)"
            self.reporter.row_finished(self.batch, row)
        self.write()

    def submit_ready(self) -> None:
        """Give the free workers the next rows (none once the budget is spent)."""
        folder = self.path.parent
        while self.queue and self.engine.free_slots() > 0 and not self.budget_hit:
            row = self.queue.pop(0)
            row.attempts += 1
            row.status, row.error = "running", None
            self.ran.append(row.row)
            task = task_for(row, folder, self.template, self.inputs, self.start_settings)
            self.engine.submit(task)

    def loop(self) -> None:
        """Run rows until every one has stopped; on Ctrl-C, let the running ones checkpoint."""
        engine = self.engine
        try:
            while self.queue or engine.busy():
                if not self.budget_hit and self.budget_used():
                    self.budget_hit = True
                self.submit_ready()
                if self.budget_hit and not engine.busy():
                    break
                for event in engine.poll(0.2):
                    self.handle(event)
                if self.dirty:
                    self.write(now=False)
        except KeyboardInterrupt:
            self.interrupted = True
            engine.stop()
            # Every running row checkpoints and reports; a second Ctrl-C leaves the rest to
            # `flow resume`, which reads each row's own file.
            while engine.busy():
                for event in engine.poll(0.2):
                    self.handle(event)

    def settle(self) -> None:
        """The batch's status once its rows have stopped."""
        batch = self.batch
        for row in batch.rows:
            if row.status == "running":  # never reported: its own file says where it is
                row.status, row.worker = "interrupted", None
        if self.interrupted:
            batch.status, batch.reason = "interrupted", "stopped by a signal (Ctrl-C or SIGTERM)"
        elif self.budget_hit and any(
            r.status in ("pending", "budget_exhausted") for r in batch.rows
        ):
            batch.status = "budget_exhausted"
            batch.reason = f"the batch's cost reached its limit of ${batch.max_cost_usd}"
        elif all(r.status in DONE for r in batch.rows):
            batch.status, batch.reason = "completed", None
        else:
            batch.status, batch.reason = "failed", "some rows did not complete"


def run_rows(
    path: Path,
    batch: Batch,
    template: RowTask,
    inputs: dict[int, dict[str, Any]],
    engine: Engine,
    reporter: BatchReporter | None,
    *,
    start_settings: dict[str, Any] | None = None,
    lock: Any = None,
) -> BatchOutcome:
    """Keep the engine's workers busy until every row has stopped; release ``lock`` and the
    engine at the end, whatever happens."""
    reporter = reporter or BatchReporter()
    rows = _RowLoop(path, batch, template, inputs, engine, reporter, start_settings or {})
    reporter.begin(batch)
    rows.write()
    try:
        rows.loop()
    except KeyboardInterrupt:
        pass
    finally:
        engine.close()
        rows.settle()
        rows.write()
        if lock is not None:
            lock.release()
        reporter.end(batch)
    if rows.interrupted:
        raise BatchInterrupted(path)
    return BatchOutcome(
        batch=batch, path=path, exit_code=batch_exit_code(batch.status), ran=rows.ran
    )
