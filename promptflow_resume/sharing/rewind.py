"""``flow rewind``: move a run back to the start of a step, in place, losing nothing.

Under the run's lock (a live run is refused with ``RunLockedError``):

1. the file as it stands is copied to ``<name>.bak-<UTC stamp>`` beside it (restore it with
   ``mv``);
2. the transcript entries from the step's first entry on are archived, as JSON, into the run's
   sidecar folder as ``archive-attempt-<N>-rewind.json`` — the same mechanism and format that
   ``flow resume`` uses when it re-runs steps (``planapply.apply_plan``), where ``N`` is the
   attempt that will continue the run;
3. that step and every later one become pending, the cursor points at the step, the status
   becomes ``paused``, and a note in the attempt history says what moved where;
4. a run with file snapshots (docs/spec.md 12) gets its files back as they were at the start
   of that step (``restore.py``): checked and confirmed before anything is written, the files
   first, then the progress file. The snapshot records of the dropped entries go with them.

``--to entry:N`` goes back to just before entry N, a model reply, instead: the entries from N on
are archived, N's step becomes ``running`` (it goes on mid-step, as after a crash there) and
every later step pending; the files go back to the last snapshot before N.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..base.clock import now_iso
from ..base.durable import replace_file
from ..base.errors import InputError
from ..progress import ProgressStore
from ..progress.diskio import read_bytes
from ..progress.location import progress_file
from ..progress.model import Cursor, EditNote, Entry, Run, StepState
from ..progress.render import entries_phrase
from .common import (
    first_entry_of,
    id_range,
    require_checkpoint_at,
    resolve_step,
    stamp,
    step_order,
)
from .restore import FilesChoice, FilesRestored, apply_files, plan_files


@dataclass
class RewindResult:
    """What ``rewind`` changed."""

    path: Path
    step: str
    #: The previous file, or None when nothing had to change.
    backup: Path | None
    #: The archive of the moved entries (link relative to the progress file), if any.
    archive: str | None = None
    archived_entries: list[int] = field(default_factory=list)
    #: Steps set back to pending.
    reset: list[str] = field(default_factory=list)
    note: str | None = None
    #: The files put back (None: the run has no snapshots, or ``--no-files``).
    files: FilesRestored | None = None

    @property
    def changed(self) -> bool:
        """False when the run already stood at the start of the step."""
        return self.backup is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``flow rewind --json``)."""
        data = asdict(self)
        data["path"] = str(self.path)
        data["backup"] = str(self.backup) if self.backup else None
        data["changed"] = self.changed
        data["files"] = self.files.to_dict() if self.files is not None else None
        return data


def backup_path(path: Path, when: str | None = None) -> Path:
    """A free ``<name>.bak-<stamp>`` beside ``path``."""
    base = path.with_name(f"{path.name}.bak-{when or stamp()}")
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def rewind(path: str | Path, to_step: str, files: FilesChoice | None = None) -> RewindResult:
    """Rewind the run at ``path`` to the start of ``to_step`` (a step, or ``entry:N``), in
    place (see the module doc);
    ``files`` says what to do with the files the run changed since (default: restore them,
    refusing files changed by others, without asking)."""
    choice = files if files is not None else FilesChoice()
    progress = progress_file(path)
    store, run, report = ProgressStore.open(progress)
    try:
        point = _entry_point(run, to_step, progress)
        if point is None:
            step, index = resolve_step(run, to_step, path=progress, option="--to")
        else:
            step, index = point
        require_checkpoint_at(run, index, path=progress, option="--to")
        order = step_order(run)
        later = order[index:] if point is None else order[index + 1 :]
        cut = first_entry_of(run, later) if point is None else int(to_step[len(ENTRY) :])
        moved = run.transcript[cut - 1 :] if cut is not None else []
        reset = [sid for sid in later if run.steps.get(sid, StepState()) != StepState()]
        if point is not None:
            reset.insert(0, step)
        result = RewindResult(path=progress, step=step, backup=None)
        planned = plan_files(run, progress, cut, choice) if moved else None
        if not moved and not reset and run.cursor.step == step:
            return result  # already at the start of that step: nothing to move, no backup
        if planned is not None:
            # The files first: a refusal or a failure leaves the progress file as it was.
            result.files = apply_files(planned, choice)

        backup = backup_path(progress)
        replace_file(backup, read_bytes(progress))
        result.backup = backup
        parts = [f"{now_iso()}: flow rewind --to {step if point is None else to_step}"]
        if moved:
            parts.append(_archive_moved(run, store, moved, result))
        if result.files is not None:
            commit = result.files.snapshot.commit or ""
            parts.append(f"files restored to snapshot {commit[:12]} ({result.files.summary()})")
        result.reset = reset
        if reset:
            parts.append("steps set back to pending: " + ", ".join(reset))
        for sid in later:
            run.steps[sid] = StepState()
        if point is not None:
            # Mid-step, as after a crash there: the step goes on from its last kept entry.
            state = run.steps.setdefault(step, StepState())
            state.status, state.output_entry, state.finished = "running", None, None
        kept_edits = [i for i in report.edited_entries if cut is None or i < cut]
        if kept_edits:
            parts.append(f"{entries_phrase(kept_edits)} edited by hand")
        parts.append(f"previous file saved as {backup.name}")
        note = "; ".join(parts)
        result.note = note

        run.cursor = Cursor(step=step, index=index + 1, total=len(order))
        run.status = "paused"
        where = f"step {step}" if point is None else f"entry {cut} of step {step}"
        run.reason = f"rewound to {where} by flow rewind; resume to continue"
        run.last_error = None
        run.updated = now_iso()
        if not run.attempts:
            now = now_iso()
            run.add_attempt(now, ended=now, status="paused", reason=run.reason)
        # Edits it keeps are recorded as such: the rewrite gives them new digests.
        run.attempts[-1].add_notes([EditNote(note) if kept_edits else note])
        store.checkpoint(run)
        return result
    finally:
        store.close()


