"""Rows whose files travel through Ray: what goes to a node, and a row's attempt there.

With ``flow batch --engine ray --files shipped`` (docs/spec.md 8.6) no node needs the batch
folder, the workflow or the workspace at the driver's paths. The driver packs a ``Bundle``
once per batch: the workspace's files (without ``.git/``, ``.flow/`` and the batch folder),
and the workflow, its sub-workflows and its handoff agents where they lie outside it, and the
recording of ``--recording``, each under its absolute path on the driver's machine. A row's
task (``run_shipped``) then, on its node:

1. makes a scratch folder of its own (``Scratch``), removed when the attempt ends;
2. asks the driver for the row's files as the driver holds them (``relay.Channel.open``);
3. writes the bundle and those files below the scratch folder, each driver path ``/a/b``
   at ``scratch/a/b`` (``on_node``), so paths relative to each other (the workflow's path a
   progress file records, a sub-workflow's) are what they are on the driver;
4. runs the row (``worker.run_row``) with every write of its store sent to the driver
   (``progress.mirror``), the batch's budget held by the driver, and the driver's trust in the
   workspace's brought files (``RowTask.trust``), never the node's own;
5. sends back what the row's folder gained that is not the store's (its events, a server's
   log), and answers with the row's result.

Every path that arrives on a node, from the bundle or from the driver's answer, is a plain
relative path below the scratch folder with no link on the way (``base.confine``); one that is
not refuses the attempt. A row's changes to its copy of the workspace stay on the node and go
with the scratch folder, so a batch whose workflow offers tools that edit files or run
commands the model writes is refused before any row runs (``changing_tools``)::

    bundle = make_bundle(Path.cwd(), workflow, leave_out=[batch_folder])
    result = run_shipped(asdict(task), bundle, channel)     # in the row's task, on a node
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.confine import is_within, no_link_on_the_way
from ..base.errors import InputError, SpecialFileError
from ..base.safeopen import read_regular
from ..progress.mirror import MirrorError, MirrorOp, attached
from ..progress.replica import EXTRA_SUFFIXES
from ..workflow.records import Workflow
from ..workflow.toolnames import ASK_EXCLUDED
from .relay import Channel
from .worker import RowResult, RowTask, UsageReporter, run_row

if TYPE_CHECKING:
    from ..run.runoptions import RunOptions

#: The most bytes of files a bundle carries: it is held in Ray's object store, and every row's
#: attempt writes it out on its node.
MAX_BUNDLE_BYTES = 256 * 1024 * 1024
#: The most files a bundle carries.
MAX_BUNDLE_FILES = 50_000
#: Folders of the workspace that never travel: git's (credentials, and its size), flow's own
#: (runs, batches, worktrees).
LEFT_OUT = frozenset({".git", ".flow"})
#: Scratch folders live in ``<temp>/flow-rows-<uid>/<pid>-<random>`` on each node.
_SCRATCH_PARENT = "flow-rows"


#: How a Ray batch's rows reach their files (``--files``).
FILES_MODES = ("shared", "shipped")


@dataclass(frozen=True)
class Bundle:
    """The files a row needs on a node, each under its absolute path on the driver's machine:
    (path, bytes, executable)."""

    files: tuple[tuple[str, bytes, bool], ...] = ()

    @property
    def size(self) -> int:
        """Bytes of all the files."""
        return sum(len(data) for _, data, _ in self.files)


@dataclass(frozen=True)
class Shipping:
    """What a batch with ``--files shipped`` sends to the cluster besides each row's task."""

    bundle: Bundle


def files_mode(engine: str, files: str | None, address: str | None) -> str | None:
    """How rows reach their files: None with the local engine (they are on this machine);
    with Ray, ``files`` when given, else ``shipped`` to join a cluster (``--address`` or
    ``RAY_ADDRESS``) and ``shared`` for a Ray of this machine's own."""
    if files is not None and files not in FILES_MODES:
        raise InputError(
            f"--files {files!r} is not a mode flow knows.", hint="Choose shared or shipped."
        )
    if engine != "ray":
        if files == "shipped":
            raise InputError(
                "--files shipped is for the ray engine: local workers share this machine's files.",
                hint="Add --engine ray, or leave out --files.",
            )
        return None
    if files is not None:
        return files
    return "shipped" if (address or os.environ.get("RAY_ADDRESS")) else "shared"


