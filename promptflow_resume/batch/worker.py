"""One row of a batch, run through the library API; and the local engine's worker process.

``run_row`` is what every engine runs for a row, in a worker process on this machine or in a
Ray task: a row whose progress file does not exist yet starts a run (``start_run``); a row
whose file exists resumes it (``resume_run``), so a row taken up again after a crash, a
Ctrl-C or a dead worker continues at message granularity and a completed run is never
re-run. Whatever happens, the answer is a ``RowResult``; a row's failure is data, not an
exception, so it cannot stop the other rows.

Run as ``python -m promptflow_resume.batch``, this module is a local worker: it reads
one task per line (JSON) on stdin and answers with events, one JSON object per line, on
stdout: ``started`` (with ``host:pid``), ``usage`` (after each model reply) and ``done``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..base.errors import FlowError
from ..flowfolder import make_folder
from ..progress.model import Usage
from ..run.events import Reporter

if TYPE_CHECKING:
    from ..base.costledger import SharedBudget
    from ..run.runoptions import RunOptions

#: Seconds between checks that the batch process is still alive.
_ORPHAN_CHECK = 0.5


@dataclass
class RowTask:
    """What a worker needs to run one row (plain data: it crosses process boundaries): the
    row's files, and the ``RunOptions`` record every row of the batch runs with."""

    row: int
    #: Absolute path of the row's progress file.
    progress: str
    #: Absolute path of the workflow file.
    workflow: str
    #: Typed input values (used only when the row starts).
    inputs: dict[str, Any] = field(default_factory=dict)
    workspace: str = "."
    #: The row's run options as ``RunOptions.to_record`` writes them: the connection, the
    #: prices and whatever ``flow resume DIR/batch.md`` was given for the rows (spec 8.2).
    options: dict[str, Any] = field(default_factory=dict)
    recording: str | None = None
    rerun_changed: bool = False
    keep_completed: bool = False
    #: Write the row's events beside its progress file (``flow batch --events``, spec 4.16).
    events: bool = False
    #: Absolute path of the batch's budget ledger (``DIR/budget.json``) when the batch has a
    #: ``--max-cost``: every model call of the row holds a reservation on it.
    budget: str | None = None
    #: With tracing on (docs/spec.md 13): the batch's W3C trace context, which the row's run
    #: records as ``trace.parent`` and its first ``invoke_agent`` span links to.
    traceparent: str | None = None
    #: What the driver's trust allows of the workspace's brought files (``Trust.to_record``):
    #: a row shipped to a Ray node (docs/spec.md 8.6) is judged by it against the node's copy;
    #: ``--trust-workspace`` gives it to every row. None: this machine's own trust.
    trust: dict[str, Any] | None = None

    def run_options(
        self, reporter: Reporter | None = None, ledger: SharedBudget | None = None
    ) -> RunOptions:
        """The row's run options: the batch's record, in the batch's workspace; ``ledger``
        holds the batch's budget for a row that cannot reach its file (a shipped row)."""
        from ..base.costledger import CostLedger
        from ..base.truststore import Trust
        from ..run.runoptions import RunOptions

        if ledger is None and self.budget:
            ledger = CostLedger(self.budget, owner=ledger_owner(self.row))
        trust = None if self.trust is None else Trust.from_record(Path(self.workspace), self.trust)
        record = {
            **self.options,
            # Rows run side by side in one working tree: a snapshot after a row's call would
            # count the other rows' changes as its own (docs/spec.md 12.1).
            "snapshots": False,
        }
        return RunOptions.from_record(
            record, workspace=self.workspace, reporter=reporter, shared_budget=ledger, trust=trust
        )


def ledger_owner(row: int) -> str:
    """The name a row's reservations carry in the batch's budget ledger."""
    return f"row{row}"


@dataclass
class RowResult:
    """How a row's run ended this time."""

    row: int
    status: str
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None

    @classmethod
    def of_run(cls, row: int, status: str, usage: Usage, error: str | None) -> RowResult:
        """A row's result with its run's usage (one shape for every engine and path)."""
        return cls(
            row=row,
            status=status,
            turns=usage.turns,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=usage.cost_usd,
            error=error,
        )