def _archive_moved(run: Run, store: ProgressStore, moved: list[Entry], result: RewindResult) -> str:
    """Archive the entries ``moved`` to a sidecar (``archive-attempt-<N>-rewind.json``, N the
    attempt that will continue the run) and drop them, with their calls in flight, approvals
    and snapshot records, from ``run``; the note saying where they went."""
    attempt_n = len(run.attempts) + 1
    payload = json.dumps([asdict(e) for e in moved], ensure_ascii=False, indent=1)
    rel, _ = store.write_sidecar(
        f"archive-attempt-{attempt_n}-rewind.json", payload.encode("utf-8")
    )
    result.archive = rel
    result.archived_entries = [e.id for e in moved]
    del run.transcript[moved[0].id - 1 :]
    run.in_flight = [f for f in run.in_flight if f.entry < moved[0].id]
    run.approvals = [a for a in run.approvals if a.entry < moved[0].id]
    if run.snapshots is not None:
        run.snapshots.calls = [s for s in run.snapshots.calls if s.entry < moved[0].id]
    return f"entries {id_range(moved)} archived to {rel}"


#: ``--to entry:N``: rewind to just before entry N, a model reply, instead of a step's start.
ENTRY = "entry:"


def _entry_point(run: Run, ref: str, path: Path) -> tuple[str, int] | None:
    """``entry:N`` as (step, step index): N must be a model reply (an ``assistant`` entry of a
    step) with every tool call before it answered, so the run goes on with a model call; None
    when ``ref`` names a step."""
    if not ref.startswith(ENTRY):
        return None
    text = ref[len(ENTRY) :]
    entry = run.entry(int(text)) if text.isdigit() else None
    if entry is None or entry.role != "assistant" or entry.step is None:
        what = f"no entry {text}" if entry is None else f"entry {text} is a {entry.role} entry"
        raise InputError(
            f"--to {ref}: {what}; entry:N names a model reply (an assistant entry of a "
            "step), to go back to just before the model wrote it.",
            path=path,
            hint="Run `flow show` to see the entries, or name a step to go back to its start.",
        )
    before = run.transcript[: entry.id - 1]
    answered = {e.call_id for e in before if e.role == "tool_result"}
    waiting = [e.id for e in before if e.role == "tool_call" and e.call_id not in answered]
    if waiting:
        raise InputError(
            f"--to {ref}: the tool call in entry {waiting[-1]} before it has no result, so the "
            "run cannot go on from there with a model call.",
            path=path,
            hint="Name a later model reply, or a step.",
        )
    return entry.step, step_order(run).index(entry.step)


def rewind_run(path: str | Path, to_step: str) -> Path | None:
    """Rewind a run in place, its files too; returns the backup of the previous file (None:
    no change)."""
    return rewind(path, to_step).backup
