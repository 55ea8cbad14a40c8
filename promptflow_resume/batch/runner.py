"""Running a batch: rows to an engine, results into ``batch.md``, resume row by row.

``start_batch`` checks every row of the data file against the workflow's inputs before anything
runs, writes ``DIR/batch.md``, and hands rows to an engine; ``resume_batch`` takes up every row
that is not completed (each resumes from its own progress file at message granularity);
``batch_status`` reads where a batch stands without running anything::

    outcome = start_batch("triage.prompt.md", "issues.jsonl", out="out", workers=4)
    outcome = resume_batch("out/batch.md")

Rules: a row's failure never stops the others. ``max_cost`` is a total over the batch, kept in
a ledger file every row's model calls reserve against (``base.costledger``): once it cannot
take a call, that row stops ``budget_exhausted``, no new row starts, and the batch ends
``budget_exhausted``.
Ctrl-C (or SIGTERM) stops every worker; each running row checkpoints ``interrupted``, the
batch file is written, and ``KeyboardInterrupt`` propagates (exit 130). The batch file is
rewritten atomically as rows change, at most every ``WRITE_INTERVAL`` seconds, and at the end.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..base import faults
from ..base.clock import now_iso
from ..base.costledger import CostLedger
from ..base.errors import (
    FileNotFoundFlowError,
    FlowError,
    InputError,
    RunLockedError,
)
from ..base.paths import display_path, relative_path
from ..base.runids import new_run_id
from ..flowfolder import make_folder
from ..workflow import load_workflow
from ..workflow.model import Workflow
from .checkpoint import (
    BATCH_FILE,
    BUDGET_FILE,
    DONE,
    Batch,
    RowState,
    load_batch,
    save_batch,
)
from .data import check_rows, data_digest, load_rows
from .events import Done, EngineEvent, Lost, Started, UsageSeen
from .reporting import BatchReporter, batch_exit_code
from .shipping import Shipping, carried_trust, files_mode, named_env, prepare
from .worker import RowResult, RowTask, ledger_owner

if TYPE_CHECKING:
    from ..eventstream import EventStream

#: Seconds between rewrites of the batch file while rows run. Every row's own progress file is
#: the truth about the row (read again on resume), so the batch file can lag a moment behind;
#: rewriting it (some 30 ms at 200 rows) on every event would cost more than a row itself.
WRITE_INTERVAL = 0.5
#: How many times a row is taken up after its worker died before it counts as failed.
MAX_ROW_ATTEMPTS = 3
#: Default batch folder (relative to the working directory): ``.flow/batches/<batch-id>/``.
BATCHES_DIR = Path(".flow") / "batches"
ENGINES = ("local", "ray")


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


def _lock(path: Path) -> Any:
    """Hold ``DIR/batch.md``: one batch process at a time (a dead one releases it)."""
    from filelock import FileLock, Timeout

    lock = FileLock(
        str(path.with_name(f".{path.name}.lock")), mode=0o600, thread_local=False, blocking=False
    )
    try:
        lock.acquire()
    except Timeout:
        raise RunLockedError(
            "this batch is in use by another flow process.",
            path=path,
            hint="Wait for that process to finish, or stop it (Ctrl-C) and run this again.",
        ) from None
    return lock


def make_engine(
    name: str,
    workers: int,
    folder: Path,
    address: str | None = None,
    shipping: Shipping | None = None,
    env: dict[str, str] | None = None,
) -> Engine:
    """The engine called ``name`` (``local`` or ``ray``) with ``workers`` parallel rows;
    ``shipping``: Ray rows whose files travel; ``env``: the variables Ray's tasks get
    (docs/spec.md 8.6)."""
    if name == "local":
        from .local import LocalEngine

        return LocalEngine(workers, log=folder / "workers.log")
    if name == "ray":
        from .ray_engine import RayEngine

        return RayEngine(workers, address=address, folder=folder, shipping=shipping, env=env)
    raise InputError(f"--engine {name!r} is not an engine flow knows.", hint="Choose local or ray.")


def start_batch(
    workflow_path: str | Path,
    data_path: str | Path,
    *,
    out: str | Path | None = None,
    workers: int = 2,
    engine: str = "local",
    address: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    recording: str | Path | None = None,
    max_cost: float | None = None,
    prices: dict[str, dict[str, float]] | None = None,
    reporter: BatchReporter | None = None,
    events: EventStream | None = None,
    files: str | None = None,
    ray_env: Sequence[str] = (),
) -> BatchOutcome:
    """Check every row, write ``DIR/batch.md``, and run the rows until all have stopped.
    With Ray, ``files`` says how rows reach their files (``shared`` or ``shipped``; default
    ``files_mode``) and ``ray_env`` names the variables the tasks get (docs/spec.md 8.6)."""
    if workers < 1:
        raise InputError(f"--workers {workers}: a batch needs at least 1 worker.")
    if engine not in ENGINES:
        raise InputError(
            f"--engine {engine!r} is not an engine flow knows.", hint="Choose local or ray."
        )
    wf = load_workflow(workflow_path)
    data = Path(data_path)
    rows = load_rows(data)
    typed = check_rows(wf, rows, data)
    if recording is not None and not Path(recording).is_file():
        raise FileNotFoundFlowError(f"the recording {recording} does not exist.", path=recording)
    mode = files_mode(engine, files, address)
    if ray_env and engine != "ray":
        raise InputError("--ray-env is for the ray engine: local workers share this environment.")
    batch_id = new_run_id(f"batch {wf.name}")
    folder = Path(out) if out is not None else Path.cwd() / BATCHES_DIR / batch_id
    path = folder / BATCH_FILE
    if path.exists():
        raise InputError(
            f"{path} already exists: a batch was started in {folder}.",
            path=path,
            hint=f"Continue it with `flow resume {path}`, or choose another --out folder.",
        )
    env = named_env(ray_env)
    shipping = prepare(wf, folder, recording) if mode == "shipped" else None
    make_folder(folder)
    lock = _lock(path)
    created = now_iso()
    batch = Batch(
        batch_id=batch_id,
        status="running",
        workflow_path=relative_path(wf.path, folder),
        workflow_hash=wf.hash,
        data_path=relative_path(data, folder),
        data_sha256=data_digest(data),
        created=created,
        updated=created,
        engine=engine,
        workers=workers,
        provider=provider,
        model=model,
        base_url=base_url,
        max_cost_usd=max_cost,
        prices=dict(prices or {}),
        files=mode,
        ray_env=list(ray_env),
        rows=[RowState(row=r.number) for r in rows],
    )
    try:
        # The engine first: a missing Ray must not leave a batch file behind.
        engine_obj = make_engine(engine, workers, folder, address, shipping, env)
    except BaseException:
        lock.release()
        raise
    try:
        save_batch(path, batch)
    except BaseException:
        engine_obj.close()
        lock.release()
        raise
    inputs = {r.number: values for r, values in zip(rows, typed, strict=True)}
    template = RowTask(
        row=0,
        progress="",
        workflow=str(wf.path.resolve()),
        workspace=str(Path.cwd()),
        provider=provider,
        model=model,
        base_url=base_url,
        recording=str(Path(recording).resolve()) if recording is not None else None,
        events=events is not None,
        prices=batch.prices,
        traceparent=batch_traceparent(batch.batch_id),
        trust=carried_trust(Path.cwd()) if shipping is not None else None,
    )
    try:
        return _execute(
            path, batch, template, inputs, engine_obj, _watching(reporter, events, path), lock=lock
        )
    finally:
        send_batch_span(batch)


def _workflow_of(batch: Batch, folder: Path, override: str | Path | None) -> Workflow:
    if override is not None:
        return load_workflow(override)
    path = folder / batch.workflow_path
    if not path.is_file():
        raise FileNotFoundFlowError(
            f"the workflow of this batch, {batch.workflow_path} (relative to the batch file), "
            "does not exist.",
            path=folder / BATCH_FILE,
            field="$.workflow.path",
            hint="Pass the workflow with --workflow PATH, or restore the file.",
        )
    return load_workflow(path)


def _pending_inputs(batch: Batch, folder: Path, wf: Workflow) -> dict[int, dict[str, Any]]:
    """Typed inputs of the rows that have no progress file yet (read again from the data)."""
    waiting = [r for r in batch.rows if not (folder / r.progress).exists()]
    if not waiting:
        return {}
    data = folder / batch.data_path
    where = folder / BATCH_FILE
    if not data.is_file():
        raise FileNotFoundFlowError(
            f"the data file of this batch, {batch.data_path} (relative to the batch file), does "
            f"not exist; {len(waiting)} rows have not started and need their inputs from it.",
            path=where,
            field="$.data.path",
            hint="Restore the data file.",
        )
    if data_digest(data) != batch.data_sha256:
        raise InputError(
            f"the data file {batch.data_path} changed since the batch started; rows that have "
            "not started would run with other inputs than the batch was started with.",
            path=where,
            field="$.data.sha256",
            hint="Restore the data file, or start a new batch over the changed data.",
        )
    rows = load_rows(data)
    typed = check_rows(wf, rows, data)
    return {r.number: values for r, values in zip(rows, typed, strict=True)}


def _reconcile(batch: Batch, folder: Path) -> None:
    """Take each unfinished row's status from its own progress file (the source of truth).

    The batch process may have died after a row's run stopped and before the batch file said
    so; a row whose run is completed is then marked completed and is never run again.
    """
    from ..progress import load_progress

    for row in batch.rows:
        if row.status in DONE:
            continue
        row.worker = None
        progress = folder / row.progress
        if not progress.exists():
            row.status = "pending"
            continue
        try:
            run, _ = load_progress(progress)
        except FlowError as error:
            row.status, row.error = "failed", str(error)
            continue
        usage = run.usage
        row.turns, row.input_tokens, row.output_tokens = (
            usage.turns,
            usage.input_tokens,
            usage.output_tokens,
        )
        row.cost_usd = usage.cost_usd
        row.status = run.status if run.status != "running" else "interrupted"


def resume_batch(
    batch_path: str | Path,
    *,
    workers: int | None = None,
    engine: str | None = None,
    address: str | None = None,
    workflow_path: str | Path | None = None,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    max_cost: float | None = None,
    prices: dict[str, dict[str, float]] | None = None,
    rerun_changed: bool = False,
    keep_completed: bool = False,
    reporter: BatchReporter | None = None,
    events: EventStream | None = None,
    files: str | None = None,
    ray_env: Sequence[str] | None = None,
) -> BatchOutcome:
    """Run every row of a batch that is not completed; completed rows are never re-run.
    ``files`` and ``ray_env`` replace what the batch recorded (docs/spec.md 8.6)."""
    path = Path(batch_path)
    load_batch(path)  # a file that is not a batch is refused before anything is locked
    lock = _lock(path)
    try:
        batch = load_batch(path)  # as the process that holds the lock sees it
        folder = path.parent
        wf = _workflow_of(batch, folder, workflow_path)
        # Rows not started yet run with the batch file's endpoint: like a progress file's, it
        # gets a key only when the person confirms it (docs/spec.md 10.2).
        from ..providers.endpoints import check_recorded

        check_recorded(
            provider or batch.provider or wf.provider or "openai",
            batch.base_url,
            given=base_url,
            source=path,
        )
        _reconcile(batch, folder)
        inputs = _pending_inputs(batch, folder, wf)
        shipping = _resume_shipping(batch, wf, folder, files, ray_env, address)
        engine_obj = _resume_setup(
            batch, workers, engine, address, folder, shipping, named_env(batch.ray_env)
        )
    except BaseException:
        lock.release()
        raise
    if max_cost is not None:
        batch.max_cost_usd = max_cost
    if prices:
        from ..runoptions import Limits

        batch.prices = Limits(prices=prices).apply_prices(batch.prices)
    for key, value in (("provider", provider), ("model", model), ("base_url", base_url)):
        if value is not None:
            setattr(batch, key, value)
    batch.status, batch.reason = "running", None
    template = RowTask(
        row=0,
        progress="",
        workflow=str(wf.path.resolve()),
        workspace=str(Path.cwd()),
        provider=provider,
        model=model,
        base_url=base_url,
        rerun_changed=rerun_changed,
        keep_completed=keep_completed,
        events=events is not None,
        prices=batch.prices,
        traceparent=batch_traceparent(batch.batch_id),
        trust=carried_trust(Path.cwd()) if shipping is not None else None,
    )
    # A row not yet started runs with the batch's settings (a started one keeps its own).
    start_settings = {"provider": batch.provider, "model": batch.model, "base_url": batch.base_url}
    try:
        return _execute(
            path,
            batch,
            template,
            inputs,
            engine_obj,
            _watching(reporter, events, path),
            start_settings=start_settings,
            lock=lock,
        )
    finally:
        send_batch_span(batch)


def batch_traceparent(batch_id: str) -> str | None:
    """With tracing on, the trace context of the batch's span, which each row's run links
    to (docs/spec.md 13); None otherwise."""
    from ..base.traceids import span_id, trace_id_for, traceparent, tracing_on

    if not tracing_on():
        return None
    trace = trace_id_for(f"batch/{batch_id}")
    return traceparent(trace, span_id(trace, "batch"))


def send_batch_span(batch: Batch) -> None:
    """With tracing on, send the batch's own span (``batch <workflow>``, from its creation to
    its last update); a failure to send is not the batch's."""
    context = batch_traceparent(batch.batch_id)
    if context is None:
        return
    from ..base.errors import TelemetryError
    from ..base.traceids import parse_traceparent
    from ..otel.sdk import SpanSender
    from ..otel.spans import SpanRecord, ns_of

    trace, span = parse_traceparent(context) or ("", "")
    done = sum(1 for r in batch.rows if r.status == "completed")
    record = SpanRecord(
        trace_id=trace,
        span_id=span,
        parent_span_id=None,
        name=f"batch {Path(batch.workflow_path).name.split('.')[0]}",
        kind="internal",
        start_ns=ns_of(batch.created),
        end_ns=max(ns_of(batch.updated), ns_of(batch.created)),
        attributes={
            "flow.batch.id": batch.batch_id,
            "flow.batch.engine": batch.engine,
            "flow.batch.rows": len(batch.rows),
            "flow.batch.completed": done,
            "flow.status": batch.status,
        },
    )
    try:
        sender = SpanSender()
        try:
            sender.send([record])
        finally:
            sender.close()
    except TelemetryError:
        pass


