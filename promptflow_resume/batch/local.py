"""The ``local`` engine: rows run in worker processes on this machine.

Each worker is a long-lived ``python -m promptflow_resume.batch`` process (one import
of flow per worker, not per row) that takes one row at a time. Workers run in their own
session, so a Ctrl-C on the terminal reaches only the batch process, which forwards one
SIGTERM to every worker: each running row checkpoints ``interrupted`` and reports back. A
worker that dies (SIGKILL, out of memory) is replaced, and its row is taken up again by
another worker, where it resumes from its own checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from .rowevents import Done, EngineEvent, Lost, Started, UsageSeen
from .worker import RowResult, RowTask


class _Worker:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.row: int | None = None
        self.buffer = b""


class LocalEngine:
    """Worker processes on this machine, fed one row at a time over a pipe."""

    name = "local"

    def __init__(self, workers: int, *, log: Path | None = None) -> None:
        self.size = max(1, workers)
        self._workers: list[_Worker] = []
        self._selector = selectors.DefaultSelector()
        self._log: IO[bytes] | None = open(log, "ab") if log is not None else None  # noqa: SIM115
        self._stopping = False

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Crash points are aimed at the batch process itself; workers are killed by pid.
        env.pop("FLOW_CRASH_AT", None)
        # The workers import the same flow as this process, wherever it was imported from.
        package_root = str(Path(__file__).resolve().parent.parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, env.get("PYTHONPATH", "")) if p
        )
        return env

    def _spawn(self) -> _Worker:
        proc = subprocess.Popen(
            [sys.executable, "-m", "promptflow_resume.batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log if self._log is not None else subprocess.DEVNULL,
            env=self._env(),
            start_new_session=True,
        )
        worker = _Worker(proc)
        assert proc.stdout is not None
        self._selector.register(proc.stdout, selectors.EVENT_READ, worker)
        self._workers.append(worker)
        return worker

    def free_slots(self) -> int:
        """How many more rows can be submitted now."""
        busy = sum(1 for w in self._workers if w.row is not None)
        return 0 if self._stopping else self.size - busy

    def submit(self, task: RowTask) -> None:
        """Hand ``task`` to an idle worker (starting one if needed)."""
        worker = next((w for w in self._workers if w.row is None), None) or self._spawn()
        worker.row = task.row
        assert worker.proc.stdin is not None
        try:
            worker.proc.stdin.write(json.dumps(asdict(task)).encode("utf-8") + b"\n")
            worker.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the worker died while idle: its end of stream reports the row as lost

    def poll(self, timeout: float) -> Iterator[EngineEvent]:
        """Events from the workers, waiting at most ``timeout`` seconds for the first."""
        for key, _ in self._selector.select(timeout):
            worker: _Worker = key.data
            stream: Any = key.fileobj
            chunk = os.read(stream.fileno(), 65536)
            if chunk:
                worker.buffer += chunk
                *lines, worker.buffer = worker.buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield from self._event(worker, json.loads(line))
                continue
            # End of the stream: the worker exited or died.
            self._selector.unregister(stream)
            stream.close()
            self._workers.remove(worker)
            worker.proc.wait()
            if worker.row is not None:
                code = worker.proc.returncode
                how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
                yield Lost(worker.row, f"the worker running this row {how}")

    def _event(self, worker: _Worker, message: dict[str, Any]) -> Iterator[EngineEvent]:
        kind = message.pop("event")
        if kind == "started":
            yield Started(message["row"], message["worker"])
        elif kind == "usage":
            yield UsageSeen(
                message["row"],
                message["input_tokens"],
                message["output_tokens"],
                message["cost_usd"],
            )
        elif kind == "done":
            worker.row = None
            yield Done(RowResult(**message))

    def busy(self) -> int:
        """Rows submitted and not yet reported."""
        return sum(1 for w in self._workers if w.row is not None)

    def stop(self) -> None:
        """Stop taking rows and ask every running row to checkpoint and stop (SIGTERM once)."""
        if self._stopping:
            return
        self._stopping = True
        for worker in self._workers:
            if worker.row is not None and worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGTERM)

    def close(self) -> None:
        """Let idle workers exit (end of their input) and wait for them."""
        for worker in list(self._workers):
            if worker.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    worker.proc.stdin.close()
        for worker in list(self._workers):
            try:
                worker.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait()
            if worker.proc.stdout is not None:
                self._selector.unregister(worker.proc.stdout)
                worker.proc.stdout.close()
        self._workers.clear()
        self._selector.close()
        if self._log is not None:
            self._log.close()