def named_env(names: Sequence[str]) -> dict[str, str]:
    """The values of the variables the person named for the tasks (``--ray-env NAME``), from
    this process's environment; ``FLOW_SEAL_KEY`` not set here is this machine's sealing key
    (docs/spec.md 10.1). ``InputError`` for a name that is not a variable's or is not set."""
    from ..progress.seal import KEY_VARIABLE, Key

    env: dict[str, str] = {}
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
            raise InputError(f"--ray-env {name!r} is not the name of an environment variable.")
        value = os.environ.get(name)
        if value is None and name == KEY_VARIABLE:
            value = Key.ensure().secret.hex()
        if value is None:
            raise InputError(
                f"--ray-env {name}: the variable {name} is not set here, so there is nothing "
                "to send to the tasks.",
                hint=f"Set {name} in this shell, or leave out --ray-env {name}.",
            )
        env[name] = value
    return env


def prepare(workflow: Workflow, folder: Path, recording: str | Path | None) -> Shipping:
    """What a shipped batch sends, checked before anything runs: the workflow changes no file
    (``changing_tools``), and the bundle is within its limits."""
    changing = changing_tools(workflow)
    if changing:
        raise InputError(
            f"--files shipped: the workflow offers tools that change the workspace "
            f"({', '.join(changing)}), but on a Ray node a row works in its own copy of the "
            "workspace, whose changes are not brought back.",
            path=workflow.path,
            field="$.tools",
            hint="Use --files shared on a cluster whose nodes mount the workspace and the batch "
            "folder at the same path (or the local engine), or offer only tools that read.",
        )
    extra = [Path(recording)] if recording is not None else []
    return Shipping(make_bundle(Path.cwd(), workflow, leave_out=[folder], extra=extra))


def workflow_files(workflow: Workflow) -> list[Path]:
    """The workflow's file, its sub-workflows' and its handoff agents' (each once, real paths)."""
    found: dict[Path, None] = {}
    pending = [workflow]
    while pending:
        wf = pending.pop()
        path = Path(os.path.realpath(wf.path))
        if path in found:
            continue
        found[path] = None
        pending.extend(s.child for s in wf.steps if s.child is not None)
        pending.extend(s.part for s in wf.steps if s.part is not None)
    return list(found)


def changing_tools(workflow: Workflow) -> list[str]:
    """The tools the workflow offers (in any step, sub-workflow or handoff part) that change
    the workspace: the built-in edits and ``run_in_terminal`` (the tools ``mode: ask`` takes
    away). A declared command of the same name is the author's and is not counted."""
    found: dict[str, None] = {}
    seen: set[Path] = set()
    pending = [workflow]
    while pending:
        wf = pending.pop()
        if wf.path in seen:
            continue
        seen.add(wf.path)
        offered = [*wf.tools, *(t for s in wf.steps for t in (s.tools or ()))]
        for tool in offered:
            if tool in ASK_EXCLUDED and tool not in wf.commands:
                found[tool] = None
        pending.extend(s.child for s in wf.steps if s.child is not None)
        pending.extend(s.part for s in wf.steps if s.part is not None)
    return sorted(found)


def _too_large(workspace: Path, sizes: dict[str, int], total: int, count: int) -> InputError:
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:3]
    named = ", ".join(f"{name} ({size / 1_000_000:.1f} MB)" for name, size in largest)
    return InputError(
        f"--files shipped: the workspace {workspace} holds {count} files of "
        f"{total / 1_000_000:.1f} MB to send to every node, over the limit of "
        f"{MAX_BUNDLE_FILES} files and {MAX_BUNDLE_BYTES // (1024 * 1024)} MiB; the largest: "
        f"{named}.",
        hint="Run the batch from a smaller folder (the workspace is the working directory), "
        "or use --files shared on a cluster whose nodes mount the workspace and the batch "
        "folder at the same path.",
    )


def make_bundle(
    workspace: Path,
    workflow: Workflow,
    *,
    leave_out: Sequence[Path] = (),
    extra: Sequence[Path] = (),
) -> Bundle:
    """The files a shipped row needs: the workspace's regular files (no link is followed, and
    ``LEFT_OUT`` folders and ``leave_out`` folders stay), then the workflow's files and
    ``extra`` files outside it. ``InputError`` (exit 9) past the size limits."""
    root = Path(os.path.realpath(workspace))
    skipped = {Path(os.path.realpath(p)) for p in leave_out}
    files: list[tuple[str, bytes, bool]] = []
    sizes: dict[str, int] = {}
    total = 0
    for top, folders, names in os.walk(root):
        here = Path(top)
        folders[:] = sorted(
            f
            for f in folders
            if f not in LEFT_OUT and here / f not in skipped and not (here / f).is_symlink()
        )
        for name in sorted(names):
            path = here / name
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                continue  # links, pipes and devices do not travel
            total += info.st_size
            top_name = path.relative_to(root).parts[0]
            sizes[top_name] = sizes.get(top_name, 0) + info.st_size
            if total > MAX_BUNDLE_BYTES or len(files) >= MAX_BUNDLE_FILES:
                raise _too_large(root, sizes, total, len(files) + 1)
            with contextlib.suppress(OSError, SpecialFileError):
                data = read_regular(path, MAX_BUNDLE_BYTES, what="workspace file")
                if data is not None:
                    files.append((str(path), data, bool(info.st_mode & stat.S_IXUSR)))
    for path in [*workflow_files(workflow), *extra]:
        real = Path(os.path.realpath(path))
        if is_within(real, root):
            continue
        data = read_regular(real, MAX_BUNDLE_BYTES, what="workflow file", follow=True) or b""
        files.append((str(real), data, False))
    return Bundle(tuple(files))