def _resume_shipping(
    batch: Batch,
    wf: Workflow,
    folder: Path,
    files: str | None,
    ray_env: Sequence[str] | None,
    address: str | None,
) -> Shipping | None:
    """What a resumed Ray batch ships (the batch's recorded mode and variables unless given);
    a batch recorded before ``files`` existed ran ``shared``."""
    if batch.engine != "ray":
        return None
    batch.files = files_mode("ray", files or batch.files or "shared", address)
    if ray_env is not None:
        batch.ray_env = list(ray_env)
    if batch.files != "shipped":
        return None
    return prepare(wf, folder, None)


def _resume_setup(
    batch: Batch,
    workers: int | None,
    engine: str | None,
    address: str | None,
    folder: Path,
    shipping: Shipping | None,
    env: dict[str, str],
) -> Engine:
    """The engine a resumed batch runs on (the batch's own unless overridden)."""
    batch.workers = workers or batch.workers
    batch.engine = engine or batch.engine
    if batch.workers < 1:
        raise InputError(f"--workers {batch.workers}: a batch needs at least 1 worker.")
    return make_engine(batch.engine, batch.workers, folder, address, shipping, env)


def _watching(
    reporter: BatchReporter | None, events: EventStream | None, path: Path
) -> BatchReporter | None:
    """``reporter``, and the batch's event stream beside it when there is one."""
    if events is None:
        return reporter
    from .stream import BatchStream

    return BatchStream(reporter or BatchReporter(), events, path.parent)


