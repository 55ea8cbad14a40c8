"""``flow fork``: a new run that starts from the checkpoint at the start of a step.

The fork gets a new run id, the transcript up to (not including) the first entry of that step,
the earlier steps' states and outputs, and every step from that one on pending. Its status is
``paused`` and its front matter's ``parent`` says where it came from (the original's path
relative to the fork, its run id, the step). The original is only read, never written.
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..clock import now_iso
from ..errors import InputError
from ..progress import ProgressStore, load_progress
from ..progress.model import Cursor, Run, StepState
from ..progress.render import entries_phrase
from ..progress.sidecar import write_sidecar
from ..runids import new_run_id
from .common import (
    first_entry_of,
    output_file,
    rebase,
    relative_path,
    require_checkpoint_at,
    resolve_step,
    step_order,
    usage_of,
)
from .files import read_sidecar, sidecar_folder


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

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``flow fork --json``)."""
        data = asdict(self)
        data["source"] = str(self.source)
        data["output"] = str(self.output)
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
    fork.status = "paused"
    fork.reason = f"forked from run {run.run_id} at step {step}; resume to continue"
    fork.created = fork.updated = now
    if cut is not None:
        fork.in_flight = [f for f in fork.in_flight if f.entry < cut]
    for sid in later:
        fork.steps[sid] = StepState()
    fork.cursor = Cursor(step=step, index=index + 1, total=len(order))
    fork.usage = usage_of(fork.steps[sid] for sid in order[:index] if sid in fork.steps)
    fork.attempts = []
    fork.last_error = None
    fork.parent = {"path": parent_path, "run_id": run.run_id, "step": step}
    fork.journal_seq = 0
    return fork


def fork(path: str | Path, at_step: str, out: str | Path | None = None) -> ForkResult:
    """Start a new run from the checkpoint at the start of ``at_step`` of the run at ``path``."""
    source = Path(path)
    run, report = load_progress(source)
    step, index = resolve_step(run, at_step, path=source, option="--at")
    require_checkpoint_at(run, index, path=source, option="--at")
    run_id = new_run_id(run.workflow.name or Path(run.workflow.path).name.split(".")[0])
    output = (
        output_file(out, "progress.md") if out is not None else default_fork_path(source, run_id)
    )
    if not output.name.endswith(".md"):
        raise InputError(
            f"the fork must be a Markdown file ending in .md; got {output.name!r}.",
            path=output,
            hint="Name it like progress.md (its sidecar folder becomes progress.files/).",
        )
    for target in (output, sidecar_folder(output)):
        if target.exists() or target.is_symlink():
            raise InputError(
                f"{target} already exists.",
                path=target,
                hint="Choose another path for the fork with -o.",
            )
    output.parent.mkdir(parents=True, exist_ok=True)

    new = forked_run(run, step, run_id=run_id, parent_path=relative_path(source, output.parent))
    new.workflow.path = rebase(run.workflow.path, source.parent, output.parent)
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
    try:
        # Sidecars first (the fork's folder is new), so the file never links to a missing one.
        for entry in new.transcript:
            if entry.sidecar is not None:
                data = read_sidecar(source, entry)
                rel, digest = write_sidecar(output, entry.sidecar.rsplit("/", 1)[-1], data)
                entry.sidecar, entry.sidecar_sha256, entry.sidecar_bytes = rel, digest, len(data)
                result.bundled.append(rel)
        ProgressStore.create(output, new).close()
    except BaseException:
        if not output.exists():
            shutil.rmtree(sidecar_folder(output), ignore_errors=True)
        raise
    return result


def fork_run(path: str | Path, at_step: str, out: str | Path | None = None) -> Path:
    """Fork the run at ``path`` at ``at_step``; returns the new progress file (see ``fork``)."""
    return fork(path, at_step, out).output
