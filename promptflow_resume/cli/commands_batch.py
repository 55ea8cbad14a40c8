"""``flow batch``, and ``flow resume`` / ``flow status`` when given a ``batch.md``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..base.errors import EXIT_INTERRUPTED
from ..base.paths import display_path
from ..base.wording import count
from .app import app, err, event_stream, out, print_json
from .options import (
    BaseUrlOpt,
    EventsOpt,
    MaxCostOpt,
    ModelOpt,
    OtelOpt,
    PriceOpt,
    PricesOpt,
    ProviderOpt,
    SummaryJson,
    WorkflowArg,
)

if TYPE_CHECKING:
    from ..api import Choices, RunOptions
    from ..batch import BatchOutcome


class _Progress:
    """A rich progress bar on a terminal (completed / failed / running, tokens, cost); a
    plain line per finished row otherwise (CI logs)."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self._bar: Any = None
        self._task: Any = None

    def _counts(self, batch: Any, live_usage: dict[int, tuple[int, int, float]]) -> dict[str, Any]:
        tokens, cost = batch.usage_now(live_usage)
        return {**batch.totals(), "tokens": tokens, "cost": cost}

    def begin(self, batch: Any) -> None:
        if not self.live:
            err(f"flow: batch {batch.batch_id}: {count(len(batch.rows), 'row')}")
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        from ..base.printing import console

        self._bar = Progress(
            TextColumn("batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            console=console(stderr=True),
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task("batch", total=len(batch.rows), detail="")
        self.update(batch, {})

    def update(self, batch: Any, live_usage: dict[int, tuple[int, int, float]]) -> None:
        if self._bar is None:
            return
        c = self._counts(batch, live_usage)
        detail = (
            f"{c['completed']} completed · {c['failed']} failed · {c['running']} running · "
            f"{c['tokens']:,} tokens · ${c['cost']:.4f}"
        )
        self._bar.update(self._task, completed=c["completed"] + c["failed"], detail=detail)

    def row_finished(self, batch: Any, row: Any) -> None:
        if self.live:
            return
        t = batch.totals()
        done = t["completed"] + t["failed"]
        tail = f": {row.error}" if row.error else ""
        err(f"flow: row {row.row} {row.status} ({done}/{t['rows']} done){tail}")

    def end(self, batch: Any) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _reporter(live: bool) -> Any:
    from ..batch import BatchReporter

    progress = _Progress(live)

    class Reporter(BatchReporter):
        def begin(self, batch: Any) -> None:
            progress.begin(batch)

        def update(self, batch: Any, live_usage: dict[int, tuple[int, int, float]]) -> None:
            progress.update(batch, live_usage)

        def row_finished(self, batch: Any, row: Any) -> None:
            progress.row_finished(batch, row)

        def end(self, batch: Any) -> None:
            progress.end(batch)

    return Reporter()


def _report(outcome: BatchOutcome, as_json: bool) -> int:
    if as_json:
        print_json(outcome.to_dict())
        return outcome.exit_code
    batch, path, t = outcome.batch, display_path(outcome.path), outcome.batch.totals()
    tokens = t["input_tokens"] + t["output_tokens"]
    line = (
        f"{t['completed']}/{t['rows']} rows completed, {t['failed']} failed, "
        f"{t['pending']} not started; {tokens:,} tokens, ${t['cost_usd']:.4f} — {path}"
    )
    if batch.status == "completed":
        out(f"completed: {line}")
    else:
        reason = f" ({batch.reason})" if batch.reason else ""
        err(f"{batch.status}{reason}: {line}")
        for row in outcome.unfinished_rows():
            tail = f": {row.error}" if row.error else ""
            err(f"  row {row.row} {row.status}{tail}")
        err(f"Resume with: flow resume {path}")
    return outcome.exit_code


def _interrupted(path: Path) -> int:
    err("interrupted: every running row saved its progress.")
    err(f"Resume with: flow resume {display_path(path)}")
    return EXIT_INTERRUPTED


DataOpt = Annotated[
    Path,
    typer.Option(
        "--data",
        metavar="FILE",
        help="The rows: a JSONL, CSV or YAML file; each row's keys are input names.",
    ),
]
WorkersOpt = Annotated[int, typer.Option("--workers", "-w", metavar="N", help="Rows run at once.")]
EngineOpt = Annotated[
    str,
    typer.Option("--engine", metavar="ENGINE", help="Where rows run: local (processes) or ray."),
]
AddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address",
        metavar="ADDR",
        help="With --engine ray: the cluster to join (default RAY_ADDRESS, else a local Ray).",
    ),
]
FilesOpt = Annotated[
    str | None,
    typer.Option(
        "--files",
        metavar="MODE",
        help="With --engine ray: shipped (rows' files travel through Ray; no shared "
        "filesystem) or shared (every node mounts them at the same path). Default: shipped "
        "with --address or RAY_ADDRESS, shared for a Ray of this machine.",
    ),
]
RayEnvOpt = Annotated[
    list[str],
    typer.Option(
        "--ray-env",
        metavar="NAME",
        help="With --engine ray: send this variable (e.g. OPENAI_API_KEY) to the tasks through "
        "Ray's runtime_env; FLOW_SEAL_KEY sends this machine's sealing key. Repeatable.",
    ),
]
OutDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        metavar="DIR",
        help="The batch folder: batch.md and rows/ (default .flow/batches/<batch-id>/).",
    ),
]
RecordingOpt = Annotated[
    Path | None,
    typer.Option(
        "--recording",
        metavar="FILE",
        help="With --provider replay or scripted: the recording or script every row uses.",
    ),
]


