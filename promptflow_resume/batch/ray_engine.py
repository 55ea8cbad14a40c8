"""The ``ray`` engine: each row is a Ray task running the same ``run_row`` as a local worker.

``ray.init()`` starts a Ray on this machine, or joins a cluster given by ``--address`` (or the
``RAY_ADDRESS`` variable). The batch process (the Ray driver) submits at most ``workers`` rows
at a time and gathers each task's ``RowResult``; it alone writes ``batch.md``. A task whose
worker dies is retried by Ray (``max_retries``); the retry resumes the row from its last
checkpoint, so nothing completed runs twice. Ctrl-C cancels the running tasks (Ray raises
``KeyboardInterrupt`` in each, and the run loop checkpoints ``interrupted``). Two ways for a
row's files (docs/spec.md 8.6):

- ``shared``: every task reads and writes its row's files by absolute path, so the batch
  folder, the workflow and the workspace must be on a filesystem every node mounts at the same
  path (NFS, a shared volume; or one machine).
- ``shipped``: nothing is shared. The workspace and the workflow travel once, as a ``Bundle``
  in Ray's object store; each task runs its row in a scratch folder on its node
  (``shipping.run_shipped``) and sends every write of the row's store to the driver, which
  alone writes the row's files (``relay``). Requests travel through ``RelayActor``, a small
  actor on the driver's node that queues them; the driver takes them between its waits for
  results, applies them and answers, and the task goes on only once its write is durable at
  the driver.

Variables the person names (``--ray-env NAME``) reach the tasks through the job's
``runtime_env``, never through a file that travels. Needs the ``ray`` extra:
``pip install 'promptflow-resume[ray]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..base.errors import FlowError, InputError
from ..progress.mirror import MirrorError
from .relay import Channel, Desk, Reply, Request
from .rowevents import Done, EngineEvent, Started, UsageSeen
from .shipping import Bundle, Shipping, run_shipped
from .worker import RowResult, RowTask, run_row

#: How many times Ray runs a row again after its worker process died.
RAY_RETRIES = 2
#: Seconds the relay waits for a request before it answers the driver's take with none.
TAKE_WAIT = 0.5


def ray_row(fields: dict[str, Any]) -> dict[str, Any]:
    """The body of a row's Ray task: ``run_row`` on plain data (what crosses to the cluster)."""
    return asdict(run_row(RowTask(**fields)))


def ray_row_shipped(fields: dict[str, Any], bundle: Bundle, relay: Any) -> dict[str, Any]:
    """The body of a shipped row's Ray task: ``run_shipped``, asking the driver through
    ``relay`` (a ``RelayActor`` handle) and waiting for each answer."""
    import ray

    def send(request: Request) -> Reply:
        try:
            reply: Reply = ray.get(relay.call.remote(request))
        except ray.exceptions.RayError as error:
            message = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise MirrorError(f"the batch's driver cannot be reached: {message}") from None
        return reply

    def notify(request: Request) -> None:
        relay.call.remote(request)

    channel = Channel(send, int(fields["row"]), notify=notify)
    return asdict(run_shipped(fields, bundle, channel))


class RelayActor:
    """Carries shipped rows' requests to the driver and its answers back (an async Ray actor
    on the driver's node: its methods share one event loop, so they need no lock)."""

    def __init__(self) -> None:
        self._queue: list[tuple[int, Request]] = []
        self._answers: dict[int, asyncio.Future[Reply]] = {}
        self._count = 0
        self._ready = asyncio.Event()

    async def call(self, request: Request) -> Reply:
        """A task's request: queued for the driver; returns the driver's answer."""
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._count += 1
        self._answers[self._count] = future
        self._queue.append((self._count, request))
        self._ready.set()
        return await future

    async def exchange(
        self, replies: list[tuple[int, Reply]], wait: float
    ) -> list[tuple[int, Request]]:
        """The driver's turn: its answers, each to the task that waits for it; then every
        queued request (waiting up to ``wait`` seconds for one). One call both ways, so a
        request costs the driver one round trip."""
        for number, reply in replies:
            future = self._answers.pop(number, None)
            if future is not None and not future.done():
                future.set_result(reply)
        if not self._queue:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._ready.wait(), wait)
        taken, self._queue = self._queue, []
        self._ready.clear()
        return taken


def _status_from_file(task: RowTask, why: str) -> RowResult:
    """A row whose task gave no result: its own progress file says where it stopped."""
    from ..progress import load_progress

    progress = Path(task.progress)
    if not progress.exists():
        return RowResult(task.row, "interrupted" if "cancel" in why else "failed", error=why)
    try:
        run, _ = load_progress(progress)
    except FlowError as error:
        return RowResult(task.row, "failed", error=str(error))
    # A run still marked running was stopped mid-way (its task was cancelled or died).
    status = "interrupted" if run.status == "running" else run.status
    return RowResult.of_run(task.row, status, run.usage, None if status == "completed" else why)


