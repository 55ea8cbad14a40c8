"""Command tools: run a program the workflow declared under ``commands:``.

Only a ``CommandDecl`` from the workflow file can become a command tool (see
``tools.build_tools``); nothing in a progress file or in the model's output can name a program.
How one call runs:

- argv: the declared argv with each ``{param}`` placeholder replaced by the model's argument
  (checked and typed by ``workflow.commands.fill_argv`` against the declared parameters). A
  value fills exactly the argv element its placeholder sits in: spaces, quotes, ``;``, ``|``,
  ``$(...)`` stay literal characters of that one element. No shell is involved unless the
  workflow wrote ``shell: true``, which the loader already turned into ``sh -c SCRIPT`` (and
  a placeholder inside such a script is refused there).
- cwd: ``decl.cwd`` relative to the workspace root, which must stay inside the workspace
  (a symbolic link out of it is refused when the call runs).
- environment: ``PATH`` plus the variables named in ``decl.env``, with values from
  ``ToolContext.env`` (falling back to this process's environment); nothing else, so keys
  and tokens the workflow did not pass on are invisible to the command.
- stdin is ``/dev/null``; stdout and stderr are captured separately with the exit code.
- timeout: ``decl.timeout`` seconds; then the command's whole process group gets SIGTERM,
  and SIGKILL a second later. The command runs in its own session, so a Ctrl-C meant for
  ``flow`` does not reach it, and if ``flow`` is interrupted while waiting the group is
  stopped too. It runs under the supervisor (``promptflow_resume.base.supervisor``), so when
  ``flow`` dies, however it dies, the command's whole process tree is ended as well.

The result's ``content`` reads::

    exit code: 0
    --- stdout ---
    <stdout text>
    --- stderr ---
    <stderr text>

with a first line ``timed out after N s; ...`` when the timeout struck, ``exit code: -9
(killed by SIGKILL)`` for a signal, a section left out when its stream is empty and
``(no output)`` when both are. When stdout and stderr together exceed ``decl.max_output``
bytes each shown stream keeps its head and tail around a bracketed note saying how much was
left out, and ``data`` holds the complete output in the same layout (as bytes, for the
engine's sidecar file); binary output (NUL bytes) is never put into ``content``. A non-zero
exit, a timeout, a program that cannot be started and a bad argument are results with
``is_error=True``, never exceptions.

POSIX only (process groups and sessions).
"""

from __future__ import annotations

import contextlib
import copy
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..base.confine import PathEscapeError, confine, relative_name
from ..base.errors import InputError
from ..base.supervisor import check_program, supervised
from ..chat import ToolSpec
from ..workflow.commands import check_arguments, check_cwd, fill_argv
from ..workflow.records import CommandDecl
from .builtin import error_result, signature, validate_arguments
from .tool import ToolContext, ToolResult

#: Captured bytes kept per stream; more is read (so the command never blocks) and dropped.
MAX_CAPTURE_BYTES = 64 * 1024 * 1024
#: After SIGTERM, how long the process group has to exit before SIGKILL.
KILL_GRACE = 1.0
#: After the command exits, how long processes it left behind may keep its output open.
DRAIN_GRACE = 2.0
READ_CHUNK = 65536


class CommandTool:
    """A declared command, callable by the model with the declared parameters."""

    def __init__(self, decl: CommandDecl, workspace: Path) -> None:
        """Check ``decl.cwd`` stays inside ``workspace`` as written; WorkflowError if not."""
        self.decl = decl
        self.workspace = workspace
        self.idempotent = decl.idempotent
        description = decl.description or f"Run the command: {shlex.join(decl.argv)}"
        self.spec = ToolSpec(
            name=decl.name, description=description, parameters=_json_schema(decl.parameters)
        )
        check_cwd(decl, workspace)

    def argv(self, arguments: Mapping[str, Any]) -> list[str]:
        """The argv one call runs; InputError says what is wrong with ``arguments``."""
        # Placeholders and argument types are the workflow's own rules, shared with command
        # steps.
        values = check_arguments(self.decl, arguments)
        # The declared schema may say more than types and choices (a pattern, a range).
        problem = validate_arguments(self.spec.parameters, values)
        if problem is not None:
            raise InputError(problem)
        argv = fill_argv(self.decl, values)
        if any("\x00" in item for item in argv):
            raise InputError("an argument contains a NUL character, which no program can receive")
        return argv

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``PATH`` and the declared variables, values from ``env`` first."""
        out: dict[str, str] = {}
        for name in ("PATH", *self.decl.env):
            value = env.get(name, os.environ.get(name))
            if value is not None:
                out[name] = value
        out.setdefault("PATH", os.defpath)
        return out

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the command once; every failure is a result the model can read."""
        decl = self.decl
        try:
            argv = self.argv(arguments)
        except InputError as exc:
            return error_result(f"{exc.message} Expected: {signature(self.spec)}.")
        root = Path(ctx.workspace)
        try:
            cwd = confine(root, decl.cwd or ".")
        except PathEscapeError as exc:
            return error_result(f"command `{decl.name}` cannot run: cwd {exc}")
        if not cwd.is_dir():
            return error_result(
                f"command `{decl.name}` cannot run: its folder '{relative_name(cwd, root)}' "
                "does not exist in the workspace"
            )
        try:
            outcome = run_process(
                argv, cwd=cwd, env=self.environment(ctx.env), timeout=decl.timeout
            )
        except OSError as exc:
            reason = exc.strerror or str(exc)
            return error_result(
                f"command `{decl.name}` could not start `{argv[0]}`: {reason}. "
                "Check that the program is installed and on PATH."
            )
        return format_result(outcome, max_output=decl.max_output)


