"""An exclusive lock on a file that exists only while it is held: a run's ``progress.md.lock``.

A lock file left behind after a run is committed by ``git add -A`` next to a progress file
shared in a repository. So the holder removes the file before it lets go, and a taker checks,
once it holds the lock, that the name still leads to the file it locked: a process that opened
the old file just before it was removed finds it gone and takes the lock again on a new file.
Without this check two processes could each hold a lock, on two files of one name (why
``filelock`` keeps Unix lock files). The lock is an ``flock``, so the kernel releases it when
its process dies, however it dies; such a process leaves the file, and the next taker simply
takes it::

    lock = RunLock(Path("progress.md.lock"))
    lock.acquire()            # LockHeld when another process holds it
    ...
    lock.release()            # the file is gone
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Any

#: How many times a taker tries again when the file it locked was removed meanwhile.
_RETRIES = 50
_HELD = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)


class LockHeld(Exception):
    """Another process holds the lock."""


class RunLock:
    """A non-blocking exclusive lock on ``path`` (see the module's docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        #: Where ``fcntl`` is missing (Windows): ``filelock``'s lock, whose file stays.
        self._fallback: Any = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None or self._fallback is not None

    def acquire(self) -> None:
        """Take the lock now; ``LockHeld`` when another process holds it, OSError when the
        file cannot be made or locked."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not on POSIX
            self._acquire_fallback()
            return
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        for _ in range(_RETRIES):
            fd = os.open(self.path, flags, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(fd)
                if error.errno in _HELD:
                    raise LockHeld(str(self.path)) from None
                raise
            if self._names(fd):
                self._fd = fd
                return
            os.close(fd)  # removed (or replaced) by the holder before us: try the new one
        raise LockHeld(str(self.path))

    def release(self, *, remove: bool = True) -> None:
        """Let go of the lock, removing its file first (``remove``) while still holding it."""
        if self._fallback is not None:  # pragma: no cover - not on POSIX
            self._fallback.release()
            self._fallback = None
            return
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if remove and self._names(fd):
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
        finally:
            os.close(fd)  # closing the file releases the flock

    def _names(self, fd: int) -> bool:
        """True when ``path`` still leads to the file open as ``fd``."""
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path, follow_symlinks=False))
        except OSError:
            return False

    def _acquire_fallback(self) -> None:  # pragma: no cover - not on POSIX
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.path), mode=0o600, thread_local=False, blocking=False)
        try:
            lock.acquire()
        except Timeout:
            raise LockHeld(str(self.path)) from None
        self._fallback = lock