def _task_for(
    row: RowState,
    folder: Path,
    template: RowTask,
    inputs: dict[int, dict[str, Any]],
    start_settings: dict[str, Any],
) -> RowTask:
    progress = (folder / row.progress).resolve()
    fields = dict(template.__dict__)
    fields.update(row=row.row, progress=str(progress), inputs=inputs.get(row.row, {}))
    if not progress.exists():
        fields.update({k: v for k, v in start_settings.items() if v is not None})
    return RowTask(**fields)


def _apply(row: RowState, result: RowResult) -> None:
    row.status = result.status
    row.worker = None
    row.turns = result.turns
    row.input_tokens, row.output_tokens = result.input_tokens, result.output_tokens
    row.cost_usd = result.cost_usd
    row.error = result.error


def _open_ledger(batch: Batch, folder: Path, template: RowTask) -> CostLedger | None:
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


def _execute(
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
    """The batch loop: keep the engine's workers busy until every row has stopped."""
    reporter = reporter or BatchReporter()
    folder = path.parent
    queue = [r for r in batch.rows if r.status not in DONE]
    by_row = {r.row: r for r in batch.rows}
    live: dict[int, tuple[int, int, float]] = {}
    ran: list[int] = []
    budget_hit = False
    interrupted = False

    ledger = _open_ledger(batch, folder, template)

    def spent() -> float:
        return batch.usage_now(live)[1]

    def budget_used() -> bool:
        if ledger is not None:
            return ledger.read().exhausted()
        # "not below" rather than "at or above": a NaN (a hostile row file) stops.
        return batch.max_cost_usd is not None and not spent() < batch.max_cost_usd

    last_write = [0.0]
    dirty = [False]

    def write(*, now: bool = True) -> None:
        dirty[0] = True
        if not now and time.monotonic() - last_write[0] < WRITE_INTERVAL:
            return
        batch.updated = now_iso()
        save_batch(path, batch)
        last_write[0], dirty[0] = time.monotonic(), False

    def handle(event: EngineEvent) -> None:
        if isinstance(event, Started):
            row = by_row[event.row]
            row.status, row.worker = "running", event.worker
            write(now=False)
        elif isinstance(event, UsageSeen):
            live[event.row] = (event.input_tokens, event.output_tokens, event.cost_usd)
        elif isinstance(event, Done):
            row = by_row[event.result.row]
            live.pop(row.row, None)
            _apply(row, event.result)
            write(now=False)
            faults.point("batch.after_row")
            reporter.row_finished(batch, row)
        elif isinstance(event, Lost):
            row = by_row[event.row]
            live.pop(row.row, None)
            row.worker = None
            if ledger is not None:
                ledger.release_owner(ledger_owner(row.row))
            if row.attempts < MAX_ROW_ATTEMPTS and not interrupted:
                row.status = "pending"
                queue.insert(0, row)
            else:
                row.status, row.error = "failed", f"{event.reason} ({row.attempts} attempts)"
                reporter.row_finished(batch, row)
            write()
        reporter.update(batch, live)

    settings = start_settings or {}
    reporter.begin(batch)
    write()
    try:
        try:
            while queue or engine.busy():
                if not budget_hit and budget_used():
                    budget_hit = True
                while queue and engine.free_slots() > 0 and not budget_hit:
                    row = queue.pop(0)
                    row.attempts += 1
                    row.status, row.error = "running", None
                    ran.append(row.row)
                    engine.submit(_task_for(row, folder, template, inputs, settings))
                if budget_hit and not engine.busy():
                    break
                for event in engine.poll(0.2):
                    handle(event)
                if dirty[0]:
                    write(now=False)
        except KeyboardInterrupt:
            interrupted = True
            engine.stop()
            # Every running row checkpoints and reports; a second Ctrl-C leaves the rest to
            # `flow resume`, which reads each row's own file.
            while engine.busy():
                for event in engine.poll(0.2):
                    handle(event)
    except KeyboardInterrupt:
        pass
    finally:
        engine.close()
        for row in batch.rows:
            if row.status == "running":  # never reported: its own file says where it is
                row.status, row.worker = "interrupted", None
        if interrupted:
            batch.status, batch.reason = "interrupted", "stopped by a signal (Ctrl-C or SIGTERM)"
        elif budget_hit and any(r.status in ("pending", "budget_exhausted") for r in batch.rows):
            batch.status = "budget_exhausted"
            batch.reason = f"the batch's cost reached its limit of ${batch.max_cost_usd}"
        elif all(r.status in DONE for r in batch.rows):
            batch.status, batch.reason = "completed", None
        else:
            batch.status, batch.reason = "failed", "some rows did not complete"
        write()
        if lock is not None:
            lock.release()
        reporter.end(batch)
    if interrupted:
        raise BatchInterrupted(path)
    return BatchOutcome(batch=batch, path=path, exit_code=batch_exit_code(batch.status), ran=ran)


@dataclass
class BatchStatus:
    """Where a batch stands: for ``flow status DIR/batch.md``."""

    path: Path
    batch: Batch

    def to_dict(self) -> dict[str, Any]:
        """The stable ``flow status --json`` document of a batch (documented in docs/spec.md)."""
        b = self.batch
        return {
            "path": str(self.path),
            "batch_id": b.batch_id,
            "status": b.status,
            "reason": b.reason,
            "engine": b.engine,
            "workers": b.workers,
            "totals": b.totals(),
            "can_resume": any(r.status not in DONE for r in b.rows),
            "rows": [{**r.to_dict(), "progress": r.progress} for r in b.rows],
        }


def batch_status(batch_path: str | Path) -> BatchStatus:
    """Read a batch file (no lock, nothing runs) and say where each row stands."""
    path = Path(batch_path)
    return BatchStatus(path=path, batch=load_batch(path))


__all__ = [
    "BatchInterrupted",
    "BatchOutcome",
    "BatchStatus",
    "batch_status",
    "resume_batch",
    "start_batch",
]
