"""Runs that work in their own git worktree: ``flow run --worktree``, review, merge, discard.

A run started with ``--worktree`` gets a new branch ``flow/<run-id>`` made from the
repository's HEAD, checked out in a worktree at ``<repository>/.flow/worktrees/<run-id>``.
Its tools (edits, commands, searches) work there; its progress file stays in the main
checkout and records the worktree (``worktree:`` in the front matter)::

    tree, folder = create_worktree(Path.cwd(), run_id)      # before the run starts
    review = review_run(progress_path)                      # what the run changed
    result = merge_run(progress_path, squash=False)         # into the current branch
    discard_run(progress_path)                              # worktree and branch removed

The rules:

- The base must be clean: a change to a tracked file that is not committed would be missing
  from the worktree, so it is refused (files under ``.flow/`` do not count, and untracked files
  never do). ``/.flow/worktrees/`` is added to the repository's ``info/exclude`` so the
  worktrees never show up in ``git status`` of the main checkout.
- At the end of every completed step, everything the step changed in the worktree is committed
  to the run's branch (one commit per step, hooks not run). Changes of a step that was stopped
  stay uncommitted until the step completes on resume, or until ``flow merge`` commits them;
  ``flow review`` shows them either way.
- A merge that conflicts is aborted: the main checkout is left as it was, the worktree and the
  branch stay, and the error names the files.
- Resume reattaches the worktree, and recreates it from the branch when its folder was deleted.
- A worktree record is a claim of the file (docs/spec.md 10.10): its folder is used only at
  ``.flow/worktrees/<name>`` of the repository holding the progress file, with the branch
  ``flow/<name>``, no symbolic link on the way and registered with git as a worktree of that
  repository. Merge, discard and ``flow clean`` act only on a worktree and branch that this
  machine's record (``base/madehere``) says flow made for the run's progress file, and on the
  folder and branch that record names.

Every git command runs as ``git`` with an argument list, never through a shell.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import madehere
from .base.clock import now_iso
from .base.confine import PathEscapeError, no_link_on_the_way, plain_relative
from .base.errors import FilesError, FlowError, GitError, InputError
from .base.runids import valid_run_id
from .flowfolder import make_folder
from .progress import ProgressStore, load_progress
from .progress.location import progress_file
from .progress.model import Run, WorktreeRef, WorktreeState

#: Where worktrees go, relative to the repository's root.
WORKTREES_DIR = Path(".flow") / "worktrees"
#: The prefix of a run's branch name.
BRANCH_PREFIX = "flow/"
#: The line added to ``info/exclude`` so worktrees never show in the main checkout's status.
EXCLUDE_LINE = "/.flow/worktrees/"
#: Variables that would point git at another repository or index than the one asked for.
_GIT_LOCATION_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")
#: Files named in an error message before "and N more".
_LISTED = 10


class MergeConflictError(FilesError, GitError):
    """``flow merge`` met a conflict; the merge was aborted and nothing changed (``files``:
    the conflicting ones)."""


# --- git itself -------------------------------------------------------------------------------


def git(
    args: Sequence[str],
    cwd: Path,
    *,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``git ARGS`` in ``cwd``; a failure (with ``check``) is a GitError quoting git."""
    environment = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARIABLES}
    environment.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    environment.update(env or {})
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=environment,
            check=False,
        )
    except FileNotFoundError as error:
        if not cwd.is_dir():
            raise GitError(f"the folder {cwd} does not exist.", path=cwd) from error
        raise GitError(
            "git is not installed (no `git` program on the PATH); runs in a worktree need it.",
            hint="Install git, or run without --worktree.",
        ) from error
    if check and done.returncode != 0:
        raise GitError(
            f"`git {' '.join(args)}` failed in {cwd}: {_last_lines(done.stderr or done.stdout)}"
        )
    return done


def _last_lines(text: str, n: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[-n:]) or "no message"


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_LISTED])
    return shown + (f" and {len(paths) - _LISTED} more" if len(paths) > _LISTED else "")


