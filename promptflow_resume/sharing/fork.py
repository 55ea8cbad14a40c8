"""``flow fork``: a new run that starts from the checkpoint at the start of a step.

The fork gets a new run id, the transcript up to (not including) the first entry of that step,
the earlier steps' states and outputs, and every step from that one on pending. Its status is
``paused`` and its front matter's ``parent`` says where it came from (the original's path
relative to the fork, its run id, the step). The original is only read, never written.

Sub-workflows (docs/spec.md 4.10): the child runs of the steps the fork keeps are copied into
the fork's own ``<stem>.steps/<step-id>/progress.md`` (grandchildren too), and their subagent
calls' runs into ``<stem>.steps/<step-id>/agents/<call-id>/progress.md`` (4.14), each with a
new run id and its ``parent`` naming the fork; the steps the fork runs again lose their link
and get a new child when they run. A run in a git worktree gets a worktree of its own
(``forktree``).

Files (docs/spec.md 12): a run with snapshots that works in the checkout itself gets its files
put back as they were at the start of that step (``restore.py``: checked, then confirmed,
before the fork is written); the fork keeps the snapshot records of the entries it keeps, and
its own ref points at the original's snapshots so they outlive the original's ``flow clean``.
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..base.clock import now_iso
from ..base.errors import InputError
from ..base.paths import rebase, relative_path
from ..base.runids import new_run_id
from ..base.safeopen import linked_file
from ..base.traceids import trace_id_for
from ..flowfolder import make_folder
from ..progress import ProgressStore, load_progress
from ..progress.children import folder_name
from ..progress.links import child_file
from ..progress.location import progress_file
from ..progress.model import Cursor, Run, StepState, TraceRef
from ..progress.render import entries_phrase
from ..progress.sidecar import stem_of, write_sidecar
from ..run.handoffs import rebase_chain
from ..snapshots import SnapshotRepo, made_repo, relative_root, snapshot_ref
from .common import (
    first_entry_of,
    output_file,
    require_checkpoint_at,
    resolve_step,
    step_order,
    usage_of,
)
from .files import archive_files, read_archive, read_sidecar, sidecar_folder
from .forktree import fork_worktree
from .restore import FilesChoice, FilesRestored, apply_files, plan_files


@dataclass
class ForkResult:
    """What ``fork`` wrote."""

    source: Path
    output: Path
    run_id: str
    parent_run_id: str
    step: str
    #: Transcript entries copied from the original (ids 1..copied).
    copied_entries: int
    #: Steps that are pending in the fork (the named step and every later one).
    pending: list[str] = field(default_factory=list)
    bundled: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Child runs of the kept steps copied into the fork (paths relative to its folder).
    children: list[str] = field(default_factory=list)
    #: The fork's own worktree and branch, for a run in a git worktree (else None).
    worktree: str | None = None
    branch: str | None = None
    #: The files put back (None: no snapshots, a worktree run, or ``--no-files``).
    files: FilesRestored | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``flow fork --json``)."""
        data = asdict(self)
        data["source"] = str(self.source)
        data["output"] = str(self.output)
        data["files"] = self.files.to_dict() if self.files is not None else None
        return data


def default_fork_path(source: Path, run_id: str) -> Path:
    """Beside the original: a sibling run folder in the standard layout, else ``<id>.md``."""
    if source.name == "progress.md":
        return source.parent.parent / run_id / "progress.md"
    return source.with_name(f"{run_id}.md")


def forked_run(run: Run, step: str, *, run_id: str, parent_path: str) -> Run:
    """The checkpoint of ``run`` at the start of ``step``, as a new paused run (pure)."""
    order = step_order(run)
    index = order.index(step)
    later = order[index:]
    cut = first_entry_of(run, later)
    # Copy everything but the transcript deeply, and only the entries the fork keeps.
    fork = copy.deepcopy(dataclasses.replace(run, transcript=[]))
    fork.transcript = [
        copy.copy(e) for e in (run.transcript if cut is None else run.transcript[: cut - 1])
    ]
    now = now_iso()
    fork.run_id = run_id
    # A fork is a run of its own: its own trace (docs/spec.md 13).
    fork.trace = TraceRef(id=trace_id_for(run_id))
    fork.status = "paused"
    fork.reason = f"forked from run {run.run_id} at step {step}; resume to continue"
    fork.created = fork.updated = now
    if cut is not None:
        fork.in_flight = [f for f in fork.in_flight if f.entry < cut]
    if fork.snapshots is not None:
        fork.snapshots.ref = snapshot_ref(run_id)
        if cut is not None:
            fork.snapshots.calls = [s for s in fork.snapshots.calls if s.entry < cut]
    for sid in later:
        fork.steps[sid] = StepState()
    fork.cursor = Cursor(step=step, index=index + 1, total=len(order))
    fork.usage = usage_of(fork.steps[sid] for sid in order[:index] if sid in fork.steps)
    fork.attempts = []
    fork.last_error = None
    fork.parent = {"path": parent_path, "run_id": run.run_id, "step": step}
    fork.journal_seq = 0
    # The fork is a new run; it is sealed (as written here) when it first runs.
    fork.seal = None
    return fork


