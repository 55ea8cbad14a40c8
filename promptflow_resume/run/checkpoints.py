"""The engine's durable events: entries appended and saved, the fold, the run's status, its
attempts, and the file snapshots saved with a tool call's result.

Every event that costs money or has effects is durable before the next one starts; a reply
with tool calls waits (``durable=False``) for its first call's start record, one write::

    points = Checkpoints(run, store, options.redactor, reporter)
    points.append([points.entry("user", prompt, step.id)])     # saved
    points.when_saved(lambda: reporter.model_reply(...))       # told once durable
    points.fold()                                              # progress.md rewritten
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..base import faults
from ..base.clock import now_iso, now_iso_ms
from ..base.errors import GitError
from ..base.redact import Redactor
from ..progress import ProgressStore
from ..progress.entry import EntryMeta
from ..progress.model import Attempt, Entry, ErrorInfo, Run
from ..progress.render import entries_phrase
from ..runsnapshots import RunSnapshots
from ..snapshots import SnapshotRepo
from .events import Reporter


class Checkpoints:
    """Appends entries and saves the run: each save is one durable event, and what the
    reporter is told waits for the save that makes it true."""

    def __init__(self, run: Run, store: ProgressStore, redactor: Redactor, reporter: Reporter):
        self.run = run
        self.store = store
        self.redactor = redactor
        self.reporter = reporter
        #: Entries appended but not yet saved (a model reply waits for its first tool start).
        self._unsaved: list[Entry] = []
        #: Reporter calls waiting for the save that makes their fact durable.
        self._untold: list[Callable[[], None]] = []

    def entry(self, role: str, content: str, step: str | None, **extra: Any) -> Entry:
        """A new entry (id given when appended), its content redacted and counted."""
        text, count = self.redactor.redact(content)
        entry = Entry(id=0, role=role, content=text, step=step, **extra)  # type: ignore[arg-type]
        if count:
            self.count_redactions(count, f"{role} in step {step}" if step else role)
        return entry

    def count_redactions(self, count: int, where: str) -> None:
        """Count ``count`` secrets replaced in ``where`` in the run's redactions."""
        self.run.redactions.count += count
        if where not in self.run.redactions.where:
            self.run.redactions.where.append(where)

    def redacted(self, text: str, where: str) -> str:
        """``text`` with secrets replaced, counted in the run's redactions under ``where``."""
        clean, count = self.redactor.redact(text)
        if count:
            self.count_redactions(count, where)
        return clean

    def append(self, entries: list[Entry], *, durable: bool = True) -> None:
        """Give entries their ids and add them to the transcript; save unless ``durable`` is
        False, in which case the next save (due before any effect) carries them."""
        at = now_iso_ms()
        for entry in entries:
            entry.id = self.run.next_entry_id()
            # When it was recorded (docs/spec.md 2.3): what its span's times come from.
            if entry.meta is None or entry.meta.at is None:
                entry.meta = replace(entry.meta or EntryMeta(), at=at)
            self.run.transcript.append(entry)
        self._unsaved.extend(entries)
        if durable:
            self.save()

    def save(self) -> None:
        """One durable event: the entries not yet saved and the checkpoint state as it is now."""
        self.run.updated = now_iso()
        entries, self._unsaved = self._unsaved, []
        self.store.save(self.run, entries)
        self._tell_saved()

    def when_saved(self, tell: Callable[[], None]) -> None:
        """Tell the reporter now if nothing waits to be saved, else right after the save
        that makes it durable (``--events`` reports durable facts only, spec 4.16)."""
        if self._unsaved:
            self._untold.append(tell)
        else:
            tell()

    def _tell_saved(self) -> None:
        told, self._untold = self._untold, []
        for tell in told:
            tell()

    def fold(self) -> None:
        """Fold the journal into progress.md (step boundaries and exit)."""
        self.run.updated = now_iso()
        self.store.checkpoint(self.run)
        self._unsaved.clear()
        self._tell_saved()

    def set_status(self, status: str, reason: str | None, *, until: str | None = None) -> None:
        """The run's status and reason (and a suspended run's ``until``), saved."""
        self.run.status = status  # type: ignore[assignment]
        self.run.reason = reason
        self.run.until = until
        if status == "completed":
            self.run.last_error = None
        self.save()

    def record_error(self, error: Exception, kind: str) -> None:
        """The run's ``last_error`` (its message redacted), at the step it happened in."""
        message = self.redacted(str(error), "last error")
        self.run.last_error = ErrorInfo(
            type=kind, message=message, at=now_iso(), step=self.run.cursor.step
        )