class RayEngine:
    """Rows as Ray tasks, at most ``workers`` at a time."""

    name = "ray"

    def __init__(
        self,
        workers: int,
        *,
        address: str | None = None,
        folder: Path | None = None,
        shipping: Shipping | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise InputError(
                "--engine ray needs Ray, which is not installed.",
                hint="Install it with: pip install 'promptflow-resume[ray]'.",
            ) from None
        self._ray = ray
        self.size = max(1, workers)
        target = address or os.environ.get("RAY_ADDRESS") or None
        options: dict[str, Any] = {
            "ignore_reinit_error": True,
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if target is None:
            # A Ray of our own: enough CPU slots for every worker (rows wait on the network).
            options["num_cpus"] = max(self.size, os.cpu_count() or 1)
        if env:
            # The variables the person named (--ray-env) reach every task of the job.
            options["runtime_env"] = {"env_vars": dict(env)}
        # Ray prints the cluster's messages to the driver ("Task ... failed. There are 2
        # retries remaining") on standard output, where `flow batch --json` writes its answer:
        # while Ray runs, what goes to standard output goes to standard error.
        self._stdout = sys.stdout
        sys.stdout = sys.stderr
        if ray.is_initialized():
            # A connection this process still holds (a batch before this one that stopped
            # between connecting and closing) would be reused as it is, with another address
            # and without this batch's --ray-env: this batch joins the Ray it was given.
            ray.shutdown()
        try:
            ray.init(address=target, **options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            sys.stdout = self._stdout
            raise InputError(
                f"cannot connect to the Ray cluster at {target}: {error}",
                hint="Check --address (or RAY_ADDRESS), e.g. ray://head:10001 or auto.",
            ) from None
        self._task: Any = ray.remote(max_retries=RAY_RETRIES)(ray_row)
        self._running: dict[Any, RowTask] = {}
        self._submitted: list[int] = []
        self._stopping = False
        self._desk: Desk | None = None
        if shipping is not None:
            self._ship(shipping, folder or Path.cwd())

    def _ship(self, shipping: Shipping, folder: Path) -> None:
        """Rows whose files travel: the bundle in the object store, the relay on this node."""
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._desk = Desk(folder)
        self._bundle = ray.put(shipping.bundle)
        try:
            here: Any = NodeAffinitySchedulingStrategy(
                ray.get_runtime_context().get_node_id(), soft=True
            )
        except Exception:  # a client connection (ray://) has no node of its own
            here = "DEFAULT"
        # A relay whose node dies (the driver's own, or another with a client connection) is
        # started again, and the calls it held are sent again: every request may be applied
        # twice (an append names its offset, a fold or a sidecar is written whole).
        relay = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(RelayActor)
        self._relay = relay.options(scheduling_strategy=here).remote()
        self._take: Any = None
        self._task = ray.remote(max_retries=RAY_RETRIES)(ray_row_shipped)

    def free_slots(self) -> int:
        """How many more rows can be submitted now."""
        return 0 if self._stopping else self.size - len(self._running)

    def submit(self, task: RowTask) -> None:
        """Submit the row as a Ray task."""
        if self._desk is None:
            ref = self._task.remote(asdict(task))
        else:
            # The bundle holds real paths: the task's must be real too to be found in it.
            task = replace(task, workspace=os.path.realpath(task.workspace))
            ref = self._task.remote(asdict(task), self._bundle, self._relay)
        self._running[ref] = task
        self._submitted.append(task.row)

    def _serve(self, timeout: float) -> Iterator[EngineEvent]:
        """Answer the shipped rows' requests until a task is ready or ``timeout`` passes."""
        ray, desk = self._ray, self._desk
        assert desk is not None
        deadline = time.monotonic() + timeout
        while True:
            if self._take is None:
                self._take = self._relay.exchange.remote([], TAKE_WAIT)
            left = max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait([*self._running, self._take], num_returns=1, timeout=left)
            if self._take not in ready:
                return
            try:
                taken = ray.get(self._take)
            except ray.exceptions.RayActorError:
                # The relay is being started again: its waiting tasks will ask again.
                self._take = None
                continue
            replies = [(n, desk.handle(request)) for n, request in taken]
            self._take = self._relay.exchange.remote(replies, TAKE_WAIT)
            for row, (inputs, outputs, cost) in desk.usage.items():
                yield UsageSeen(row, inputs, outputs, cost)
            desk.usage.clear()
            if time.monotonic() >= deadline:
                return

    def poll(self, timeout: float) -> Iterator[EngineEvent]:
        """Results of finished tasks, waiting at most ``timeout`` seconds for the first."""
        submitted, self._submitted = self._submitted, []
        for row in submitted:
            yield Started(row, "ray")
        if not self._running:
            return
        if self._desk is not None:
            yield from self._serve(timeout)
            timeout = 0
        ready, _ = self._ray.wait(list(self._running), num_returns=1, timeout=timeout)
        # Take every task that is ready, not just the first.
        if ready:
            ready, _ = self._ray.wait(
                list(self._running), num_returns=len(self._running), timeout=0
            )
        for ref in ready:
            task = self._running.pop(ref)
            try:
                result = RowResult(**self._ray.get(ref))
            except self._ray.exceptions.TaskCancelledError:
                result = _status_from_file(task, "cancelled by a stop of the batch")
            except self._ray.exceptions.RayError as error:
                message = (
                    str(error).strip().splitlines()[0]
                    if str(error).strip()
                    else type(error).__name__
                )
                result = _status_from_file(task, f"the Ray task failed: {message}")
            if self._desk is not None:
                self._desk.release(task.row)
            yield Done(result)

    def busy(self) -> int:
        """Rows submitted and not yet reported."""
        return len(self._running)

    def stop(self) -> None:
        """Cancel the running tasks: each row checkpoints ``interrupted``."""
        if self._stopping:
            return
        self._stopping = True
        for ref in self._running:
            self._ray.cancel(ref, force=False)

    def close(self) -> None:
        """Disconnect from Ray (and stop it, if this process started it)."""
        if self._desk is not None:
            self._desk.close()
        self._ray.shutdown()
        sys.stdout = self._stdout