def fork(
    path: str | Path,
    at_step: str,
    out: str | Path | None = None,
    files: FilesChoice | None = None,
) -> ForkResult:
    """Start a new run from the checkpoint at the start of ``at_step`` of the run at ``path``;
    ``files`` says what to do with the files (default: restore them without asking, refusing
    files changed by others)."""
    choice = files if files is not None else FilesChoice()
    source = progress_file(path)
    run, report = load_progress(source)
    step, index = resolve_step(run, at_step, path=source, option="--at")
    require_checkpoint_at(run, index, path=source, option="--at")
    run_id = new_run_id(run.workflow.name or Path(run.workflow.path).name.split(".")[0])
    output, steps = _fork_paths(source, out, run_id)
    new = forked_run(run, step, run_id=run_id, parent_path=relative_path(source, output.parent))
    new.workflow.path = rebase(run.workflow.path, source.parent, output.parent)
    rebase_chain(new, source.parent, output.parent)
    recording = getattr(new.config, "recording", None)
    if recording:
        new.config.recording = rebase(recording, source.parent, output.parent)
    result = ForkResult(
        source=source,
        output=output,
        run_id=run_id,
        parent_run_id=run.run_id,
        step=step,
        copied_entries=len(new.transcript),
        pending=step_order(run)[index:],
    )
    edited = [i for i in report.edited_entries if i <= len(new.transcript)]
    if edited:
        result.warnings.append(
            f"{entries_phrase(edited)} {'was' if len(edited) == 1 else 'were'} edited by hand "
            "in the original; the fork starts from the edited text."
        )
    kept = step_order(run)[:index]
    cut = first_entry_of(run, step_order(run)[index:])
    planned = plan_files(run, source, cut, choice) if run.worktree is None else None
    if planned is not None:
        result.files = apply_files(planned, choice)
    _rebase_snapshots(new, run, source, output)
    made = fork_worktree(run, source, output, run_id=run_id, kept=kept, step=step)
    new.worktree = None if made is None else made[0]
    if made is not None:
        result.worktree, result.branch = made[0].path, made[0].branch
    try:
        make_folder(output.parent)
        # Sidecars and children first (the fork's folders are new), so the file never links
        # to a missing one.
        result.bundled += _copy_sidecars(new, source, output)
        _copy_children(new, source, output, kept, result.children)
        ProgressStore.create(output, new).close()
    except BaseException:
        if not output.exists():
            shutil.rmtree(sidecar_folder(output), ignore_errors=True)
            shutil.rmtree(steps, ignore_errors=True)
            if made is not None:
                from ..gitworktree import remove_new

                remove_new(made[0], run_id, output)
        raise
    return result


def _fork_paths(source: Path, out: str | Path | None, run_id: str) -> tuple[Path, Path]:
    """The fork's progress file (``out``, or the default beside ``source``) and its children's
    folder; InputError when it is not a ``.md`` file or it, its sidecar folder or that folder
    exists already."""
    output = (
        output_file(out, "progress.md") if out is not None else default_fork_path(source, run_id)
    )
    if not output.name.endswith(".md"):
        raise InputError(
            f"the fork must be a Markdown file ending in .md; got {output.name!r}.",
            path=output,
            hint="Name it like progress.md (its sidecar folder becomes progress.files/).",
        )
    steps = output.parent / f"{stem_of(output)}.steps"
    for target in (output, sidecar_folder(output), steps):
        if target.exists() or target.is_symlink():
            raise InputError(
                f"{target} already exists.",
                path=target,
                hint="Choose another path for the fork with -o.",
            )
    return output, steps


