"""The process of a stdio MCP server: how it is started, what its stderr says, how it stops.

A stdio server runs under the supervisor (``promptflow_resume.base.supervisor``), so that the
server's whole process tree — ``npx`` → ``sh -c`` → ``node``, ``uvx`` → ``python``, ``docker
run`` — dies with ``flow``, however ``flow`` dies::

    command, args = guarded_command(config)      # python -I -S supervisor.py PID -- CMD ARGS
    stderr = ServerStderr(log_path, redact)       # pass stderr.writer as the server's stderr
    ...
    stderr.stop_now()                             # Ctrl-C during a call: end the tree at once
    stderr.tail()                                 # the last lines, for a server that failed

The supervisor announces its pid on the first stderr line; ``ServerStderr`` takes that line
out and keeps the pid, because the MCP SDK starts the process and does not tell it.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from ..base.errors import SpecialFileError
from ..base.safeopen import open_append
from ..base.supervisor import announced_pid, check_program, supervised
from .mcp_records import McpServerConfig

#: How many of a server's last stderr lines an error message shows, and how much of each.
TAIL_LINES = 10
_TAIL_WIDTH = 300


def guarded_command(config: McpServerConfig) -> tuple[str, list[str]]:
    """The command and arguments that start a stdio server under the supervisor.

    A program that cannot be found is a ``FileNotFoundError`` here, as it would be when
    started directly (the supervisor would only exit 127).
    """
    command, args = config.command or "", list(config.args)
    path = config.env.get("PATH", os.environ.get("PATH", os.defpath))
    check_program(command, config.cwd or Path.cwd(), path)
    argv = supervised([command, *args], announce=True)
    return argv[0], argv[1:]


class ServerStderr:
    """A server's stderr: redacted line by line into a log file (or dropped without one),
    its last lines kept for an error message, the supervisor's pid taken from its first."""

    def __init__(self, path: Path | None, redact: Callable[[str], str]) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "rb")
        self._path = path
        self._redact = redact
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        #: The supervisor's pid, once its first line has been read.
        self.supervisor_pid: int | None = None
        self._thread = threading.Thread(target=self._copy, daemon=True, name="flow-mcp-stderr")
        self._thread.start()

    def started(self) -> None:
        """The server has its own copy of the pipe: close ours so its exit ends the log."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def _copy(self) -> None:
        out = None
        first = True
        try:
            if self._path is not None:
                # Never through a link (refused before the start, too); without its log the
                # server's output is still drained, so the server never blocks on a full pipe.
                with contextlib.suppress(OSError, SpecialFileError):
                    fd = open_append(self._path, what="MCP server error log")
                    out = os.fdopen(fd, "w", encoding="utf-8")
            for raw in self._reader:
                line = raw.decode("utf-8", "replace")
                if first:
                    first = False
                    pid = announced_pid(line)
                    if pid is not None:
                        self.supervisor_pid = pid
                        continue
                clean = self._redact(line)
                if clean.strip():
                    self._tail.append(clean.rstrip()[:_TAIL_WIDTH])
                if out is not None:
                    out.write(clean)
                    out.flush()
        except (OSError, ValueError):
            pass
        finally:
            self._reader.close()
            if out is not None:
                out.close()

    def tail(self, wait: float = 1.0) -> list[str]:
        """The last non-blank lines (redacted), after waiting up to ``wait`` seconds for the
        server's end of the pipe to close (a server that failed has usually exited)."""
        self._thread.join(wait)
        return list(self._tail)

    def stop_now(self) -> None:
        """Ask the supervisor to end the server's tree now (SIGTERM, then SIGKILL shortly)."""
        pid = self.supervisor_pid
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)

    def close(self) -> None:
        """Close our end; the copying thread ends when the server's end closes too."""
        with contextlib.suppress(OSError):
            self.writer.close()


def tail_text(lines: list[str]) -> str:
    """The sentence an error message gives a server's last stderr lines ("" without any)."""
    if not lines:
        return ""
    return " Its error output ended with: " + " | ".join(lines) + "."


def folders_made(folder: Path) -> list[Path]:
    """``folder`` and its missing parents, deepest first: the ones ``mkdir`` would make."""
    made: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        made.append(folder)
        folder = folder.parent
    return made


def remove_start_logs(made: list[Path], logs: list[Path]) -> None:
    """After a failed first start: remove the logs written into folders this start made, and
    those folders when nothing else is in them (a folder that holds a run is never made here)."""
    if not made:
        return
    for log in logs:
        if log.parent in made:
            with contextlib.suppress(OSError):
                log.unlink()
    for folder in made:  # deepest first
        with contextlib.suppress(OSError):
            folder.rmdir()
