"""The ``ray`` engine: each row is a Ray task running the same ``run_row`` as a local worker.

``ray.init()`` starts a Ray on this machine, or joins a cluster given by ``--address`` (or the
``RAY_ADDRESS`` variable). The batch process (the Ray driver) submits at most ``workers`` rows
at a time and gathers each task's ``RowResult``; it alone writes ``batch.md``. A task whose
worker dies is retried by Ray (``max_retries``); the retry finds the row's progress file and
resumes it, so nothing completed runs twice. Ctrl-C cancels the running tasks (Ray raises
``KeyboardInterrupt`` in each, and the run loop checkpoints ``interrupted``).

Every task reads and writes its row's files by absolute path: on a cluster of several
machines the batch folder, the workflow and the workspace must be on a filesystem every node
mounts at the same path (NFS, a shared volume), and the provider's API key must be set in the
nodes' environment. Needs the ``ray`` extra: ``pip install 'promptflow-resume[ray]'``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..base.errors import FlowError, InputError
from .events import Done, EngineEvent, Started
from .worker import RowResult, RowTask, run_row

#: How many times Ray runs a row again after its worker process died.
RAY_RETRIES = 2


def ray_row(fields: dict[str, Any]) -> dict[str, Any]:
    """The body of a row's Ray task: ``run_row`` on plain data (what crosses to the cluster)."""
    return asdict(run_row(RowTask(**fields)))


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

    def __init__(self, workers: int, *, address: str | None = None) -> None:
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
        try:
            ray.init(address=target, **options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise InputError(
                f"cannot connect to the Ray cluster at {target}: {error}",
                hint="Check --address (or RAY_ADDRESS), e.g. ray://head:10001 or auto.",
            ) from None
        self._task = ray.remote(max_retries=RAY_RETRIES)(ray_row)
        self._running: dict[Any, RowTask] = {}
        self._submitted: list[int] = []
        self._stopping = False

    def free_slots(self) -> int:
        """How many more rows can be submitted now."""
        return 0 if self._stopping else self.size - len(self._running)

    def submit(self, task: RowTask) -> None:
        """Submit the row as a Ray task."""
        ref = self._task.remote(asdict(task))
        self._running[ref] = task
        self._submitted.append(task.row)

    def poll(self, timeout: float) -> Iterator[EngineEvent]:
        """Results of finished tasks, waiting at most ``timeout`` seconds for the first."""
        submitted, self._submitted = self._submitted, []
        for row in submitted:
            yield Started(row, "ray")
        if not self._running:
            return
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
        self._ray.shutdown()