@app.command("batch")
def batch_command(
    workflow: WorkflowArg,
    data: DataOpt = ...,  # type: ignore[assignment]
    workers: WorkersOpt = 2,
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    files: FilesOpt = None,
    ray_env: RayEnvOpt = [],  # noqa: B006 - typer copies list defaults
    out_dir: OutDirOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    recording: RecordingOpt = None,
    max_cost: MaxCostOpt = None,
    events: EventsOpt = None,
    otel: OtelOpt = False,
    price: PriceOpt = [],  # noqa: B006 - typer copies list defaults
    prices: PricesOpt = None,
    as_json: SummaryJson = False,
) -> int:
    """Run WORKFLOW once per row of a data file, each row with its own progress file.

    Every row is checked against the workflow's inputs before anything runs. A failing row
    does not stop the others; --max-cost is one budget over all rows: each model call
    reserves its estimate first, so the total passes it by at most one call per worker (the
    rows it stops end budget_exhausted; resume with a larger --max-cost). Exit codes: 0 every
    row completed, 1 some row did not, 9 bad rows, 130 interrupted (resume with
    `flow resume DIR/batch.md`).
    """
    from ..api import Limits, RunOptions
    from ..batch import start_batch
    from ..batch.runner import BatchInterrupted
    from ..front import given_prices, trace_batch

    trace_batch(otel)
    live = sys.stderr.isatty() and not as_json
    stream = event_stream(events)
    limits = Limits(max_cost=max_cost, prices=given_prices(price, prices))
    try:
        outcome = start_batch(
            workflow,
            data,
            RunOptions(provider=provider, model=model, base_url=base_url, limits=limits),
            out=out_dir,
            workers=workers,
            engine=engine,
            address=address,
            recording=recording,
            reporter=_reporter(live),
            events=stream,
            files=files,
            ray_env=ray_env,
        )
    except BatchInterrupted as stop:
        return _interrupted(stop.path)
    finally:
        if stream is not None:
            stream.close_target()
    return _report(outcome, as_json)


def resume_batch_command(
    path: Path,
    options: RunOptions,
    *,
    workflow: Path | None,
    choices: Choices,
    otel: bool,
    as_json: bool,
    events: str | None = None,
) -> int:
    """``flow resume DIR/batch.md``: run every row that did not complete, each with
    ``options`` (what ``flow resume`` was given for one run, applied to every row)."""
    from ..batch import resume_batch
    from ..batch.runner import BatchInterrupted
    from ..front import trace_batch

    trace_batch(otel)
    live = sys.stderr.isatty() and not as_json
    stream = event_stream(events)
    try:
        outcome = resume_batch(
            path,
            options,
            rerun_changed=choices.rerun_changed,
            keep_completed=choices.keep_completed,
            workflow_path=workflow,
            reporter=_reporter(live),
            events=stream,
        )
    except BatchInterrupted:
        return _interrupted(path)
    finally:
        if stream is not None:
            stream.close_target()
    return _report(outcome, as_json)


def batch_status_command(path: Path, as_json: bool) -> int:
    """``flow status DIR/batch.md``: counts and each row's status."""
    from ..batch import batch_status

    data = batch_status(path).to_dict()
    if as_json:
        print_json(data)
        return 0
    t = data["totals"]
    out(f"batch    {data['batch_id']}")
    reason = f" — {data['reason']}" if data["reason"] else ""
    out(f"status   {data['status']}{reason}")
    out(
        f"rows     {t['rows']}: {t['completed']} completed, {t['failed']} failed, "
        f"{t['running']} running, {t['pending']} pending"
    )
    out(
        f"usage    {t['input_tokens']:,} in / {t['output_tokens']:,} out tokens, "
        f"${t['cost_usd']:.4f}"
    )
    for row in data["rows"]:
        tail = f" — {row['error']}" if row.get("error") else ""
        out(f"  row {row['row']:>4} {row['status']:<16} {row['progress']}{tail}")
    if data["can_resume"]:
        out(f"resume   flow resume {path} runs the rows that did not complete")
    else:
        out("resume   nothing to do: every row completed")
    return 0