def _copy_sidecars(new: Run, source: Path, output: Path) -> list[str]:
    """Copy the sidecars of the fork's entries beside ``output`` and point the entries at the
    copies; the copies' relative paths, in entry order."""
    bundled: list[str] = []
    for entry in new.transcript:
        if entry.sidecar is not None:
            data = read_sidecar(source, entry)
            rel, digest = write_sidecar(output, entry.sidecar.rsplit("/", 1)[-1], data)
            entry.sidecar, entry.sidecar_sha256, entry.sidecar_bytes = rel, digest, len(data)
            bundled.append(rel)
    return bundled


def _rebase_snapshots(new: Run, run: Run, source: Path, output: Path) -> None:
    """The fork's snapshot records name the same repository from its own folder, and its ref
    points at the original's latest snapshot (the commits the records name stay alive). A
    fork of a worktree run keeps none: its worktree is another folder. Nor does a fork of a
    run whose snapshots flow on this machine did not take for its file (docs/spec.md 10.10):
    no ref is made in a repository a file names; the fork takes its own base when it runs."""
    if new.snapshots is None or run.snapshots is None:
        return
    original = made_repo(run.snapshots.ref, run.run_id, source) if run.worktree is None else None
    if original is None:
        new.snapshots = None
        return
    new.snapshots.root = relative_root(original.root, output)
    repo = SnapshotRepo.find(original.root, new.run_id, output)
    latest = original.tip()
    if repo is not None and latest is not None and repo.tip() is None:
        repo.adopt(latest)


def _copy_children(
    run: Run, source: Path, output: Path, steps: list[str], copied: list[str], prefix: str = ""
) -> None:
    """Copy the child runs of ``steps`` of ``run`` (read from ``source``) beside ``output``:
    each step's sub-workflow run and each of its subagent calls' runs.

    Each copy gets a new run id and a ``parent`` naming ``output``; its own children follow.
    A link to a child file that does not exist is pointed at where the copy's child goes.
    """
    stem = stem_of(output)
    for step_id in steps:
        state = run.steps.get(step_id)
        if state is None:
            continue
        if state.child:
            child_source = child_file(source, step_id, state.child)
            state.child = f"{stem}.steps/{step_id}/progress.md"
            _copy_child(run, child_source, output, step_id, state.child, copied, prefix)
        for call_id, link in state.agents.items():
            child_source = linked_file(
                source.parent,
                link.child,
                what="subagent run file",
                source=source,
                field=f"$.steps.{step_id}.agents.{call_id}.child",
            )
            link.child = f"{stem}.steps/{step_id}/agents/{folder_name(call_id)}/progress.md"
            _copy_child(run, child_source, output, step_id, link.child, copied, prefix)


def _copy_child(
    run: Run,
    child_source: Path,
    output: Path,
    step_id: str,
    where: str,
    copied: list[str],
    prefix: str,
) -> None:
    """Copy one child run to ``where`` (relative to ``output``'s folder), then its own."""
    if not child_source.exists():
        return
    target = output.parent / where
    child, _report = load_progress(child_source)
    child.run_id = new_run_id(child.workflow.name or Path(child.workflow.path).name.split(".")[0])
    child.trace = TraceRef(id=trace_id_for(child.run_id))
    # A subagent's link keeps its kind, call and agent; only where and whose it is change.
    child.parent = {
        **(child.parent or {}),
        "path": relative_path(output, target.parent),
        "run_id": run.run_id,
        "step": step_id,
    }
    child.workflow.path = rebase(child.workflow.path, child_source.parent, target.parent)
    recording = getattr(child.config, "recording", None)
    if recording:
        child.config.recording = rebase(recording, child_source.parent, target.parent)
    child.journal_seq = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    for entry in child.transcript:
        if entry.sidecar is not None:
            data = read_sidecar(child_source, entry)
            rel, digest = write_sidecar(target, entry.sidecar.rsplit("/", 1)[-1], data)
            entry.sidecar, entry.sidecar_sha256, entry.sidecar_bytes = rel, digest, len(data)
    for archive in archive_files(child_source):
        # Attempt notes name archives by the folder's name, the same for the copy.
        write_sidecar(target, archive.name, read_archive(archive))
    shown = f"{prefix}{where}"
    copied.append(shown)
    _copy_children(
        child,
        child_source,
        target,
        list(child.steps),
        copied,
        prefix=shown.rsplit("/", 1)[0] + "/",
    )
    ProgressStore.create(target, child).close()


def fork_run(path: str | Path, at_step: str, out: str | Path | None = None) -> Path:
    """Fork the run at ``path`` at ``at_step``; returns the new progress file (see ``fork``)."""
    return fork(path, at_step, out).output
