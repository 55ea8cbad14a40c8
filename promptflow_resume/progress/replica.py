"""The real files of a run that runs elsewhere: a batch row's, kept by the batch's driver.

A row on a Ray node runs in a scratch folder there and sends every durable write through its
mirror (``progress.mirror``); the driver applies them here with the store's own writers: an
event appended and fsynced at the offset the node had (``durable.append_at``), a fold written
atomically (``durable.replace_file``, as ``store.write_checkpoint``) before the journal is
dropped, a sidecar written atomically under the link its entry records
(``sidecar.put_sidecar``). So the folder here always holds a state the run passed through, as
a crash on one machine leaves it, and loads with ``load_progress`` like any run.

The replica holds the run's lock from ``take`` to ``close``, as a writer does, and its owner
file names this process: ``flow status`` here sees a live run, and a ``flow resume`` of the
row's file is refused while the batch runs it. Every path an operation names is confined to
the run's folder before it is used (``base.confine``): a plain relative path with no link on
the way, a progress file named ``*.md``, a sidecar link as ``sidecar.check_link`` has it, an
extra file (the row's events, a server's log) named ``*.jsonl`` or ``*.log``::

    replica = Replica.take(Path("out/rows/0001"))
    seed = replica.files()            # what a new attempt starts from: (relative path, bytes)
    replica.apply(op)                 # one MirrorOp from the node
    replica.close()
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ..base.confine import PathEscapeError, no_link_on_the_way
from ..base.durable import append_at, append_synced, fsync_dir, replace_file
from ..base.errors import SpecialFileError
from ..base.runlock import RunLock
from ..base.safeopen import open_append, read_regular
from ..flowfolder import make_folder
from .diskio import MAX_FILE_BYTES, MAX_JOURNAL_BYTES
from .journal import journal_path
from .locking import clean_leftovers, take_lock
from .mirror import MirrorError, MirrorOp
from .owner import owner_path, read_owner, write_owner
from .sidecar import put_sidecar

#: The progress file of a row's folder.
PROGRESS_NAME = "progress.md"
#: Files of a run's folder that are not the store's and travel back whole at the end of an
#: attempt: the run's events, an MCP server's log.
EXTRA_SUFFIXES = (".jsonl", ".log")
#: Names that never travel to a node: the lock and owner of the live writer, temp files.
_LOCAL_ONLY = (".lock", ".owner", ".tmp")


class Replica:
    """The folder of a run kept here while the run goes on elsewhere (see the module)."""

    def __init__(self, folder: Path, lock: RunLock) -> None:
        self.folder = folder
        self.progress = folder / PROGRESS_NAME
        self._lock = lock
        self._closed = False

    @classmethod
    def take(cls, folder: Path) -> Replica:
        """Hold the run in ``folder`` (made if need be): its lock, and its owner file naming
        this process. ``RunLockedError`` (exit 6) when another process holds it."""
        make_folder(folder)
        progress = folder / PROGRESS_NAME
        lock = take_lock(progress)
        replica = cls(folder, lock)
        try:
            write_owner(progress)
            clean_leftovers(progress)
        except BaseException:
            replica.close()
            raise
        return replica

    def files(self) -> list[tuple[str, bytes]]:
        """Every file of the run's folder a new attempt needs (the progress files, journals
        and sidecars of the run and of its child runs), by path relative to the folder; no
        link is followed, and the lock, owner, temp and extra files stay here."""
        found: list[tuple[str, bytes]] = []
        for top, folders, names in os.walk(self.folder):
            here = Path(top)
            # A link to a folder is listed with the folders and never entered.
            folders[:] = sorted(f for f in folders if not (here / f).is_symlink())
            for name in sorted(names):
                if name.endswith(_LOCAL_ONLY) or name.endswith(EXTRA_SUFFIXES):
                    continue
                path = here / name
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    continue
                data = read_regular(path, MAX_FILE_BYTES, what="run file")
                if data is not None:
                    found.append((path.relative_to(self.folder).as_posix(), data))
        return found

    def apply(self, op: MirrorOp) -> None:
        """Make one write of the run durable here; ``MirrorError`` when it cannot be (a path
        that leaves the folder, a journal that does not continue this one, a failed write)."""
        try:
            self._apply(op)
        except MirrorError:
            raise
        except (OSError, PathEscapeError, SpecialFileError) as error:
            raise MirrorError(f"{op.kind} of {op.path!r} in {self.folder}: {error}") from None

    def _apply(self, op: MirrorOp) -> None:
        if op.kind == "extra":
            target = self._place(op.path, EXTRA_SUFFIXES)
            make_folder(target.parent)
            append_synced(target, op.data, what="run file")
            return
        target = self._place(op.path, (".md",))
        if op.kind == "fold":
            if len(op.data) > MAX_FILE_BYTES:
                raise MirrorError(f"a checkpoint of {len(op.data)} bytes is over the limit")
            make_folder(target.parent)
            replace_file(target, op.data)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(journal_path(target))
        elif op.kind == "drop":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(journal_path(target))
        elif op.kind == "append":
            self._append(journal_path(target), op)
        elif op.kind == "sidecar":
            make_folder(target.parent)
            put_sidecar(target, op.link, op.data)
        else:
            raise MirrorError(f"unknown operation {op.kind!r}")

    def _place(self, rel: str, suffixes: tuple[str, ...]) -> Path:
        """``folder/rel`` for writing, or ``MirrorError``: a plain relative path, no link on
        the way, a name ending in one of ``suffixes`` that is not hidden."""
        target = no_link_on_the_way(self.folder, rel)
        if target.name.startswith(".") or not target.name.endswith(suffixes):
            raise MirrorError(f"{rel!r} is not a file of a run's folder flow writes")
        if target.is_symlink():
            raise MirrorError(f"{rel!r} is a symbolic link")
        return target

    def _append(self, journal: Path, op: MirrorOp) -> None:
        fd = open_append(journal, what="journal")
        try:
            size = os.fstat(fd).st_size
            if size < op.offset:
                raise MirrorError(
                    f"the journal {journal.name} here has {size} bytes where the run had "
                    f"{op.offset}: it does not continue the one the run appends to"
                )
            if op.offset + len(op.data) > MAX_JOURNAL_BYTES:
                raise MirrorError("the journal would pass its limit")
            # An event the run took back after a send that failed is dropped here too.
            os.ftruncate(fd, op.offset)
            append_at(fd, op.data, op.offset)
        finally:
            os.close(fd)
        if op.offset == 0:
            fsync_dir(journal.parent)  # a new journal's name must survive a power cut too

    def close(self) -> None:
        """Let go of the run: remove the owner file (when it is this process's) and the lock."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError, SpecialFileError):
            if read_owner(self.progress).get("pid") == os.getpid():
                os.unlink(owner_path(self.progress))
        self._lock.release()
