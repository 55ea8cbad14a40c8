"""Taking a run's lock: ``<progress>.lock``, held by the one process that writes the run, and
what a writer that crashed left behind (removed only while holding the lock)::

    lock = take_lock(path)          # or RunLockedError naming the owner (exit 6)
    clean_leftovers(path)
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from ..base.errors import RunLockedError
from ..base.runlock import LockHeld, RunLock
from ..base.safeopen import refuse_special
from .diskio import storage_error
from .owner import owner_path, read_owner
from .sidecar import folder_name


def lock_path(progress: str | Path) -> Path:
    """``<progress>.lock``: there only while a process holds the run (``base.runlock``)."""
    p = Path(progress)
    return p.with_name(p.name + ".lock")


def _read_owner(path: Path, wait: float = 1.0) -> dict[str, Any]:
    """The lock owner's pid, host and start time. A process that has just taken the lock
    writes them a moment later, so a missing or half-written file is read again for a while."""
    deadline = time.monotonic() + wait
    while True:
        owner = read_owner(path)
        if owner:
            return owner
        if time.monotonic() >= deadline:
            return {}
        time.sleep(0.02)


def take_lock(path: Path) -> RunLock:
    """Take the run's lock without waiting, or ``RunLockedError`` naming the owner (exit 6)."""
    # A lock that came with the run as a link to someone's file is refused, never followed.
    refuse_special(lock_path(path), what="lock file")
    refuse_special(owner_path(path), what="owner file")
    lock = RunLock(lock_path(path))
    try:
        lock.acquire()
    except LockHeld:
        owner = _read_owner(path)
        who = (
            f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}, "
            f"since {owner.get('since', '?')}"
            if owner
            else "owner unknown"
        )
        raise RunLockedError(
            f"this run is in use by another flow process ({who}).",
            path=path,
            hint=(
                "Wait for that process to finish, or stop it (Ctrl-C, or kill the pid on that "
                "host) and run this again. A process that died releases the lock by itself."
            ),
        ) from None
    except OSError as error:
        # The lock file lives beside the progress file: a folder that cannot be written
        # cannot hold a live run either.
        raise storage_error(error, path, "take the run's lock", resumable=False) from None
    return lock


def clean_leftovers(path: Path) -> None:
    """Remove the temp files a crashed writer of ``path`` left (only while holding its lock)."""
    prefix = f".{path.name}."
    with contextlib.suppress(OSError):
        for item in path.parent.iterdir():
            if item.name.startswith(prefix) and item.name.endswith(".tmp"):
                item.unlink()
    # Half-written sidecars (``.<name>.<pid>.tmp``) left in the sidecar folder; never
    # through a symlink, which could point anywhere.
    sidecars = path.parent / folder_name(path)
    if sidecars.is_symlink():
        return
    with contextlib.suppress(OSError):
        for item in sidecars.iterdir():
            if item.name.startswith(".") and item.name.endswith(".tmp"):
                item.unlink()