def repository_root(folder: Path) -> Path:
    """The top folder of the git checkout holding ``folder``; GitError when there is none."""
    start = folder
    while not start.is_dir() and start != start.parent:
        start = start.parent  # a progress file's folder that does not exist yet
    done = git(["rev-parse", "--show-toplevel"], start, check=False)
    if done.returncode != 0:
        raise GitError(
            f"{folder.resolve()} is not inside a git repository; a run in a worktree needs "
            "one (it works on a branch of it).",
            path=folder,
            hint="Run `git init` and commit your files first, or run without --worktree.",
        )
    return Path(done.stdout.strip()).resolve()


def head_commit(root: Path) -> str:
    """The full hash of HEAD's commit; GitError in a repository without any commit."""
    done = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], root, check=False)
    if done.returncode != 0:
        raise GitError(
            f"the repository at {root} has no commit yet; a worktree starts from HEAD.",
            path=root,
            hint="Commit your files first (`git add -A && git commit`).",
        )
    return done.stdout.strip()


def uncommitted_files(root: Path) -> list[str]:
    """Tracked files with changes not committed (staged or not), ``.flow/`` left out."""
    done = git(["status", "--porcelain=v1", "-z", "--untracked-files=no"], root)
    files: list[str] = []
    items = done.stdout.split("\0")
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if len(item) < 4:
            continue
        if item[0] in "RC":
            i += 1  # a rename or copy is followed by its source path
        path = item[3:]
        if ".flow" not in Path(path).parts:
            files.append(path)
    return files


def branch_exists(root: Path, branch: str) -> bool:
    """True when the local branch ``branch`` exists."""
    done = git(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], root, check=False)
    return done.returncode == 0


def _exclude_worktrees(root: Path) -> None:
    """Add ``/.flow/worktrees/`` to the repository's ``info/exclude`` (once)."""
    common = Path(git(["rev-parse", "--git-common-dir"], root).stdout.strip())
    exclude = (common if common.is_absolute() else root / common) / "info" / "exclude"
    try:
        text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    except OSError:
        text = ""
    if EXCLUDE_LINE in text.splitlines():
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with open(exclude, "a", encoding="utf-8", newline="") as handle:
        if text and not text.endswith("\n"):
            handle.write("\n")
        handle.write(f"# worktrees of flow runs (flow run --worktree)\n{EXCLUDE_LINE}\n")


def _identity(folder: Path) -> list[str]:
    """``-c user.name=… -c user.email=…`` when git has no identity configured here."""
    options: list[str] = []
    for key, fallback in (("user.name", "flow"), ("user.email", "flow@localhost")):
        if git(["config", "--get", key], folder, check=False).returncode != 0:
            options += ["-c", f"{key}={fallback}"]
    return options


# --- creating and finding a run's worktree ------------------------------------------------


def branch_for(run_id: str) -> str:
    """The branch of run ``run_id``: ``flow/<run-id>``."""
    return f"{BRANCH_PREFIX}{run_id}"


def create_worktree(
    workspace: Path, run_id: str, *, progress: Path | None = None
) -> tuple[WorktreeRef, Path]:
    """Make branch ``flow/<run-id>`` from HEAD and its worktree; the record and the folder.

    GitError when ``workspace`` is not in a repository, the repository has no commit, tracked
    files have uncommitted changes, or the branch or folder already exists. InputError when
    ``progress`` (the run's progress file) would lie outside the repository's main checkout:
    the worktree is found from it later.
    """
    root = repository_root(workspace)
    if progress is not None and not _inside(progress, root):
        raise InputError(
            f"with --worktree the progress file must lie inside the repository {root} (outside "
            f"{WORKTREES_DIR.as_posix()}/): {progress} does not; the run's worktree is found "
            "from it.",
            path=progress,
            hint="Leave out --progress (the default .flow/runs/<run-id>/ is inside), or name a "
            "path inside the repository.",
        )
    base = head_commit(root)
    dirty = uncommitted_files(root)
    if dirty:
        raise GitError(
            f"the repository at {root} has uncommitted changes to {len(dirty)} tracked "
            f"file(s): {_listed(dirty)}; the run's worktree starts from HEAD and would not see "
            "them.",
            path=root,
            hint="Commit or stash them first (`git stash`), then run again.",
        )
    folder = add_worktree_at(root, run_id, base, progress=progress)
    tree = WorktreeRef(
        path=WORKTREES_DIR.joinpath(run_id).as_posix(), branch=branch_for(run_id), base=base
    )
    return tree, folder


