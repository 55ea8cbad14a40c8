"""Small helpers shared by share, fork, rewind, log and clean: steps, paths, ids, liveness."""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from ..base.errors import InputError
from ..progress import lock_path, owner_path
from ..progress.model import Entry, Run, StepState, Usage

#: Step statuses after which a run has a checkpoint at the start of the next step.
DONE_STATUSES = frozenset({"completed", "skipped"})


def step_order(run: Run) -> list[str]:
    """The run's step ids in workflow order (as recorded at the checkpoint)."""
    order = list(run.workflow.steps) or list(run.steps)
    order += [sid for sid in run.steps if sid not in order]
    return order


def resolve_step(run: Run, ref: str, *, path: Path, option: str) -> tuple[str, int]:
    """The step named by ``ref`` (an id, or a 1-based number) and its 0-based index."""
    order = step_order(run)
    if ref in order:
        return ref, order.index(ref)
    if ref.isdigit() and 1 <= int(ref) <= len(order):
        return order[int(ref) - 1], int(ref) - 1
    listed = ", ".join(order) if order else "none"
    raise InputError(
        f"{option} {ref!r}: this run has no step {ref!r}; its steps are: {listed}.",
        path=path,
        field="$.steps",
        hint=f"Name one of those step ids, or a step number from 1 to {len(order)}."
        if order
        else "A run without steps cannot be forked or rewound.",
    )


def require_checkpoint_at(run: Run, index: int, *, path: Path, option: str) -> None:
    """Refuse a step whose earlier steps did not all finish: the run never reached its start."""
    order = step_order(run)
    for sid in order[:index]:
        status = run.steps.get(sid, StepState()).status
        if status not in DONE_STATUSES:
            raise InputError(
                f"{option} {order[index]!r}: the run never reached the start of that step, "
                f"because the earlier step {sid!r} is {status}, not completed.",
                path=path,
                field=f"$.steps.{sid}.status",
                hint=f"Name step {sid!r} or an earlier one instead.",
            )


def first_entry_of(run: Run, step_ids: Iterable[str]) -> int | None:
    """Id of the first transcript entry that belongs to one of ``step_ids`` (None if none)."""
    wanted = set(step_ids)
    return next((e.id for e in run.transcript if e.step in wanted), None)


def usage_of(states: Iterable[StepState]) -> Usage:
    """The usage of the given steps, summed."""
    total = Usage()
    for state in states:
        total.add(state.usage)
    return total


def id_range(entries: list[Entry]) -> str:
    """``5-12`` (or ``5``) for a contiguous slice of entries."""
    if not entries:
        return "none"
    first, last = entries[0].id, entries[-1].id
    return str(first) if first == last else f"{first}-{last}"


def stamp(now: datetime | None = None) -> str:
    """A compact UTC timestamp for file names: ``20261121T232529Z``."""
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def is_live(progress: Path) -> bool:
    """True when a flow process holds the run's lock right now (never creates a lock file).

    Only a run with an owner file is probed: a live writer writes one as it takes the lock
    and removes it on exit, so a finished run is never locked, even for an instant, by a probe
    that a ``flow resume`` starting at that moment would trip over.
    """
    from ..base.runlock import LockHeld, RunLock

    lock_file = lock_path(progress)
    if not lock_file.exists() or not owner_path(progress).exists():
        return False
    lock = RunLock(lock_file)
    try:
        lock.acquire()
    except (LockHeld, OSError):
        return True
    lock.release(remove=False)  # a dead owner's file stays, as it was
    return False


def git_root(folder: Path) -> Path | None:
    """The top of the git work tree holding ``folder``, or None outside any repository."""
    current = folder.resolve()
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def inside(path: Path, folder: Path) -> bool:
    """True when ``path`` lies inside ``folder`` (both resolved)."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def output_file(out: str | Path, name: str) -> Path:
    """Where ``-o OUT`` writes: OUT itself, or ``OUT/name`` when OUT names a folder.

    A folder is one that exists, one written with a trailing slash (``docs/runs/``), or a
    name without a suffix (``docs/runs``); a missing folder is created by the writer.
    """
    text = str(out)
    path = Path(text)
    if path.is_dir() or text.endswith(("/", os.sep)) or not path.suffix:
        return path / name
    return path
