"""When Python's cycle collector runs: paused while a run is read, and kept off what lives
through a run while it executes.

Reading a long run allocates a few objects per transcript entry (the entry, its strings, its
digest) and never a reference cycle, so the collector has nothing to find there; yet with
CPython's default thresholds it walks the whole growing heap several times while 30,000
entries are read (about 60 ms of a 400 ms resume, measured with ``gc.disable``). Both
helpers restore what they found, so a program that uses the library keeps its own settings::

    with long_lived():
        run = read_a_long_file()
    with during_run():
        execute_the_run()
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: The oldest generation's threshold while a run executes (CPython's default is 10).
RUN_GEN2_THRESHOLD = 100

#: Runs executing now in this process (a sub-workflow's run executes inside its parent's):
#: only the outermost sets the collector up and restores it.
_runs = 0
_runs_lock = threading.Lock()
#: Whether the outermost run froze what it started with (and so unfreezes all at its end).
_froze_for_run = False


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
