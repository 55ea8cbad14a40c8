"""When Python's cycle collector runs: paused while a run is read, and kept off what lives
through a run while it executes; and paused while a command starts, until its run does.

Reading a long run allocates a few objects per transcript entry (the entry, its strings, its
digest) and never a reference cycle, so the collector has nothing to find there; yet with
CPython's default thresholds it walks the whole growing heap several times while 30,000
entries are read (about 60 ms of a 400 ms resume, measured with ``gc.disable``). Both
helpers restore what they found, so a program that uses the library keeps its own settings::

    with long_lived():
        run = read_a_long_file()
    with during_run():
        execute_the_run()

The ``flow`` command pauses it from its entry (``until_run``): starting a command builds
modules, classes and the records of the files it reads, all meant to live on, and a resumed
run's path to its first request let the collector pass over them about sixty times (some
8 ms) for nothing; the first run to start (``during_run``) or the command's end resumes it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

#: The oldest generation's threshold while a run executes (CPython's default is 10).
RUN_GEN2_THRESHOLD = 100

#: Runs executing now in this process (a sub-workflow's run executes inside its parent's):
#: only the outermost sets the collector up and restores it.
_runs = 0
_runs_lock = threading.Lock()
#: Whether the outermost run froze what it started with (and so unfreezes all at its end).
_froze_for_run = False
#: The pause of ``until_run`` while it lasts (None once a run or the command ended it).
_start_pause: AbstractContextManager[None] | None = None


@contextmanager
def long_lived() -> Iterator[None]:
    """For a block that makes many objects meant to live on (a run read from its file, the
    messages of a resumed run's first request): no automatic collection inside it, and what
    exists at its end joins the oldest generation at once, so the young collections that
    follow do not walk it again (they did: 11 ms for the first, 9 for the next, after
    reading 30,000 entries). Inside a run (``during_run``) it is set aside with what the run
    started with, until the run ends.

    Garbage made inside the block is freed as usual (reference counts); a cycle among it
    waits for the next full collection. The previous state is restored, even on error; a
    program that froze objects itself (``gc.freeze``) keeps them frozen.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _runs and _froze_for_run:
            gc.freeze()  # inside a run: set aside with what the run started with
        elif gc.get_freeze_count() == 0:
            gc.freeze()  # everything tracked moves to the permanent generation ...
            gc.unfreeze()  # ... and from there to the oldest one
        if was_enabled:
            gc.enable()


@contextmanager
def during_run() -> Iterator[None]:
    """While a run executes: what exists when it starts (the loaded transcript, the imported
    modules) is set aside from collection, and full passes over what the run adds come ten
    times less often; both are undone at the end.

    Young garbage is still collected as before. Objects set aside are freed by reference
    counting as usual; a cycle among them that becomes garbage during the run is collected
    once the run ends.
    """
    global _runs, _froze_for_run
    with _runs_lock:
        _end_start_pause()
        _runs += 1
        outermost = _runs == 1
        before = gc.get_threshold()
        # A program that froze objects itself keeps them frozen: nothing is frozen for it.
        freeze = outermost and gc.get_freeze_count() == 0
        if outermost:
            if freeze:
                gc.freeze()
                _froze_for_run = True
            gc.set_threshold(before[0], before[1], max(before[2], RUN_GEN2_THRESHOLD))
    try:
        yield
    finally:
        with _runs_lock:
            _runs -= 1
            if outermost:
                gc.set_threshold(*before)
            if freeze:
                _froze_for_run = False
                gc.unfreeze()


@contextmanager
def until_run() -> Iterator[None]:
    """For a program's start: no automatic collection from here until the first run starts
    (``during_run``) or the block ends, whichever comes first; then what exists joins the
    oldest generation (as at the end of ``long_lived``) and the collector is as before.

    Garbage is still freed by reference counts meanwhile; only cycles wait. A block inside a
    block of its own is a no-op: the outer pause lasts.
    """
    global _start_pause
    with _runs_lock:
        if _start_pause is not None or _runs:
            pause = None
        else:
            pause = _start_pause = long_lived()
            pause.__enter__()
    try:
        yield
    finally:
        if pause is not None:
            with _runs_lock:
                if _start_pause is pause:
                    _end_start_pause()


def _end_start_pause() -> None:
    """End ``until_run``'s pause if it lasts (the caller holds ``_runs_lock``)."""
    global _start_pause
    pause, _start_pause = _start_pause, None
    if pause is not None:
        pause.__exit__(None, None, None)