def add_worktree_at(root: Path, run_id: str, start: str, *, progress: Path | None) -> Path:
    """Make branch ``flow/<run-id>`` at commit ``start`` and check it out in its worktree.

    A new run's branch starts from HEAD; a fork of a run in a worktree starts from the
    original's branch. GitError when the branch or the folder already exists. Returns the
    worktree's folder, recorded as made here for the run's ``progress`` file (when known).
    """
    branch = branch_for(run_id)
    if branch_exists(root, branch):
        raise GitError(
            f"the branch {branch} already exists in {root}; a run in a worktree makes its own "
            "branch.",
            path=root,
            hint=f"Delete it (`git branch -D {branch}`), or discard the run that made it "
            "(`flow discard PROGRESS`), then try again.",
        )
    folder = root / WORKTREES_DIR / run_id
    if folder.exists():
        raise GitError(
            f"the folder {folder} already exists; it would become the run's worktree.",
            path=folder,
            hint="Remove it (or `git worktree remove` it), then try again.",
        )
    _exclude_worktrees(root)
    _no_link(root, WORKTREES_DIR.joinpath(run_id).as_posix(), None)
    make_folder(folder.parent)
    git(["worktree", "add", "--quiet", "-b", branch, str(folder), start], root)
    if progress is not None:
        _record(root, run_id, branch, folder, progress)
    return folder


def _record(root: Path, run_id: str, branch: str, folder: Path, progress: Path) -> None:
    """Note that flow made worktree ``folder`` and branch ``branch`` here for the run."""
    madehere.record(
        madehere.Made(
            kind="worktree",
            repository=str(common_dir(root)),
            name=branch,
            run_id=run_id,
            progress=madehere.real(progress),
            root=madehere.real(root),
            folder=madehere.real(folder),
        )
    )


def common_dir(root: Path) -> Path:
    """The repository's shared git folder (``git rev-parse --git-common-dir``), real path."""
    return (root / git(["rev-parse", "--git-common-dir"], root).stdout.strip()).resolve()


def made_worktree(tree: WorktreeRef, run_id: str, progress: Path) -> madehere.Made | None:
    """This machine's record of the worktree and branch ``tree`` names, when flow here made
    them for run ``run_id`` and its progress file ``progress`` and the file's path leads to the
    recorded folder; None otherwise (docs/spec.md 10.10)."""
    found = madehere.find("worktree", name=tree.branch, run_id=run_id, progress=progress)
    if found is None:
        return None
    try:
        rel = plain_relative(tree.path)
    except PathEscapeError:
        return None
    if madehere.real(Path(found.root).joinpath(*rel.parts)) != found.folder:
        return None
    return found


def not_made_here(tree: WorktreeRef, progress: Path, doing: str) -> GitError:
    """The refusal of ``doing`` (``flow discard`` removes …) for a worktree this machine's
    flow did not make for the run's file."""
    return GitError(
        f"{doing} only a worktree and branch that flow made on this machine for this run and "
        f"this progress file, and there is no such record for the worktree {tree.path!r} and "
        f"branch {tree.branch!r} (the file came from elsewhere, was copied or moved, or names "
        "another folder or branch): nothing was changed.",
        path=progress,
        field="$.worktree",
        hint="See what they are with `git worktree list` and `git branch`, and use git itself "
        "for what is yours.",
    )


def remove_made(made: madehere.Made) -> None:
    """Remove the worktree folder and branch this machine's record ``made`` names (the
    folder's uncommitted changes with it), then the record."""
    root, folder = Path(made.root), Path(made.folder)
    if os.path.lexists(folder):
        done = git(["worktree", "remove", "--force", str(folder)], root, check=False)
        if done.returncode != 0 and os.path.lexists(folder):
            # Not (or no longer) registered with git: the folder is ours all the same, but
            # only where flow made it, never through a link.
            rel = os.path.relpath(folder, root)
            target = _no_link(root, rel, None)
            if not target.is_symlink() and target.is_dir():
                shutil.rmtree(target)
    git(["worktree", "prune"], root)
    if branch_exists(root, made.name):
        git(["branch", "-D", made.name], root)
    madehere.forget(made)


