"""A run's own git worktree: made for ``flow run --worktree``, found, attached, committed to.

A run started with ``--worktree`` gets a new branch ``flow/<run-id>`` made from the
repository's HEAD, checked out in a worktree at ``<repository>/.flow/worktrees/<run-id>``.
Its tools (edits, commands, searches) work there; its progress file stays in the main
checkout and records the worktree (``worktree:`` in the front matter). What the run changed is
reviewed, merged or discarded by ``worktree`` (the library's face: ``review_run``,
``merge_run``, ``discard_run``); this module is the git underneath::

    tree, folder = create_worktree(Path.cwd(), run_id)      # before the run starts
    folder, note = attach_worktree(tree, progress_path)     # on resume

The rules:

- The base must be clean: a change to a tracked file that is not committed would be missing
  from the worktree, so it is refused (files under ``.flow/`` do not count, and untracked files
  never do). ``/.flow/worktrees/`` is added to the repository's ``info/exclude`` so the
  worktrees never show up in ``git status`` of the main checkout.
- At the end of every completed step, everything the step changed in the worktree is committed
  to the run's branch (one commit per step, hooks not run). Changes of a step that was stopped
  stay uncommitted until the step completes on resume, or until ``flow merge`` commits them;
  ``flow review`` shows them either way.
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

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .base import madehere
from .base.confine import PathEscapeError, no_link_on_the_way, plain_relative
from .base.errors import FlowError, GitError, InputError
from .base.runids import valid_run_id
from .flowfolder import make_folder
from .progress.model import WorktreeRef

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
            f"`git {' '.join(args)}` failed in {cwd}: {last_lines(done.stderr or done.stdout)}"
        )
    return done


def last_lines(text: str, n: int = 3) -> str:
    """The last ``n`` lines of git's output, on one line: what an error message quotes."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[-n:]) or "no message"


def listed(paths: Sequence[str]) -> str:
    """``paths`` for an error message: the first few, then "and N more"."""
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


def identity_options(folder: Path) -> list[str]:
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
            f"file(s): {listed(dirty)}; the run's worktree starts from HEAD and would not see "
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
    git([*identity_options(folder), "commit", "--quiet", "--no-verify", "-m", message], folder)
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
