"""What flow made on this machine: the worktrees, branches and snapshot refs it may remove.

A progress file names a worktree's folder, a branch, a snapshot ref and the repository they
are in, and whoever wrote the file chose those names. So flow keeps its own record of each
thing it makes that a later command may delete or reset, in ``made.json`` in its folder
outside every repository (``flowhome``), where no clone or pull request can write:

- ``worktree``: a run's worktree folder and its branch (``flow run --worktree``, the fork of
  such a run, a worktree made again when a run resumes);
- ``snapshots``: a run's snapshot ref and the folder of its private index (docs/spec.md 12).

Each record names the repository (its real git folder), the work tree, the run id and the
progress file the thing was made for (real paths). A command that removes or resets one
(``flow discard``, ``flow clean``, ``flow merge``, a restore of rewind or fork) looks the record
up by what the file says (the run id, the branch or ref) and by the progress file's own place,
and then acts on the record's folder and repository, never on paths the file gives::

    record(Made("worktree", repository, "flow/x", "x", progress, root, folder))
    found = find("worktree", name="flow/x", run_id="x", progress=progress)  # None: not ours
    forget(found)

Records of repositories that no longer exist are dropped at the next write, so the file holds
about one record per run that has a worktree or snapshots in a repository still there.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from .durable import replace_file
from .errors import StorageError
from .flowhome import flow_home, read_private

#: The record's file name in flow's folder.
FILE_NAME = "made.json"
#: The format of the file.
VERSION = 1
#: The most a record file is read (far more than any machine's runs need).
MAX_BYTES = 64 << 20

Kind = Literal["worktree", "snapshots"]


@dataclass(frozen=True)
class Made:
    """One thing flow made: a worktree with its branch, or a run's snapshot ref."""

    kind: Kind
    #: The repository's git folder (``git rev-parse --git-common-dir``), real path.
    repository: str
    #: The branch (``flow/<run-id>``) or the ref (``refs/flow/<run-id>/snapshots``).
    name: str
    run_id: str
    #: The run's progress file, real path.
    progress: str
    #: The work tree: the main checkout a worktree belongs to, or the one snapshots are of.
    root: str
    #: The worktree's folder, or the folder of the snapshots' private index (real paths).
    folder: str

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies the thing: kind, repository, branch or ref."""
        return (self.kind, self.repository, self.name)


def real(path: str | Path) -> str:
    """``path`` with every link resolved, as records hold paths."""
    return os.path.realpath(path)


def registry_path() -> Path:
    """``made.json`` in flow's folder (``flowhome.flow_home``)."""
    return flow_home() / FILE_NAME


def _problem(path: Path, why: str) -> StorageError:
    return StorageError(
        f"it cannot be used: {why}. It records the worktrees, branches and snapshot refs flow "
        "made on this machine, the only ones flow removes.",
        path=path,
        hint="Move it away (flow then removes nothing it made before, and says so) or set "
        "FLOW_HOME to another folder.",
    )


def _read(path: Path) -> list[Made]:
    """The records in ``path`` (none when it does not exist)."""
    data = read_private(
        path, MAX_BYTES, what="record of what flow made", problem=lambda why: _problem(path, why)
    )
    if data is None:
        return []
    try:
        document = json.loads(data.decode("utf-8"))
        if not isinstance(document, dict) or document.get("flow_made") != VERSION:
            raise ValueError(f"it is not a version {VERSION} record")
        return [Made(**item) for item in document["made"]]
    except (ValueError, TypeError, KeyError) as error:
        raise _problem(path, f"it is not a record flow wrote ({error})") from error


@contextlib.contextmanager
def _locked() -> Iterator[Path]:
    """The record file, with the lock that makes a read-change-write one step."""
    from filelock import FileLock

    path = registry_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with FileLock(str(path.with_name(FILE_NAME + ".lock")), thread_local=False):
        yield path


def _change(update: Callable[[list[Made]], list[Made]]) -> None:
    with _locked() as path:
        found = _read(path)
        kept = [m for m in update(found) if os.path.isdir(m.repository)]
        if kept == found and path.exists():
            return
        document = {"flow_made": VERSION, "made": [asdict(m) for m in kept]}
        replace_file(path, (json.dumps(document, indent=1) + "\n").encode("utf-8"))


def record(made: Made) -> None:
    """Note that flow made ``made`` (replacing an older record of the same thing)."""
    _change(lambda found: [m for m in found if m.key != made.key] + [made])


def forget(made: Made) -> None:
    """Drop the record of ``made``: it was removed."""
    _change(lambda found: [m for m in found if m.key != made.key])


def find(kind: Kind, *, name: str, run_id: str, progress: str | Path) -> Made | None:
    """The record of the ``kind`` called ``name`` that flow made for run ``run_id`` with the
    progress file at ``progress``; None when this machine's flow made no such thing."""
    where = real(progress)
    for made in _read(registry_path()):
        if (made.kind, made.name, made.run_id, made.progress) == (kind, name, run_id, where):
            return made
    return None


def all_made() -> list[Made]:
    """Every record (for tests and for a person's look at the file)."""
    return _read(registry_path())