def remove_new(tree: WorktreeRef, run_id: str, progress: Path) -> None:
    """Remove a worktree just made for a run that could not start (or be forked)."""
    made = made_worktree(tree, run_id, progress)
    if made is not None:
        remove_made(made)


def _no_link(root: Path, rel: str, progress: Path | None) -> Path:
    """``root/rel`` with no symbolic link on the way; GitError otherwise."""
    try:
        return no_link_on_the_way(root, rel)
    except PathEscapeError as error:
        raise GitError(
            f"the worktree's folder {rel} is not used: {error}.",
            path=progress,
            field="$.worktree.path" if progress is not None else None,
            hint="Move the link away (a worktree lies in .flow/worktrees/ of the repository).",
        ) from None


def _inside(path: Path, root: Path) -> bool:
    """True when ``path`` lies in ``root`` but not in its worktrees folder."""
    target = path.resolve()
    top = root.resolve()
    if top not in target.parents:
        return False
    return (top / WORKTREES_DIR) not in target.parents


def checked_folder(tree: WorktreeRef, root: Path, progress: Path) -> Path:
    """The folder a worktree record names, as flow uses it: ``.flow/worktrees/<name>`` of
    ``root`` (the repository holding the progress file), with branch ``flow/<name>`` and no
    symbolic link on the way. GitError naming the field otherwise: a path or a branch from a
    file could name any folder or branch (docs/spec.md 10.10)."""
    parts = tree.path.split("/")
    name = parts[-1]
    where = f"{WORKTREES_DIR.as_posix()}/<name>"
    if parts[:-1] != list(WORKTREES_DIR.parts) or not valid_run_id(name):
        raise GitError(
            f"the run's worktree {tree.path!r} is not a folder flow makes ({where} of the "
            f"repository holding the progress file, {root}), so flow does not use it: a "
            "worktree from a file could name any folder.",
            path=progress,
            field="$.worktree.path",
            hint="A run in a worktree works in the folder flow made for it; start a new run "
            "with --worktree.",
        )
    if tree.branch != branch_for(name):
        raise GitError(
            f"the run's branch {tree.branch!r} is not the one flow makes for the worktree "
            f"{tree.path} ({branch_for(name)}), so flow does not use it: a branch from a file "
            "could name any branch.",
            path=progress,
            field="$.worktree.branch",
            hint="A run in a worktree works on the branch flow made for it; start a new run "
            "with --worktree.",
        )
    folder = _no_link(root, tree.path, progress)
    if folder.is_symlink():
        raise GitError(
            f"the run's worktree {tree.path} is a symbolic link (to {os.readlink(folder)}), "
            "not the folder flow made: flow works in no folder through a link.",
            path=progress,
            field="$.worktree.path",
            hint="Remove the link; flow resume makes the worktree again from its branch.",
        )
    return folder


def worktree_folder(tree: WorktreeRef, progress_path: Path) -> Path:
    """The worktree's folder in the progress file's repository (``checked_folder``)."""
    root = repository_root(progress_path.resolve().parent)
    return checked_folder(tree, root, progress_path)


def relative_to_root(folder: Path, root: Path) -> str:
    """``folder`` relative to ``root`` with forward slashes, or absolute when outside it."""
    try:
        return folder.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(folder.resolve())


def is_worktree_of(folder: Path, root: Path) -> bool:
    """Whether git lists ``folder`` as a worktree of the repository at ``root``: only then is
    it used (a ``.git`` file committed in a folder could point at any repository)."""
    if folder.is_symlink() or not (folder / ".git").exists():
        return False  # gone (git still lists a worktree whose folder was deleted)
    done = git(["worktree", "list", "--porcelain", "-z"], root, check=False)
    if done.returncode != 0:
        return False
    want = madehere.real(folder)
    listed = (f[len("worktree ") :] for f in done.stdout.split("\0") if f.startswith("worktree "))
    return any(madehere.real(path) == want for path in listed)


