"""Who owns a live run: ``<progress>.owner`` and whether that process still exists.

The writer of a run records ``{"pid", "host", "since", "pid_start"}`` next to the progress
file as it takes the lock. ``pid_start`` identifies the process beyond its pid: on Linux the
boot id and the process's start time in clock ticks since boot (``/proc/<pid>/stat``, field
22), so a pid the system has since given to another process does not make a dead owner look
alive. Where ``/proc`` is missing the check falls back to the pid alone::

    write_owner(path)                   # by the writer, under the lock
    info = read_owner(path)             # {} when there is none
    alive = owner_alive(path)           # False for a dead or reused pid, or another host
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..base.durable import replace_file, temp_name
from ..base.safeopen import NOFOLLOW, read_regular

#: An owner record is a few dozen bytes; a larger file is not one flow wrote.
MAX_OWNER_BYTES = 64 * 1024


def owner_path(progress: str | Path) -> Path:
    """``<progress>.owner``: JSON ``{pid, host, since, pid_start}`` of the live writer."""
    p = Path(progress)
    return p.with_name(p.name + ".owner")


def process_start(pid: int) -> str | None:
    """``<boot id>:<start ticks>`` of process ``pid``, or None where it cannot be known (no
    ``/proc``, or no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces or ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 20:
        return None
    ticks = fields[19].decode("ascii", "replace")  # field 22 overall
    return f"{_boot_id()}:{ticks}"


_BOOT_ID: list[str] = []


def _boot_id() -> str:
    # Start ticks count from boot: the boot id tells one boot's tick 1234 from another's.
    if not _BOOT_ID:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
                _BOOT_ID.append(handle.read().strip())
        except OSError:
            _BOOT_ID.append("")
    return _BOOT_ID[0]


def host_name() -> str:
    """This machine's name, as ``socket.gethostname()`` gives it (the kernel's node name),
    without importing socket on every command that reads a run."""
    uname = getattr(os, "uname", None)
    if uname is None:  # Windows
        import socket

        return socket.gethostname()
    return str(uname().nodename)


def write_owner(progress: Path) -> dict[str, Any]:
    """Record this process as the owner of ``progress`` (atomic replace; raises OSError);
    the record written."""
    info: dict[str, Any] = {
        "pid": os.getpid(),
        "host": host_name(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    start = process_start(os.getpid())
    if start is not None:
        info["pid_start"] = start
    replace_file(owner_path(progress), (json.dumps(info) + "\n").encode())
    return info


def note_request(progress: Path, owner: dict[str, Any], request: dict[str, Any] | None) -> None:
    """Rewrite the owner record ``owner`` with the model request in flight (``{"step",
    "turn", "since"}``; None: none), for readers (``flow status``) to say what a live run
    waits for. The same atomic rename without an fsync: a crash that loses the note loses
    nothing, since the owner is gone too (raises OSError)."""
    info = {k: v for k, v in owner.items() if k != "request"}
    if request is not None:
        info["request"] = request
    target = owner_path(progress)
    tmp = temp_name(target)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
    try:
        os.write(fd, (json.dumps(info) + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, target)


#: Seconds a model request lasts before the owner record says it is in flight.
REQUEST_NOTE_DELAY = 0.2


class RequestNotes:
    """Notes the model request in flight in the owner record (``write``, ``note_request``
    bound to a run) once it has lasted ``delay`` seconds: a request that ends sooner, and its
    end, are never written. Two renames a turn cost about 0.4 ms each on these machines, a
    third of flow's own work on a turn of an instant model (``bench/engine_bench.py``); what
    ``flow status`` says of a request a person could wait for is the same, with the time it
    started.

    One thread waits for the notes that fall due; it wakes when a request starts while it is
    idle (or one falls due before the time it waits for), or at a note's due time: for a run
    of quick turns, about once a ``delay``.
    """

    def __init__(self, write: Callable[[dict[str, Any] | None], None], delay: float) -> None:
        self._write = write
        self.delay = delay
        self._cond = threading.Condition()
        self._pending: dict[str, Any] | None = None
        self._due = 0.0
        #: Whether the record says a request is in flight now.
        self._noted = False
        #: The thread waits for a request (idle), or until this moment (``time.monotonic``).
        self._idle = False
        self._until = 0.0
        self._closed = False
        self._thread: threading.Thread | None = None

    def note(self, request: dict[str, Any] | None) -> None:
        """A request started (its note), or the one in flight ended (None)."""
        with self._cond:
            if self._closed:
                return
            if request is None:
                self._pending = None
                if self._noted:
                    self._put(None)
                return
            self._pending = request
            self._due = time.monotonic() + self.delay
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._wait, name="flow-request-notes", daemon=True
                )
                self._thread.start()
            elif self._idle or self._due < self._until:
                self._cond.notify()

    def close(self) -> None:
        """Write no more notes (the owner record is about to go)."""
        with self._cond:
            self._closed = True
            self._pending = None
            self._cond.notify()

    def _wait(self) -> None:
        with self._cond:
            while not self._closed:
                if self._pending is None:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                    continue
                left = self._due - time.monotonic()
                if left > 0:
                    self._until = self._due
                    self._cond.wait(left)
                    continue
                self._put(self._pending)
                self._pending = None

    def _put(self, request: dict[str, Any] | None) -> None:
        with contextlib.suppress(OSError):
            self._write(request)
            self._noted = request is not None


def read_owner(progress: Path) -> dict[str, Any]:
    """The owner record of ``progress``, or ``{}`` when there is none or it is unreadable.

    An owner file that is a link, a pipe or a device is refused (``SpecialFileError``): it
    did not come from flow. Only the first ``MAX_OWNER_BYTES`` are read.
    """
    try:
        data = read_regular(owner_path(progress), MAX_OWNER_BYTES, what="owner file")
        if data is None or len(data) > MAX_OWNER_BYTES:
            return {}
        owner = json.loads(data)
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def record_alive(owner: dict[str, Any], *, host: str | None = None) -> bool:
    """True when the process an owner record names is alive on this host (same start time)."""
    pid = owner.get("pid")
    if owner.get("host") != (host or host_name()):
        return False
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    except OSError:
        return False
    recorded = owner.get("pid_start")
    if isinstance(recorded, str):
        current = process_start(pid)
        if current is not None and current != recorded:
            return False  # the pid now belongs to a process started later
    return True


def owner_alive(progress: Path, *, host: str | None = None) -> bool:
    """True when the process recorded as owning ``progress`` is alive on this host.

    Reads only ``<progress>.owner``; never touches the run's lock (trying it could make a run
    that is just starting fail).
    """
    owner = read_owner(progress)
    return bool(owner) and record_alive(owner, host=host)
