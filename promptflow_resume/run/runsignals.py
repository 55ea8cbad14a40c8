"""Signals during a run: the first one stops the run cleanly, a second one exits at once.

    with raise_interrupted():     # SIGINT/SIGTERM/SIGHUP → ``Interrupted`` in the main thread
        ...                       # the run loop; the engine checkpoints the run as interrupted
    with force_exit():            # while the final checkpoint is written: any signal exits
        ...

A hard exit is safe because every write is atomic or journaled: the file on disk is always the
previous or the next checkpoint.
"""

from __future__ import annotations

import os
import signal
from contextlib import AbstractContextManager
from types import FrameType

from ..base.stops import routed_to
from ..tools.declared import stop_running_commands


class Interrupted(BaseException):
    """Raised in the main thread by SIGINT, SIGTERM or SIGHUP (a BaseException, so that
    ``except Exception`` in tool code cannot swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _exit_now(signum: int, frame: FrameType | None) -> None:
    """Stop running commands and exit 130 at once (every write is atomic or journaled)."""
    stop_running_commands()
    os._exit(130)


def raise_interrupted() -> AbstractContextManager[None]:
    """Turn the first SIGINT/SIGTERM/SIGHUP into ``Interrupted``; a second one exits at once.

    The second signal can exit hard because every write is atomic or journaled: the file on
    disk is always the previous or the next checkpoint.
    """
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if received:
            _exit_now(signum, frame)
        received.append(signum)
        raise Interrupted(signum)

    return routed_to(handler)


def force_exit() -> AbstractContextManager[None]:
    """While the final checkpoint is written, any signal exits at once (the write is atomic)."""
    return routed_to(_exit_now)