def attach_worktree(tree: WorktreeRef, progress_path: Path) -> tuple[Path, str | None]:
    """The folder a resumed run works in, and a note when it had to be recreated.

    A deleted folder is made again from the run's branch (what was committed stays; what was
    not is gone). A discarded run, or one whose branch was deleted, cannot resume: GitError.
    """
    if tree.state == "discarded":
        raise GitError(
            f"this run's worktree and branch {tree.branch} were discarded (flow discard); the "
            "run cannot resume.",
            path=progress_path,
            field="$.worktree.state",
            hint="Start a new run.",
        )
    root = repository_root(progress_path.resolve().parent)
    folder = checked_folder(tree, root, progress_path)
    if is_worktree_of(folder, root):
        return folder, None
    if not branch_exists(root, tree.branch):
        raise GitError(
            f"the run's worktree {tree.path} and its branch {tree.branch} are both gone; the "
            "run has nothing to resume in.",
            path=progress_path,
            field="$.worktree",
            hint="Start a new run (its work was on that branch).",
        )
    git(["worktree", "prune"], root)
    make_folder(folder.parent)
    if not folder.is_symlink() and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    _exclude_worktrees(root)
    git(["worktree", "add", "--quiet", str(folder), tree.branch], root)
    run_id = folder.name
    _record(root, run_id, tree.branch, folder, progress_path)
    return folder, (
        f"the run's worktree {tree.path} was missing; recreated it from branch {tree.branch} "
        "(what the run had committed there is back; uncommitted changes are not)"
    )


def commit_all(folder: Path, message: str) -> str | None:
    """Commit every change in worktree ``folder`` (new files too); the commit, or None."""
    git(["add", "--all"], folder)
    if git(["diff", "--cached", "--quiet"], folder, check=False).returncode == 0:
        return None
    git([*_identity(folder), "commit", "--quiet", "--no-verify", "-m", message], folder)
    return git(["rev-parse", "HEAD"], folder).stdout.strip()


def step_committer(
    folder: Path, run_id: str, notice: Callable[[str], None]
) -> Callable[[str], None]:
    """The engine's step hook for a run in a worktree: commit what the step changed.

    A commit that fails does not stop the run: the changes stay in the worktree (review shows
    them, merge commits them) and the failure is told.
    """

    def commit(step_id: str) -> None:
        try:
            commit_all(folder, f"flow run {run_id}: step {step_id}")
        except FlowError as error:
            notice(f"could not commit step {step_id} in the worktree: {error}")

    return commit


# --- review, merge, discard ---------------------------------------------------------------


@dataclass
class FileChange:
    """One file the run changed: lines added and removed (None for a binary file)."""

    path: str
    insertions: int | None
    deletions: int | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"path": self.path, "insertions": self.insertions, "deletions": self.deletions}


