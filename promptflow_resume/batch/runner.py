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
rewritten atomically as rows change (``rowloop``), and at the end. Every row runs with the
``RunOptions`` given (``rowoptions``), as a single run would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.clock import now_iso
from ..base.errors import (
    FileNotFoundFlowError,
    FlowError,
    InputError,
    RunLockedError,
)
from ..base.paths import relative_path
from ..base.runids import new_run_id
from ..flowfolder import make_folder
from ..run.runoptions import RunOptions
from ..workflow import load_workflow
from ..workflow.records import Workflow
from .checkpoint import BATCH_FILE, DONE, Batch, RowState, load_batch, save_batch
from .data import check_rows, data_digest, load_rows
from .reporting import BatchReporter
from .rowloop import BatchInterrupted, BatchOutcome, Engine, run_rows
from .rowoptions import check_row_options, row_template
from .shipping import Shipping, files_mode, named_env, prepare

if TYPE_CHECKING:
    from ..eventstream import EventStream

#: Default batch folder (relative to the working directory): ``.flow/batches/<batch-id>/``.
BATCHES_DIR = Path(".flow") / "batches"
ENGINES = ("local", "ray")


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
    options: RunOptions | None = None,
    *,
    out: str | Path | None = None,
    workers: int = 2,
    engine: str = "local",
    address: str | None = None,
    recording: str | Path | None = None,
    reporter: BatchReporter | None = None,
    events: EventStream | None = None,
    files: str | None = None,
    ray_env: Sequence[str] = (),
) -> BatchOutcome:
    """Check every row, write ``DIR/batch.md``, and run the rows until all have stopped.
    Every row runs with ``options`` (``row_template``), whose ``limits.max_cost`` is one
    budget over the batch. With Ray, ``files`` says how rows reach their files (``shared`` or
    ``shipped``; default ``files_mode``) and ``ray_env`` names the variables the tasks get
    (docs/spec.md 8.6)."""
    options = options or RunOptions()
    _check_engine(workers, engine)
    wf = load_workflow(workflow_path)
    data = Path(data_path)
    rows = load_rows(data)
    typed = check_rows(wf, rows, data)
    if recording is not None and not Path(recording).is_file():
        raise FileNotFoundFlowError(f"the recording {recording} does not exist.", path=recording)
    mode = files_mode(engine, files, address)
    if ray_env and engine != "ray":
        raise InputError("--ray-env is for the ray engine: local workers share this environment.")
    check_row_options(options, engine, mode)
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
    batch = _new_batch(batch_id, wf, data, folder, options, engine, workers, mode, ray_env)
    batch.rows = [RowState(row=r.number) for r in rows]
    engine_obj = _engine_saving(path, batch, lock, engine, workers, address, shipping, env)
    inputs = {r.number: values for r, values in zip(rows, typed, strict=True)}
    template = row_template(
        wf,
        options,
        batch,
        events=events is not None,
        shipped=shipping is not None,
        recording=recording,
        traceparent=batch_traceparent(batch.batch_id),
    )
    try:
        watching = _watching(reporter, events, path)
        return run_rows(path, batch, template, inputs, engine_obj, watching, lock=lock)
    finally:
        send_batch_span(batch)


def _new_batch(
    batch_id: str,
    wf: Workflow,
    data: Path,
    folder: Path,
    options: RunOptions,
    engine: str,
    workers: int,
    mode: str | None,
    ray_env: Sequence[str],
) -> Batch:
    """The record of a batch starting now (its rows not yet listed): what runs, over which
    data, where, and the options of its own (connection, budget, prices)."""
    created = now_iso()
    return Batch(
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
        provider=options.provider,
        model=options.model,
        base_url=options.base_url,
        max_cost_usd=options.limits.max_cost,
        prices=dict(options.limits.prices),
        files=mode,
        ray_env=list(ray_env),
    )


def _check_engine(workers: int, engine: str) -> None:
    if workers < 1:
        raise InputError(f"--workers {workers}: a batch needs at least 1 worker.")
    if engine not in ENGINES:
        raise InputError(
            f"--engine {engine!r} is not an engine flow knows.", hint="Choose local or ray."
        )


def _engine_saving(
    path: Path,
    batch: Batch,
    lock: Any,
    engine: str,
    workers: int,
    address: str | None,
    shipping: Shipping | None,
    env: dict[str, str],
) -> Engine:
    """The new batch's engine, then its file written; on a failure of either, nothing is
    held. The engine first: a missing Ray must not leave a batch file behind."""
    try:
        engine_obj = make_engine(engine, workers, path.parent, address, shipping, env)
    except BaseException:
        lock.release()
        raise
    try:
        save_batch(path, batch)
    except BaseException:
        engine_obj.close()
        lock.release()
        raise
    return engine_obj


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
    options: RunOptions | None = None,
    *,
    rerun_changed: bool = False,
    keep_completed: bool = False,
    workflow_path: str | Path | None = None,
    workers: int | None = None,
    engine: str | None = None,
    address: str | None = None,
    reporter: BatchReporter | None = None,
    events: EventStream | None = None,
    files: str | None = None,
    ray_env: Sequence[str] | None = None,
) -> BatchOutcome:
    """Run every row of a batch that is not completed; completed rows are never re-run.
    Every row runs with ``options`` (``row_template``): its connection, ``max_cost`` and prices
    replace the batch's; ``files`` and ``ray_env`` replace what the batch recorded
    (docs/spec.md 8.6)."""
    options = options or RunOptions()
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
            options.provider or batch.provider or wf.provider or "openai",
            batch.base_url,
            given=options.base_url,
            source=path,
        )
        _reconcile(batch, folder)
        inputs = _pending_inputs(batch, folder, wf)
        shipping = _resume_shipping(batch, wf, folder, files, ray_env, address)
        check_row_options(options, engine or batch.engine, batch.files)
        engine_obj = _resume_setup(
            batch, workers, engine, address, folder, shipping, named_env(batch.ray_env)
        )
    except BaseException:
        lock.release()
        raise
    _take_given(batch, options)
    template = row_template(
        wf,
        options,
        batch,
        events=events is not None,
        shipped=shipping is not None,
        traceparent=batch_traceparent(batch.batch_id),
    )
    template.rerun_changed, template.keep_completed = rerun_changed, keep_completed
    # A row not yet started runs with the batch's settings (a started one keeps its own).
    start_settings = {"provider": batch.provider, "model": batch.model, "base_url": batch.base_url}
    try:
        watching = _watching(reporter, events, path)
        return run_rows(
            path,
            batch,
            template,
            inputs,
            engine_obj,
            watching,
            start_settings=start_settings,
            lock=lock,
        )
    finally:
        send_batch_span(batch)


def _take_given(batch: Batch, options: RunOptions) -> None:
    """What ``options`` give of the batch's own settings replaces what it recorded: the cost
    budget, prices (model by model) and the connection."""
    if options.limits.max_cost is not None:
        batch.max_cost_usd = options.limits.max_cost
    if options.limits.prices:
        batch.prices = options.limits.apply_prices(batch.prices)
    for key in ("provider", "model", "base_url"):
        if (value := getattr(options, key)) is not None:
            setattr(batch, key, value)
    batch.status, batch.reason = "running", None


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