def begin_attempt(run: Run) -> Attempt:
    """A new attempt of ``run``, the ones a killed process left open closed first."""
    _close_abandoned(run)
    return run.add_attempt(now_iso(), first_entry=run.next_entry_id())


def end_attempt(run: Run, attempt: Attempt) -> None:
    """The attempt ends now with the run's status and reason."""
    attempt.ended = now_iso()
    attempt.status = run.status
    attempt.reason = run.reason


def _close_abandoned(run: Run) -> None:
    """End the attempts a killed process left open (no end, no status): this process holds
    the run's lock, so none of them is still going. Each ends ``interrupted`` at the last
    moment it recorded (its last entry's time, else its start)."""
    for index, attempt in enumerate(run.attempts):
        if attempt.ended is not None:
            continue
        first = attempt.first_entry
        following = run.attempts[index + 1 :]
        last = following[0].first_entry if following and following[0].first_entry else None
        times = [
            e.meta.at
            for e in run.transcript
            if e.meta is not None
            and e.meta.at
            and (first is None or e.id >= first)
            and (last is None or e.id < last)
        ]
        attempt.ended = max(times)[:19] + "Z" if times else attempt.started
        attempt.status = "interrupted"
        attempt.reason = "its process ended without a checkpoint (killed, or the machine stopped)"


def keep_times(opening: list[Entry], dropped: list[Entry]) -> list[Entry]:
    """``opening`` with the recorded times of the ``dropped`` prompt entries they repeat
    exactly (a resume writes a step's prompt anew; the file's lines stay as they were)."""
    for new, old in zip(opening, dropped, strict=False):
        if (new.role, new.step, new.content) != (old.role, old.step, old.content):
            break
        new.meta = old.meta
    return opening


class FileSnapshots:
    """The run's file snapshots in a git repository: one is due with a result that may have
    changed files (same event), taken and saved right after (docs/spec.md 12)."""

    def __init__(self, points: Checkpoints, attempt: Attempt, workspace: Path) -> None:
        self._points = points
        self._attempt = attempt
        self._workspace = workspace
        #: None: off, or not in a git repository.
        self._snaps: RunSnapshots | None = None

    def begin(self) -> None:
        """In a git repository: the run's base snapshot, and those a crash left due (taken
        now, marked late); outside one, say once that files are not snapshotted."""
        run, path, reporter = self._points.run, self._points.store.path, self._points.reporter
        repo = SnapshotRepo.find(self._workspace, run.run_id, path)
        if repo is None:
            if run.snapshots is None and len(run.attempts) <= 1:
                reporter.notice(
                    "the workspace is not in a git repository: the files the run changes are "
                    "not snapshotted (rewind and fork move the conversation only)."
                )
            return
        try:
            snaps = RunSnapshots(repo, run, path)
            late = snaps.begin()
        except GitError as error:
            reporter.notice(f"file snapshots are off for this attempt: {error.message}")
            return
        self._snaps = snaps
        if snaps.elsewhere:
            note = (
                "the run's earlier file snapshots are not in this repository (another clone, "
                "or flow clean): snapshots start again here; rewind and fork to an earlier "
                "point move the conversation only (--no-files)"
            )
            reporter.notice(note)
            self._attempt.notes.append(note)
        if late:
            self._attempt.notes.append(
                f"snapshot of {entries_phrase(late)} taken late (the run stopped between the "
                "call and its snapshot)"
            )
        self._points.save()

    def due(self, call: Entry) -> None:
        """Mark the snapshot of the result about to be appended as due (same event)."""
        if self._snaps is not None:
            self._snaps.due(self._points.run.next_entry_id(), call.call_id)

    def take(self) -> None:
        """Take the due snapshot and record it (one more durable event)."""
        if self._snaps is None:
            return
        faults.point("engine.before_snapshot")
        try:
            self._snaps.settle()
        except GitError as error:
            self._points.reporter.notice(
                f"file snapshots are off for this attempt: {error.message}"
            )
            self._snaps = None
            return
        self._points.save()
