"""A run's writes sent to another place as they happen: a batch row running on a Ray node.

A row that runs on another machine writes its files in a scratch folder there, and the batch's
driver keeps the real ones (docs/spec.md 8.6). Every durable write of the store is also handed
to the ``Mirror`` attached for the folder the run is in, once it is durable here and before the
store returns to the run: an event appended to the journal, a fold (the whole new
``progress.md``, after which the journal is gone), a journal dropped as already folded, a
sidecar file. So the copy the driver keeps is never behind what the run goes on from: a node
that dies loses at most the write it had not sent yet, as a crash on one machine loses the
event it had not fsynced. ``progress.replica`` applies the operations at the other end::

    with attached(Path("/scratch/rows/0001"), channel):
        run_row(task)   # every ProgressStore below that folder sends its writes to channel

A mirror that cannot take a write raises ``MirrorError`` (an ``OSError``): the store treats it
as a write that failed (the run stops with exit 12, its journal here cut back to what the
other end confirmed).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

#: What one operation does at the other end: ``append`` bytes to the journal at ``offset``;
#: ``fold`` (replace ``progress.md`` with ``data`` and drop the journal); ``drop`` the journal
#: (already folded); write a ``sidecar`` at ``link``; append ``data`` to an ``extra`` file of
#: the run's folder that is not the store's (its events, a server's log).
OpKind = Literal["append", "fold", "drop", "sidecar", "extra"]


@dataclass(frozen=True)
class MirrorOp:
    """One durable write, as it travels: ``path`` is relative to the attached folder."""

    kind: OpKind
    #: The progress file's path (an ``extra`` op: the extra file's), relative, ``/``-separated.
    path: str
    data: bytes = b""
    #: ``append``: the journal's size before this event (the other end cuts back to it first:
    #: an event the run here took back after a failed send must not stay there).
    offset: int = 0
    #: ``sidecar``: the link recorded in the entry (``progress.files/<name>``).
    link: str = ""


class MirrorError(OSError):
    """The other end did not take a write; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)


class Mirror(Protocol):
    """Where a run's writes are sent."""

    def send(self, op: MirrorOp) -> None:
        """Make ``op`` durable at the other end before returning, or raise ``MirrorError``."""


#: The folder a mirror is attached for, and the mirror (one per process: a Ray worker runs
#: one row at a time).
_ATTACHED: list[tuple[Path, Mirror]] = []


@contextlib.contextmanager
def attached(root: Path, mirror: Mirror) -> Iterator[None]:
    """Send the writes of every store below ``root`` to ``mirror`` while the block runs."""
    _ATTACHED.append((Path(os.path.abspath(root)), mirror))
    try:
        yield
    finally:
        _ATTACHED.pop()


def mirror_for(progress: Path) -> tuple[Mirror, str] | None:
    """The mirror for the progress file ``progress`` and its path relative to the attached
    folder, or None when no mirror is attached above it."""
    if not _ATTACHED:
        return None
    root, mirror = _ATTACHED[-1]
    absolute = Path(os.path.abspath(progress))
    try:
        rel = absolute.relative_to(root)
    except ValueError:
        return None
    return mirror, rel.as_posix()