def worker_name() -> str:
    """``host:pid`` of this process, as the batch file shows it for a running row."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run_row(
    task: RowTask, reporter: Reporter | None = None, *, ledger: SharedBudget | None = None
) -> RowResult:
    """Start or resume the row's run until it stops; never raises for a user-caused failure.
    With ``task.events`` the run's events go to ``events.jsonl`` beside its progress file,
    each tagged with the row (the batch copies them into its own stream); with
    ``task.traceparent`` the run starts under the batch's trace context and sends its spans.
    ``ledger``: the batch's budget, for a row that cannot reach its file."""
    if task.traceparent is None:
        return _run_row_watched(task, reporter, ledger)
    from ..base.traceids import TRACEPARENT_VARIABLE
    from ..otel.live import OtelReporter

    before = os.environ.get(TRACEPARENT_VARIABLE)
    os.environ[TRACEPARENT_VARIABLE] = task.traceparent
    tracer = OtelReporter()
    try:
        from ..run.events import Tee

        return _run_row_watched(task, tracer if reporter is None else Tee(reporter, tracer), ledger)
    finally:
        if before is None:
            os.environ.pop(TRACEPARENT_VARIABLE, None)
        else:
            os.environ[TRACEPARENT_VARIABLE] = before


def _run_row_watched(
    task: RowTask, reporter: Reporter | None, ledger: SharedBudget | None
) -> RowResult:
    if not task.events:
        return _run_row(task, reporter, ledger)
    from ..eventstream import EventStream
    from ..run.events import Tee

    progress = Path(task.progress)
    make_folder(progress.parent)
    stream = EventStream.open(str(progress.parent / "events.jsonl"), {"row": task.row})
    try:
        return _run_row(task, stream if reporter is None else Tee(reporter, stream), ledger)
    finally:
        stream.close_target()


def _run_row(task: RowTask, reporter: Reporter | None, ledger: SharedBudget | None) -> RowResult:
    from ..api import Choices, ResolvedInputs, ResumeRequest, StartRequest, resume_run, start_run

    progress = Path(task.progress)
    options = task.run_options(reporter, ledger)
    try:
        if progress.exists():
            choices = Choices(rerun_changed=task.rerun_changed, keep_completed=task.keep_completed)
            outcome = resume_run(progress, options, ResumeRequest(choices=choices))
        else:
            make_folder(progress.parent)
            request = StartRequest(
                task.workflow,
                ResolvedInputs(task.inputs),
                progress=progress,
                recording=task.recording,
            )
            outcome = start_run(request, options)
    except FlowError as error:
        usage = Usage()
        status = "failed"
        if progress.exists():
            try:
                from ..progress import load_progress

                run, _ = load_progress(progress)
                usage = run.usage
                status = "needs_review" if run.status == "needs_review" else "failed"
            except FlowError:
                pass
        return RowResult.of_run(task.row, status, usage, str(error))
    run = outcome.run
    cause = run.last_error.message if run.last_error and run.status != "completed" else None
    return RowResult.of_run(task.row, run.status, run.usage, cause)


class UsageReporter(Reporter):
    """Sends the run's usage after every model reply, for the batch's live totals."""

    def __init__(self, send: Any, row: int) -> None:
        self._send = send
        self._row = row

    def model_reply(self, step_id: str, usage: Usage, run_usage: Usage) -> None:
        self._send(
            {
                "event": "usage",
                "row": self._row,
                "input_tokens": run_usage.input_tokens,
                "output_tokens": run_usage.output_tokens,
                "cost_usd": run_usage.cost_usd,
            }
        )


def _serve(channel: IO[str]) -> None:
    def send(message: dict[str, Any]) -> None:
        # The batch process may be gone (killed): the row goes on to its checkpoint anyway.
        with contextlib.suppress(OSError, ValueError):
            channel.write(json.dumps(message) + "\n")
            channel.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        task = RowTask(**json.loads(line))
        send({"event": "started", "row": task.row, "worker": worker_name()})
        try:
            result = run_row(task, UsageReporter(send, task.row))
        except KeyboardInterrupt:
            # Stopped outside the run loop (the loop itself checkpoints and returns): the
            # row's file, if any, holds its last checkpoint.
            send({"event": "done", **asdict(RowResult(task.row, "interrupted"))})
            return
        send({"event": "done", **asdict(result)})


def _stop_when_orphaned(parent: int) -> None:
    """SIGTERM this process once the batch process that started it is gone.

    A batch killed by SIGKILL cannot tell its workers to stop; each notices within a second,
    checkpoints its row ``interrupted`` and exits, so ``flow resume`` finds no row locked.
    """
    while os.getppid() == parent:
        time.sleep(_ORPHAN_CHECK)
    os.kill(os.getpid(), signal.SIGTERM)


def main() -> None:
    """The local worker process: tasks on stdin, events on stdout, until stdin closes."""
    # The batch process forwards a stop as SIGTERM; the run loop checkpoints on it. Outside a
    # run it ends the loop the way Ctrl-C would.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    threading.Thread(target=_stop_when_orphaned, args=(os.getppid(),), daemon=True).start()
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    # Anything else printed goes to stderr, never into the event stream.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    try:
        _serve(channel)
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(OSError):
            channel.close()
