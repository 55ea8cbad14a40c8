"""The stops flow handles itself: Ctrl-C (SIGINT), SIGTERM and SIGHUP, routed for a while.

A run loop turns them into an orderly stop (the file says ``interrupted``); while a new run's
first checkpoint is written they are held until it is in place. Both route the three signals
to a handler of their own for the length of a block and restore what was there before::

    with routed_to(handler):
        run_the_loop()
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

#: The signals that stop a run (spec 4.2), by name.
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


@contextmanager
def routed_to(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """Route SIGINT, SIGTERM and SIGHUP to ``handler``, then restore the previous handlers.

    Only the main thread can set handlers: elsewhere the block runs with them unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {name: signal.getsignal(getattr(signal, name)) for name in STOP_SIGNALS}
    for name in STOP_SIGNALS:
        signal.signal(getattr(signal, name), handler)
    try:
        yield
    finally:
        for name, old in previous.items():
            signal.signal(getattr(signal, name), old)