def carried_trust(workspace: Path, options: RunOptions | None = None) -> dict[str, Any]:
    """What this machine trusts of ``workspace``'s brought files (``flow trust``, or
    ``--trust-workspace`` / ``FLOW_TRUST_WORKSPACE`` turned into the digests of the files as
    they are now), as a row's task carries it (``RowTask.trust``): a shipped row's node judges
    its copy by it."""
    from ..run.runoptions import RunOptions as Options
    from ..trust import portable

    return portable((options or Options()).trust_in(workspace)).to_record()


def on_node(path: str, root: Path) -> Path:
    """Where the driver's absolute ``path`` lives below the scratch folder ``root``; a path
    that is not a plain absolute one, or that passes a link below ``root``, is refused
    (``PathEscapeError``)."""
    if not path.startswith("/"):
        raise MirrorError(f"{path!r} is not an absolute path of the batch's driver")
    return no_link_on_the_way(root, path.lstrip("/"))


def _write(target: Path, data: bytes, executable: bool = False) -> None:
    """A file of the scratch folder (its parents made; never through a link)."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if target.is_symlink():
        raise MirrorError(f"{target} is a symbolic link")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if executable:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


class Scratch:
    """One attempt's own folder on a node, removed when it ends. The folders of attempts whose
    process died (a node's worker killed) are removed by the next attempt on the node: each
    is named by its process's id, in a folder only this user can write."""

    def __init__(self) -> None:
        self.parent = Path(tempfile.gettempdir()) / f"{_SCRATCH_PARENT}-{os.getuid()}"
        self.root = self.parent / f"{os.getpid()}-{secrets.token_hex(4)}"

    def __enter__(self) -> Path:
        self.parent.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(self.parent)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise MirrorError(f"{self.parent} is not a private folder of this user")
        self._remove_dead()
        self.root.mkdir(mode=0o700)
        return self.root

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _remove_dead(self) -> None:
        for item in self.parent.iterdir():
            pid, _, _ = item.name.partition("-")
            if not pid.isdigit() or _alive(int(pid)):
                continue
            if item.is_symlink() or not item.is_dir():
                continue
            shutil.rmtree(item, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _on_node_task(task: RowTask, root: Path) -> RowTask:
    """The row's task with every path of the driver's machine moved below ``root``."""
    return replace(
        task,
        progress=str(on_node(task.progress, root)),
        workflow=str(on_node(task.workflow, root)),
        workspace=str(on_node(task.workspace, root)),
        recording=None if task.recording is None else str(on_node(task.recording, root)),
        budget=None,
    )


def _send_extras(folder: Path, channel: Channel) -> None:
    """What the row's folder gained that is not the store's (its events, servers' logs)."""
    for top, folders, names in os.walk(folder):
        here = Path(top)
        folders[:] = [f for f in folders if not (here / f).is_symlink()]
        for name in names:
            path = here / name
            if not name.endswith(EXTRA_SUFFIXES) or not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            data = path.read_bytes()
            if data:
                rel = path.relative_to(folder).as_posix()
                channel.send(MirrorOp("extra", rel, data))


def run_shipped(fields: dict[str, Any], bundle: Bundle, channel: Channel) -> RowResult:
    """One attempt of a row on a node, in a scratch folder (see the module); a row that cannot
    begin (the driver refused, a path that would leave the scratch folder) is ``failed``."""
    task = RowTask(**fields)
    with Scratch() as root:
        try:
            seed = channel.open()
            for path, data, executable in bundle.files:
                _write(on_node(path, root), data, executable)
            local = _on_node_task(task, root)
            folder = Path(local.progress).parent
            for rel, data in seed:
                _write(no_link_on_the_way(folder, rel), data)
        except (MirrorError, OSError, ValueError) as error:
            return RowResult(task.row, "failed", error=f"the row could not begin: {error}")
        reporter = UsageReporter(channel.usage, task.row)
        try:
            with attached(folder, channel):
                result = run_row(local, reporter, ledger=channel if task.budget else None)
        finally:
            with contextlib.suppress(MirrorError, OSError):
                _send_extras(folder, channel)
        if result.error:
            # Messages name the driver's paths, not the scratch folder's.
            result = replace(result, error=result.error.replace(str(root), ""))
        return result
