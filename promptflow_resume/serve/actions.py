"""What a person can do from the dashboard, each through the library exactly as the command
line does it, so every decision is recorded in the progress file as ``flow approve`` would
record it:

- ``approve`` / ``deny`` held tool calls (``api.decide_calls``), ``answer`` a question
  (``decisions.answer``: the text as typed, never ``@FILE``, which would read a file the
  server does not serve);
- ``resume`` a stopped run: a real ``flow resume`` process, its output kept for the page;
- ``merge`` / ``discard`` a worktree run (``worktree``); the review is a page of its own.

``ACTIONS`` maps a form's action name to its function. Comparing two runs or two versions
(``flow diff``) changes nothing, so it is a page (``/compare``), not an action.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import InputError

#: Lines of a resume's output kept for its page.
KEEP_LINES = 2000


@dataclass
class Process:
    """A ``flow resume`` started from the dashboard, and what it printed so far."""

    path: Path
    popen: subprocess.Popen[bytes]
    lines: list[str] = field(default_factory=list)
    exit_code: int | None = None

    @property
    def running(self) -> bool:
        """Whether it still runs."""
        return self.exit_code is None


class Processes:
    """The resumes this server started, one at most per run."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.by_path: dict[Path, Process] = {}
        self._lock = threading.Lock()

    def start(self, path: Path) -> Process:
        """Start ``flow resume PATH`` in the folder ``flow serve`` started in (refused while
        one started here still runs; another owner is refused by ``flow resume`` itself)."""
        with self._lock:
            known = self.by_path.get(path)
            if known is not None and known.running:
                raise InputError(f"{path}: a flow resume started here is still running.")
            env = {**os.environ, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
            popen = subprocess.Popen(
                [sys.executable, "-m", "promptflow_resume", "resume", str(path)],
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
            )
            process = Process(path, popen)
            self.by_path[path] = process
        threading.Thread(target=_drain, args=(process,), daemon=True).start()
        return process

    def of(self, path: Path) -> Process | None:
        """The last resume started here for ``path``."""
        return self.by_path.get(path)

    def stop_all(self) -> None:
        """Interrupt every resume still running (each checkpoints ``interrupted``)."""
        for process in list(self.by_path.values()):
            if process.running:
                process.popen.terminate()
        for process in list(self.by_path.values()):
            try:
                process.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.popen.kill()


def _drain(process: Process) -> None:
    assert process.popen.stdout is not None
    for raw in process.popen.stdout:
        process.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
        if len(process.lines) > KEEP_LINES:
            del process.lines[: len(process.lines) - KEEP_LINES]
    process.exit_code = process.popen.wait()


Form = Mapping[str, list[str]]


def _one(form: Form, name: str) -> str:
    values = form.get(name) or [""]
    return values[0]


def approve(path: Path, form: Form, processes: Processes) -> str:
    """Approve the ticked calls (or every one waiting with ``all``)."""
    from ..api import decide_calls

    calls = form.get("call", [])
    every = _one(form, "all") == "1"
    reason = _one(form, "reason").strip() or None
    decided = decide_calls(str(path), calls, approve=True, every=every, reason=reason)
    return _decided_text(decided.decision, [c.call_id for c in decided.calls], decided.pending)


def deny(path: Path, form: Form, processes: Processes) -> str:
    """Deny the ticked calls with the reason given (the model gets it as the result)."""
    from ..api import decide_calls

    reason = _one(form, "reason").strip()
    if not reason:
        raise InputError("a denial needs a reason: the model gets it as the call's result.")
    decided = decide_calls(str(path), form.get("call", []), approve=False, reason=reason)
    return _decided_text(decided.decision, [c.call_id for c in decided.calls], decided.pending)


def _decided_text(decision: str, calls: list[str], pending: list[str]) -> str:
    text = f"{decision}: {', '.join(calls)}."
    return text + (f" Still waiting: {', '.join(pending)}." if pending else " Resume the run.")


def answer(path: Path, form: Form, processes: Processes) -> str:
    """Write the answer into the file where the question waits (a child's file, maybe)."""
    from ..run.approvals import answer as write_answer

    where = write_answer(path, _one(form, "text"))
    return f"answered in {where.name}. Resume the run."


def resume(path: Path, form: Form, processes: Processes) -> str:
    """Start ``flow resume`` for the run; its output shows on the run's page."""
    processes.start(path)
    return "flow resume started."


def merge(path: Path, form: Form, processes: Processes) -> str:
    """``flow merge`` (``squash`` ticked: ``--squash``)."""
    from ..worktree import merge_run

    result = merge_run(path, squash=_one(form, "squash") == "1")
    if result.commit is None:
        return f"nothing to merge: {result.into} already has the changes of {result.branch}."
    return f"{result.branch} merged into {result.into} ({result.commit[:12]})."


def discard(path: Path, form: Form, processes: Processes) -> str:
    """``flow discard``: only with the confirmation box ticked."""
    from ..worktree import discard_run

    if _one(form, "confirm") != "1":
        raise InputError("tick the box to confirm: a discarded worktree's changes are gone.")
    result = discard_run(path)
    return f"discarded: worktree {result.worktree} and branch {result.branch} removed."


#: Form action name → what it does; each returns the sentence shown on the run's page.
ACTIONS: dict[str, Callable[[Path, Form, Processes], str]] = {
    "approve": approve,
    "deny": deny,
    "answer": answer,
    "resume": resume,
    "merge": merge,
    "discard": discard,
}
