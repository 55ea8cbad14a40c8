"""A run's file snapshots as the engine takes them, recorded in its progress file.

The engine holds one ``RunSnapshots`` per attempt over the run's ``SnapshotRepo``
(``snapshots``): ``begin`` at the attempt's start (the base snapshot, the ones a crash left due,
and the files as someone else left them between attempts), ``due`` when a call's result is
about to be recorded, ``settle`` once it is::

    snaps = RunSnapshots(repo, run, progress_path)
    late = snaps.begin()
    snaps.due(entry, call_id)
    snaps.settle()
"""

from __future__ import annotations

from pathlib import Path

from .progress.filesnapshots import FileSnapshot, Snapshots
from .progress.model import Run
from .snapshots import SnapshotRepo, relative_root


class RunSnapshots:
    """A run's snapshots as the engine takes them: the base before the first call, one
    after each call that can change files, and any a crash left due (taken late)."""

    def __init__(self, repo: SnapshotRepo, run: Run, progress: Path) -> None:
        self.repo = repo
        self.run = run
        if run.snapshots is None:
            run.snapshots = Snapshots(root=relative_root(repo.root, progress), ref=repo.ref)
        else:
            # The snapshots taken from now on are of this repository, whatever the file said.
            run.snapshots.root = relative_root(repo.root, progress)
            run.snapshots.ref = repo.ref
        self.record: Snapshots = run.snapshots
        #: True when ``begin`` found the recorded snapshots missing here and took a new base.
        self.elsewhere = False

    def begin(self) -> list[int]:
        """At an attempt's start: the base snapshot when there is none yet, or when the
        recorded ones are not in this repository (the file came from another clone: the run
        goes on, snapshotting from here), and the snapshots a crash left due, taken now and
        marked late. Returns the entries snapshotted late."""
        last = self.run.transcript[-1].id if self.run.transcript else 0
        # Records of entries removed by hand name ids the next entries will reuse.
        self.record.calls = [c for c in self.record.calls if c.entry <= last]
        before = self.record.last_taken()
        if before is not None and not self.repo.has(before.commit):
            self.elsewhere = True
            self.record.calls = [c for c in self.record.calls if c.commit is not None]
            taken = self.repo.take(None, f"flow {self.run.run_id}: base in this clone")
            self.record.calls.append(FileSnapshot(entry=last, commit=taken.commit))
        if not self.record.calls:
            taken = self.repo.take(None, f"flow {self.run.run_id}: base")
            # The base stands for the files after the entries recorded so far: 0 for a new
            # run, later for a run resumed by a flow that snapshots for the first time.
            self.record.calls.append(FileSnapshot(entry=last, commit=taken.commit))
        due = [s for s in self.record.calls if s.commit is None]
        if due:
            self.settle(late=True)
        elif self._resumed():
            self._between_attempts(last)
        # The ref this machine now snapshots into, recorded for this file (a run an older flow
        # began here, or one moved to another file, is recorded once it goes on here).
        self.repo.note_made()
        return [s.entry for s in due]

    def _resumed(self) -> bool:
        """True when an earlier attempt took snapshots here (this one goes on after it)."""
        return len(self.run.attempts) > 1 and bool(self.record.calls) and not self.elsewhere

    def _between_attempts(self, last: int) -> None:
        """The files as this attempt finds them, when someone changed them since the run last
        did (between attempts): a record without a call, so ``flow review`` and the next
        call's record never count those changes as the run's."""
        # Against the ref's tip: the files as the run (or a restore of its files) last left
        # them, also when a resume dropped the records of calls it runs again.
        tip = self.repo.tip()
        if tip is None or self.record.last_taken() is None:
            return
        taken = self.repo.take(tip, f"flow {self.run.run_id}: files before attempt")
        if taken.commit != tip:
            self.record.calls.append(taken.changes.record(last, taken.commit, None, False))

    def due(self, entry: int, call_id: str | None) -> None:
        """Call ``entry``'s result is about to be recorded: its snapshot is due (recorded in
        the same event, so a crash before the snapshot leaves the mark)."""
        self.record.calls.append(FileSnapshot(entry=entry, commit=None, call_id=call_id))

    def settle(self, *, late: bool = False) -> FileSnapshot | None:
        """Take the snapshot the due records wait for; the first due record gets it, any
        other (several calls of one crash) the same commit with nothing listed."""
        due = [i for i, s in enumerate(self.record.calls) if s.commit is None]
        if not due:
            return None
        before = self.record.last_taken()
        first = self.record.calls[due[0]]
        taken = self.repo.take(
            before.commit if before else None, f"flow {self.run.run_id}: entry {first.entry}"
        )
        if before is not None and taken.commit == before.commit:
            # Nothing changed: no record, so the front matter grows only with calls that
            # changed files; the snapshot before stands for this point too.
            self.record.calls = [s for s in self.record.calls if s.commit is not None]
            return None
        snap = taken.changes.record(first.entry, taken.commit, first.call_id, late)
        self.record.calls[due[0]] = snap
        for i in due[1:]:
            other = self.record.calls[i]
            self.record.calls[i] = FileSnapshot(
                entry=other.entry, commit=taken.commit, call_id=other.call_id, late=late
            )
        return snap
