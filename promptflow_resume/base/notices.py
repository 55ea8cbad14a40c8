"""Notices: one line a person should read once, however often the library meets its cause.

Some things a reader notices are not errors and belong to no one command's output: a progress
file written by a newer flow is read, and its keys this flow does not know are kept (docs/spec.md
2.5). The library calls ``notify`` wherever it meets one; each key is told once per process.
The command line sets a sink that prints them on stderr as they come; a program using the
library without a sink collects them with ``drain``::

    notify("progress.md", "progress.md: written by a newer flow ...")
    set_sink(lambda text: print(f"notice: {text}", file=sys.stderr))
    drain()        # the notices told since the last drain, when no sink is set
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

_lock = threading.Lock()
_told: set[str] = set()
_pending: list[str] = []
_sink: Callable[[str], None] | None = None


def notify(key: str, text: str) -> None:
    """Tell ``text`` unless a notice with ``key`` was told already in this process."""
    with _lock:
        if key in _told:
            return
        _told.add(key)
        sink = _sink
        if sink is None:
            _pending.append(text)
            return
    sink(text)


def set_sink(sink: Callable[[str], None] | None) -> None:
    """Send every later notice (and those collected so far) to ``sink``; None collects them."""
    global _sink
    with _lock:
        _sink = sink
        waiting = list(_pending) if sink is not None else []
        if sink is not None:
            _pending.clear()
    for text in waiting:
        if sink is not None:
            sink(text)


def drain() -> list[str]:
    """The notices collected since the last drain (none are collected while a sink is set)."""
    with _lock:
        out = list(_pending)
        _pending.clear()
        return out


def forget() -> None:
    """Forget which notices were told (each is told again): for a process that serves many
    requests over time, and for tests."""
    with _lock:
        _told.clear()
        _pending.clear()


@contextlib.contextmanager
def withheld() -> Iterator[None]:
    """Tell nothing of what is noticed inside the block (a command whose own output says the
    same, such as ``flow validate --strict``'s error); the sink is restored after it."""
    global _sink
    with _lock:
        before, _sink = _sink, None
        waiting = len(_pending)
    try:
        yield
    finally:
        with _lock:
            del _pending[waiting:]
            _sink = before