def command_tool(decl: CommandDecl, workspace: Path) -> CommandTool:
    """The tool for one declared command (WorkflowError when its cwd leaves ``workspace``)."""
    return CommandTool(decl, workspace)


def _json_schema(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """``parameters`` as standard JSON Schema, as providers require it.

    The workflow's ``list`` type becomes an array of strings, and no parameters at all an
    object schema without properties.
    """
    if not parameters:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    schema = copy.deepcopy(dict(parameters))
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict) and prop.get("type") == "list":
            prop["type"] = "array"
            prop.setdefault("items", {"type": "string"})
    return schema


# --- running a process --------------------------------------------------------------------


class _Capture:
    """Reads one pipe to its end on a thread, keeping at most ``MAX_CAPTURE_BYTES``."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.dropped = 0
        self._pipe = pipe
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        # The reader closes its own pipe: closing it from another thread while a read is
        # blocked would let the descriptor number be reused under the reader's feet.
        with self._pipe:
            fd = self._pipe.fileno()
            while True:
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except OSError:
                    return
                if not chunk:
                    return
                self._keep(chunk)

    def _keep(self, chunk: bytes) -> None:
        room = MAX_CAPTURE_BYTES - self.size
        kept = chunk[: max(room, 0)]
        if kept:
            self.chunks.append(kept)
            self.size += len(kept)
        self.dropped += len(chunk) - len(kept)

    def data(self) -> bytes:
        return b"".join(self.chunks)


class _Feed:
    """Writes ``data`` to a pipe on a thread and closes it; a program that exits or closes
    its input without reading it all is not an error."""

    def __init__(self, pipe: IO[bytes], data: bytes) -> None:
        self._pipe, self._data = pipe, data
        threading.Thread(target=self._write, daemon=True).start()

    def _write(self) -> None:
        with contextlib.suppress(OSError), self._pipe:
            self._pipe.write(self._data)


@dataclass(frozen=True)
class ProcessOutcome:
    """What one process run produced."""

    argv: tuple[str, ...]
    stdout: bytes
    stderr: bytes
    #: The exit code; negative for a signal (``-9``: SIGKILL).
    returncode: int
    timed_out: bool = False
    timeout: float | None = None
    #: Bytes beyond ``MAX_CAPTURE_BYTES`` that were read and thrown away.
    dropped: int = 0
    #: Processes left behind held the output open and were stopped.
    stopped_leftovers: bool = False


#: Process groups of the commands running now, so that an immediate exit (a second Ctrl-C)
#: can take them down too instead of leaving them to run on unobserved.
_RUNNING: set[int] = set()


def stop_running_commands() -> None:
    """SIGKILL the group of every command still running (call before ``os._exit``)."""
    for pgid in list(_RUNNING):
        _signal_group(pgid, signal.SIGKILL)


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    stdin: bytes | None = None,
) -> ProcessOutcome:
    """Run ``argv`` in its own process group and capture everything (see module docstring);
    ``stdin``, when given, is written to the program's standard input, which is then closed
    (a hook reads its event this way)."""
    limit = timeout if timeout and timeout > 0 else None
    # Under the supervisor, the command's whole tree dies with flow, however flow dies; what
    # it leaves running when it exits is dealt with here, as before (see DRAIN_GRACE).
    check_program(argv[0], cwd, env.get("PATH", os.defpath))
    proc = subprocess.Popen(
        supervised(argv, leave=True),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    _RUNNING.add(proc.pid)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(proc.stdout), _Capture(proc.stderr)
    if stdin is not None:
        assert proc.stdin is not None
        _Feed(proc.stdin, stdin)
    timed_out = stopped_leftovers = False
    try:
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop_group(proc)
        # The command has exited; processes it started may still hold the pipes open.
        if not _join(out, err, DRAIN_GRACE):
            stopped_leftovers = not timed_out
            _stop_group(proc, force=True)
            _join(out, err, DRAIN_GRACE)
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C) while waiting: take the group down
            _stop_group(proc, force=True)
            proc.wait()
        _RUNNING.discard(proc.pid)
    return ProcessOutcome(
        argv=tuple(argv),
        stdout=out.data(),
        stderr=err.data(),
        returncode=proc.returncode,
        timed_out=timed_out,
        timeout=limit,
        dropped=out.dropped + err.dropped,
        stopped_leftovers=stopped_leftovers,
    )


def _join(out: _Capture, err: _Capture, seconds: float) -> bool:
    """Wait for both readers to reach the end of their pipes; False if they did not."""
    deadline = time.monotonic() + seconds
    for capture in (out, err):
        capture.thread.join(max(0.0, deadline - time.monotonic()))
    return not (out.thread.is_alive() or err.thread.is_alive())


def _stop_group(proc: subprocess.Popen[bytes], *, force: bool = False) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``KILL_GRACE``."""
    pgid = proc.pid  # start_new_session made the command the leader of its own group
    if not force:
        _signal_group(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE)
    # Children may ignore SIGTERM or outlive the leader: SIGKILL whatever remains.
    _signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, sig)