@dataclass
class Review:
    """What a run changed against its base: for ``flow review``."""

    run_id: str
    tree: WorktreeRef
    folder: Path
    #: True when the worktree holds changes not committed to the branch yet (included).
    uncommitted: bool
    files: list[FileChange] = field(default_factory=list)
    stat: str = ""
    diff: str = ""
    commits: int = 0
    #: True for a run without a worktree, reviewed from its file snapshots (docs/spec.md 12):
    #: ``tree.branch`` is then the snapshots' ref and ``tree.base`` the base snapshot.
    from_snapshots: bool = False

    @property
    def insertions(self) -> int:
        """Lines added, over all text files."""
        return sum(f.insertions or 0 for f in self.files)

    @property
    def deletions(self) -> int:
        """Lines removed, over all text files."""
        return sum(f.deletions or 0 for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        """The ``flow review --json`` document."""
        return {
            "run_id": self.run_id,
            "worktree": self.tree.path,
            "branch": self.tree.branch,
            "base": self.tree.base,
            "state": self.tree.state,
            "commits": self.commits,
            "uncommitted": self.uncommitted,
            "from_snapshots": self.from_snapshots,
            "files": [f.to_dict() for f in self.files],
            "insertions": self.insertions,
            "deletions": self.deletions,
            "diff": self.diff,
        }


def _run_with_tree(progress_path: Path) -> tuple[Run, WorktreeRef]:
    run, _ = load_progress(progress_path)
    if run.worktree is None:
        raise GitError(
            f"run {run.run_id} was not started in a worktree; it changed the files of the "
            "checkout directly, and recorded no file snapshots to review them from.",
            path=progress_path,
            field="$.worktree",
            hint="Only runs started with `flow run --worktree` can be merged or discarded; "
            "runs with file snapshots (in a git repository, without --no-snapshots) can be "
            "reviewed.",
        )
    return run, run.worktree


def _refuse_discarded(tree: WorktreeRef, progress_path: Path) -> None:
    if tree.state == "discarded":
        raise GitError(
            f"this run's worktree and branch {tree.branch} were discarded; there is nothing "
            "left to review or merge.",
            path=progress_path,
            field="$.worktree.state",
        )


def _numstat(text: str) -> list[FileChange]:
    changes: list[FileChange] = []
    for line in text.splitlines():
        added, removed, path = [*line.split("\t", 2), "", ""][:3]
        if not path:
            continue
        changes.append(
            FileChange(
                path=path,
                insertions=None if added == "-" else int(added),
                deletions=None if removed == "-" else int(removed),
            )
        )
    return changes


def review_run(progress_path: str | Path) -> Review:
    """What the run at ``progress_path`` changed against its base, uncommitted changes too.

    The worktree's own index is left alone: its files are staged into a temporary index.
    Without the worktree folder, the branch is compared with the base.
    """
    path = progress_file(progress_path)
    run, _ = load_progress(path)
    if run.worktree is None and run.snapshots is not None:
        return _review_snapshots(run, path)
    run, tree = _run_with_tree(path)
    _refuse_discarded(tree, path)
    root = repository_root(path.resolve().parent)
    folder = checked_folder(tree, root, path)
    if not branch_exists(root, tree.branch):
        raise GitError(
            f"the run's branch {tree.branch} no longer exists.", path=path, field="$.worktree"
        )
    commits = int(git(["rev-list", "--count", f"{tree.base}..{tree.branch}"], root).stdout)
    if not is_worktree_of(folder, root):
        target = [tree.base, tree.branch]
        return Review(
            run_id=run.run_id,
            tree=tree,
            folder=folder,
            uncommitted=False,
            files=_numstat(git(["diff", "--numstat", *target], root).stdout),
            stat=git(["diff", "--stat", *target], root).stdout,
            diff=git(["diff", *target], root).stdout,
            commits=commits,
        )
    uncommitted = bool(git(["status", "--porcelain"], folder).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="flow-review-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(["read-tree", "HEAD"], folder, env=env)
        git(["add", "--all"], folder, env=env)
        target = ["--cached", tree.base]
        return Review(
            run_id=run.run_id,
            tree=tree,
            folder=folder,
            uncommitted=uncommitted,
            files=_numstat(git(["diff", "--numstat", *target], folder, env=env).stdout),
            stat=git(["diff", "--stat", *target], folder, env=env).stdout,
            diff=git(["diff", *target], folder, env=env).stdout,
            commits=commits,
        )


def _review_snapshots(run: Run, path: Path) -> Review:
    """What a run in the checkout itself changed: its base snapshot against its latest."""
    from .snapshots import trusted_repo

    assert run.snapshots is not None
    taken = [s for s in run.snapshots.calls if s.commit is not None]
    # Only snapshots flow took here for this file, of the repository its record names.
    repo = trusted_repo(run.snapshots, run.run_id, path)
    root = repo.root
    base, latest = taken[0].commit or "", taken[-1].commit or ""
    for commit in (base, latest):
        if not repo.has(commit) or not repo.in_chain(commit):
            raise GitError(
                f"the snapshot {commit[:12]} of run {run.run_id} is not one of the run's "
                f"snapshots in the repository at {root} (removed by `flow clean`, another "
                "clone, or not the run's).",
                path=path,
                field="$.snapshots",
            )
    # Only the paths the run's calls changed: a record without a call holds what someone
    # else changed between attempts, which is theirs, not the run's.
    paths: set[str] = set()
    for before, snap in itertools.pairwise(taken):
        if snap.call_id is not None and snap.commit != before.commit:
            names = git(["diff", "--name-only", "-z", before.commit or "", snap.commit or ""], root)
            paths.update(p for p in names.stdout.split("\0") if p)
    target = [base, latest, "--", *sorted(paths)] if paths else [base, base]
    return Review(
        run_id=run.run_id,
        tree=WorktreeRef(path=run.snapshots.root, branch=run.snapshots.ref, base=base),
        folder=root,
        uncommitted=False,
        files=_numstat(git(["diff", "--numstat", *target], root).stdout),
        stat=git(["diff", "--stat", *target], root).stdout,
        diff=git(["diff", *target], root).stdout,
        commits=len({s.commit for s in taken[1:] if s.call_id is not None} - {base}),
        from_snapshots=True,
    )


@dataclass
class MergeResult:
    """How ``flow merge`` went."""

    run_id: str
    branch: str
    #: The branch merged into (``HEAD`` when the main checkout is detached).
    into: str
    squash: bool
    #: The commit made by the merge, or None when there was nothing to merge.
    commit: str | None
    files: list[str] = field(default_factory=list)
    #: The commit made of changes left uncommitted in the worktree, before merging.
    leftover_commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``flow merge --json`` document."""
        return {
            "run_id": self.run_id,
            "branch": self.branch,
            "into": self.into,
            "squash": self.squash,
            "commit": self.commit,
            "files": list(self.files),
            "leftover_commit": self.leftover_commit,
        }


def _set_state(store: ProgressStore, run: Run, state: WorktreeState) -> None:
    assert run.worktree is not None
    run.worktree.state = state
    run.updated = now_iso()
    store.checkpoint(run)


def merge_run(progress_path: str | Path, *, squash: bool = False) -> MergeResult:
    """Merge the run's branch into the main checkout's current branch.

    Changes left uncommitted in the worktree are committed to the branch first. A conflict
    aborts the merge (the main checkout is as it was; worktree and branch stay) and raises
    ``MergeConflictError`` naming the files. The run is marked ``merged``.
    """
    path = progress_file(progress_path)
    _run_with_tree(path)  # a clear error before taking the lock
    store, run, _ = ProgressStore.open(path)
    try:
        tree = run.worktree
        assert tree is not None
        _refuse_discarded(tree, path)
        root = repository_root(path.resolve().parent)
        folder = checked_folder(tree, root, path)
        if made_worktree(tree, run.run_id, path) is None:
            raise not_made_here(tree, path, "flow merge brings in")
        if not branch_exists(root, tree.branch):
            raise GitError(
                f"the run's branch {tree.branch} no longer exists; there is nothing to merge.",
                path=path,
                field="$.worktree",
            )
        leftover = (
            commit_all(folder, f"flow run {run.run_id}: uncommitted changes at merge")
            if is_worktree_of(folder, root)
            else None
        )
        dirty = uncommitted_files(root)
        if dirty:
            raise GitError(
                f"the main checkout {root} has uncommitted changes to {_listed(dirty)}; merging "
                "into it could mix them with the run's changes.",
                path=root,
                hint="Commit or stash them first, then merge again.",
            )
        into = git(["symbolic-ref", "--short", "-q", "HEAD"], root, check=False).stdout.strip()
        into = into or "HEAD"
        before = head_commit(root)
        result = MergeResult(
            run_id=run.run_id,
            branch=tree.branch,
            into=into,
            squash=squash,
            commit=None,
            leftover_commit=leftover,
        )
        merged_already = git(
            ["merge-base", "--is-ancestor", tree.branch, "HEAD"], root, check=False
        )
        if merged_already.returncode != 0:
            if squash:
                _merge_squash(root, run.run_id, tree.branch, into, tree.path)
            else:
                _merge(root, run.run_id, tree.branch, into, tree.path)
            after = head_commit(root)
            if after != before:
                result.commit = after
                result.files = [
                    line
                    for line in git(
                        ["diff", "--name-only", before, after], root
                    ).stdout.splitlines()
                    if line
                ]
        _set_state(store, run, "merged")
        return result
    finally:
        store.close()


def _conflicted(root: Path) -> list[str]:
    text = git(["diff", "--name-only", "--diff-filter=U"], root, check=False).stdout
    return [line for line in text.splitlines() if line]


def _conflict_error(branch: str, into: str, files: list[str], tree_path: str) -> MergeConflictError:
    return MergeConflictError(
        f"merging {branch} into {into} conflicts in {len(files)} file(s): {_listed(files)}. "
        f"The merge was aborted: {into} and the main checkout are as they were, and the run's "
        "worktree and branch are kept.",
        files=files,
        hint=f"Either resolve it here (`git merge {branch}`, fix the files, commit), or in the "
        f"run's worktree (`git -C {tree_path} merge {into}`, fix, commit) and run flow merge "
        "again.",
    )


def _merge(root: Path, run_id: str, branch: str, into: str, tree_path: str) -> None:
    message = f"Merge run {run_id} ({branch})"
    done = git(
        [*_identity(root), "merge", "--no-ff", "--no-edit", "--no-verify", "-m", message, branch],
        root,
        check=False,
    )
    if done.returncode == 0:
        return
    files = _conflicted(root)
    git(["merge", "--abort"], root, check=False)
    if files:
        raise _conflict_error(branch, into, files, tree_path)
    raise GitError(
        f"`git merge {branch}` failed in {root}: {_last_lines(done.stderr or done.stdout)}"
    )


def _merge_squash(root: Path, run_id: str, branch: str, into: str, tree_path: str) -> None:
    # git wants an identity for a squash merge too (it records one for the merge state).
    done = git([*_identity(root), "merge", "--squash", branch], root, check=False)
    if done.returncode != 0:
        files = _conflicted(root)
        # A squash merge leaves no MERGE_HEAD to abort: put index and files back instead.
        git(["reset", "--merge"], root, check=False)
        if files:
            raise _conflict_error(branch, into, files, tree_path)
        raise GitError(
            f"`git merge --squash {branch}` failed in {root}: "
            f"{_last_lines(done.stderr or done.stdout)}"
        )
    if git(["diff", "--cached", "--quiet"], root, check=False).returncode == 0:
        return  # the branch's changes are already here: nothing to commit
    message = f"Run {run_id} (squashed from {branch})"
    git([*_identity(root), "commit", "--quiet", "--no-verify", "-m", message], root)


@dataclass(frozen=True)
class DiscardResult:
    """What ``flow discard`` removed: the run's worktree and its branch."""

    #: The run's progress file, which stays (marked discarded).
    path: Path
    worktree: str
    branch: str

    def to_dict(self) -> dict[str, Any]:
        """The ``flow discard --json`` document: ``path``, ``worktree``, ``branch``."""
        return {"path": str(self.path), "worktree": self.worktree, "branch": self.branch}


def discard_run(progress_path: str | Path) -> DiscardResult:
    """Remove the run's worktree (uncommitted changes with it) and its branch; mark it
    ``discarded``. The progress file stays, as the record of what the run did. Only a worktree
    and branch that flow on this machine made for this file are removed (``made_worktree``);
    any other is refused (GitError), nothing removed."""
    path = progress_file(progress_path)
    _run_with_tree(path)
    store, run, _ = ProgressStore.open(path)
    try:
        tree = run.worktree
        assert tree is not None
        if tree.state == "discarded":
            raise GitError(
                f"this run's worktree and branch {tree.branch} were discarded already.",
                path=path,
                field="$.worktree.state",
            )
        made = made_worktree(tree, run.run_id, path)
        if made is None:
            raise not_made_here(tree, path, "flow discard removes")
        remove_made(made)
        _set_state(store, run, "discarded")
        return DiscardResult(path=path, worktree=tree.path, branch=tree.branch)
    finally:
        store.close()


def worktree_summary(tree: WorktreeRef, progress_path: Path) -> dict[str, Any]:
    """The worktree as ``flow status --json`` and ``flow list --json`` show it."""
    try:
        root = repository_root(progress_path.resolve().parent)
        exists = is_worktree_of(checked_folder(tree, root, progress_path), root)
    except GitError:
        exists = False
    return {
        "path": tree.path,
        "branch": tree.branch,
        "base": tree.base,
        "state": tree.state,
        "exists": exists,
    }