# --- the result ---------------------------------------------------------------------------


def format_result(outcome: ProcessOutcome, *, max_output: int) -> ToolResult:
    """The ``ToolResult`` for a finished process, in the layout of the module docstring."""
    head = _header(outcome)
    streams = (("stdout", outcome.stdout), ("stderr", outcome.stderr))
    binary = any(b"\x00" in stream for _, stream in streams)
    total = len(outcome.stdout) + len(outcome.stderr)
    too_long = total > max_output
    budgets = _split_budget(len(outcome.stdout), len(outcome.stderr), max_output)
    parts = list(head)
    for (name, stream), budget in zip(streams, budgets, strict=True):
        if not stream:
            continue
        parts.append(f"--- {name} ---")
        if b"\x00" in stream:
            parts.append(f"[binary output, {len(stream)} bytes; not shown as text]")
        else:
            parts.append(head_and_tail(stream, budget).rstrip("\n"))
    if total == 0:
        parts.append("(no output)")
    if outcome.dropped:
        parts.append(f"[{outcome.dropped} more bytes of output were discarded]")
    content = "\n".join(parts) + "\n"
    data: bytes | None = None
    if too_long or binary:
        full = "\n".join(head).encode() + b"\n"
        for name, stream in streams:
            if stream:
                full += f"--- {name} ---\n".encode() + stream
                full += b"" if stream.endswith(b"\n") else b"\n"
        data = full
    failed = outcome.timed_out or outcome.returncode != 0
    return ToolResult(content=content, is_error=failed, exit_code=outcome.returncode, data=data)


def command_output(content: str) -> str:
    """What a successful command printed on stdout, read back from its result ``content``;
    anything else (a failure, a timeout, stderr only) is the whole result text.

    A command step's output (``${step:id}``) is this, so that a later prompt gets ``495``
    rather than the result's layout around it.
    """
    prefix = "exit code: 0\n--- stdout ---\n"
    if not content.startswith(prefix):
        return content
    stdout = content[len(prefix) :]
    cut = stdout.rfind("\n--- stderr ---\n")
    return (stdout[:cut] if cut >= 0 else stdout).rstrip("\n")


def _header(outcome: ProcessOutcome) -> list[str]:
    lines = []
    if outcome.timed_out:
        lines.append(
            f"timed out after {outcome.timeout:g} s; the command and every process it started "
            "were stopped"
        )
    code = outcome.returncode
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        lines.append(f"exit code: {code} (killed by {name})")
    else:
        lines.append(f"exit code: {code}")
    if outcome.stopped_leftovers:
        lines.append("(processes it left running kept the output open and were stopped)")
    return lines


def _split_budget(a: int, b: int, budget: int) -> tuple[int, int]:
    """Share ``budget`` bytes between two streams; a short one leaves the rest to the other."""
    if a + b <= budget:
        return a, b
    half = budget // 2
    if a <= half:
        return a, budget - a
    if b <= half:
        return budget - b, b
    return half, budget - half


def head_and_tail(data: bytes, limit: int) -> str:
    """``data`` as text; above ``limit`` bytes its head and tail around a note saying how many
    bytes of how many are not shown."""
    if len(data) <= limit:
        return data.decode("utf-8", errors="replace")
    head_len = limit // 2
    tail_len = limit - head_len
    # Cut at a line break when one is near, so the reader sees whole lines.
    cut = data.rfind(b"\n", 0, head_len)
    if cut >= head_len * 4 // 5:
        head_len = cut + 1
    tail_start = len(data) - tail_len
    nl = data.find(b"\n", tail_start)
    if nl != -1 and nl - tail_start <= tail_len // 5:
        tail_start = nl + 1
    head = data[:head_len].decode("utf-8", errors="replace")
    tail = data[tail_start:].decode("utf-8", errors="replace")
    omitted = tail_start - head_len
    note = f"[... {omitted} of {len(data)} bytes not shown ...]"
    return f"{head.rstrip(chr(10))}\n{note}\n{tail}"
