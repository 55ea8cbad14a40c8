"""File snapshots of a run: the working tree after each tool call that can change files.

In a git repository, after each such call (an edit, a command, an MCP tool not marked
read-only, a subagent or sub-workflow), the whole working tree is written as git objects: a
commit under the run's one ref ``refs/flow/<run-id>/snapshots``. The user's index, stash and
branches are never touched::

    repo = SnapshotRepo.find(workspace, run_id, progress_path)   # None outside git
    taken = repo.take(previous_commit, "entry 12")                # commit + what changed
    plan = repo.plan_restore(target_commit, latest_commit)        # what a rewind would do
    repo.restore(plan)                                            # the files put back

The rules:

- A private index (``<git dir>/flow/<run-id>/index``) holds what the last snapshot saw. It is
  seeded once from a copy of the user's index, so git's stat cache makes each snapshot
  incremental: ``git add -A`` rehashes only paths whose stat changed. Untracked files are
  included, ignored ones are not (``.gitignore`` as git reads it), and ``.flow/`` folders and
  the run's own progress file (with its journal, lock and sidecars) are left out.
- Each snapshot is a commit whose parent is the ref's previous tip, so one ref keeps every
  snapshot of the run alive (a rewound run's later snapshots too); what a call changed is
  counted against the snapshot before it in the progress file, not against the ref's tip.
- Restoring compares the working tree with the ref's tip first (the files as the run, or a
  restore of its files, last left them): a file that differs there was changed by someone
  else since, and is never overwritten or deleted without ``force``. A file the run never had
  (neither at the tip nor in the target snapshot) is left alone even with ``force``. A
  restore adds a commit of the restored tree to the chain, so the tip stays what flow left.
- Only what flow on this machine made is restored or removed (docs/spec.md 10.10): the ref is
  found through the record of ``base/madehere`` (made when the ref was first written for the
  run's progress file), a restored snapshot must be in the ref's chain, and a restore never
  writes, removes or creates below a symbolic link nor follows one when it clears the way
  (git's rule); a path no git checkout would write (``..``, ``.git``) refuses the snapshot.

The engine takes a run's snapshots through ``runsnapshots``; what a snapshot changed is read by
``snapshotchanges``, and a restore's checks and file moves are ``filerestore``'s.

Every git command runs as ``git`` with an argument list, never through a shell.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .base import madehere
from .base.confine import PathEscapeError, no_link_on_the_way
from .base.errors import (
    GitError,
    InputError,
)
from .base.runids import valid_run_id
from .filerestore import (
    RestorePlan,
    SnapshotMissingError,
    SnapshotsNotMadeHereError,
    check_plan,
    clear_way,
    remove_run_file,
)
from .progress.filesnapshots import Snapshots
from .progress.sidecar import stem_of
from .snapshotchanges import Changes, parse_diff

#: The prefix of every ref a run's snapshots are kept under.
REF_PREFIX = "refs/flow/"
#: Variables that would point git at another repository or index than the one asked for.
_GIT_LOCATION_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")
#: Snapshot commits carry a fixed identity: they are flow's records, not anyone's work.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "flow",
    "GIT_AUTHOR_EMAIL": "flow@localhost",
    "GIT_COMMITTER_NAME": "flow",
    "GIT_COMMITTER_EMAIL": "flow@localhost",
}


#: A full object id (SHA-1 or SHA-256), as snapshots are recorded.
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def snapshot_ref(run_id: str) -> str:
    """The ref of run ``run_id``'s snapshots: ``refs/flow/<run-id>/snapshots``."""
    return f"{REF_PREFIX}{run_id}/snapshots"


def _environment(extra: dict[str, str]) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARIABLES}
    environment.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **_IDENTITY, **extra})
    return environment


def _git(
    args: Sequence[str],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``git ARGS`` in ``cwd``; a failure (with ``check``) is a GitError quoting git."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            env=_environment(env or {}),
            check=False,
        )
    except FileNotFoundError as error:
        if not cwd.is_dir():
            raise GitError(f"the folder {cwd} does not exist.", path=cwd) from error
        raise GitError("git is not installed (no `git` program on the PATH).") from error
    if check and done.returncode != 0:
        message = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:]) or "no message"
        raise GitError(f"`git {' '.join(args[:3])}` failed in {cwd}: {message}")
    return done


@dataclass(frozen=True)
class Taken:
    """One snapshot: its commit and tree, and what changed since the one before."""

    commit: str
    tree: str
    changes: Changes


def _pathspec_glob(text: str) -> str:
    # Glob magic characters in a literal path would widen an exclusion.
    return "".join(f"[{c}]" if c in "*?[]\\" else c for c in text)


class SnapshotRepo:
    """The repository a run's snapshots are taken in, with the run's private index."""

    def __init__(
        self,
        root: Path,
        git_dir: Path,
        run_id: str,
        excludes: Sequence[str],
        *,
        common: Path | None = None,
        progress: Path | None = None,
    ) -> None:
        if not valid_run_id(run_id):
            # The id names a folder in the git folder and a ref: never a path of its own.
            raise InputError(
                f"the run id {run_id!r} is not one flow makes (lower case letters, digits and "
                "dashes), so it names no snapshots.",
                path=progress,
                field="$.run_id",
            )
        self.root = root
        self.run_id = run_id
        self.ref = snapshot_ref(run_id)
        self.git_dir = git_dir
        #: The repository's shared git folder (a worktree's own git folder is below it).
        self.common = common or git_dir
        #: The run's progress file: what the record of the ref is made for (None: no record).
        self.progress = progress
        self.index = git_dir / "flow" / run_id / "index"
        self._user_index = git_dir / "index"
        self._recorded = False
        self._pathspec = [".", ":(exclude,glob)**/.flow/**", *excludes]
        #: What any path the exclusions match holds (``_may_list``).
        self._needles = _excluded_names(root, progress)
        #: The tree of each commit seen, so an unchanged tree costs no extra git call.
        self._trees: dict[str, str] = {}
        #: The ref's tip as this process last set it (None: not looked up yet).
        self._tip: str | None = None
        #: The tree this process last wrote from the private index (None: none yet); the
        #: run's lock keeps any other process from changing that index meanwhile.
        self._index_tree: str | None = None

    @classmethod
    def find(cls, workspace: Path, run_id: str, progress: Path | None) -> SnapshotRepo | None:
        """The repository holding ``workspace``, or None outside git (or without git)."""
        try:
            done = _git(
                ["rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"],
                workspace,
                check=False,
            )
        except GitError:
            return None
        lines = done.stdout.splitlines()
        if done.returncode != 0 or len(lines) < 3:
            return None
        root, git_dir = Path(lines[0]).resolve(), Path(lines[1])
        common = (Path(workspace) / lines[2]).resolve()
        excludes = _progress_excludes(root, progress)
        return cls(root, git_dir, run_id, excludes, common=common, progress=progress)

    def made(self) -> madehere.Made | None:
        """This machine's record of the run's ref, when flow here made it in this repository
        for the run's progress file (None otherwise)."""
        if self.progress is None:
            return None
        found = madehere.find(
            "snapshots", name=self.ref, run_id=self.run_id, progress=self.progress
        )
        if found is None or (found.repository, found.root) != (str(self.common), str(self.root)):
            return None
        return found

    def note_made(self) -> None:
        """Record (once per process) that flow here made the run's ref, when it exists."""
        if not self._recorded and self.tip() is not None:
            self._record()

    def _record(self) -> None:
        """Note, once per process, that flow made (or wrote to) the run's ref here."""
        if self._recorded or self.progress is None:
            return
        madehere.record(
            madehere.Made(
                kind="snapshots",
                repository=str(self.common),
                name=self.ref,
                run_id=self.run_id,
                progress=madehere.real(self.progress),
                root=str(self.root),
                folder=madehere.real(self.index.parent),
            )
        )
        self._recorded = True

    def _env(self, index: Path | None = None) -> dict[str, str]:
        return {"GIT_INDEX_FILE": str(index or self.index)}

    def _seed(self) -> None:
        """The private index's first content: a copy of the user's index (its stat cache makes
        the first snapshot cheap), without the paths snapshots leave out."""
        self.index.parent.mkdir(parents=True, exist_ok=True)
        if self._user_index.is_file():
            shutil.copyfile(self._user_index, self.index)
            if _may_list(self.index, self._needles):
                _git(
                    ["rm", "--cached", "-r", "-q", "--ignore-unmatch", "--", *self._excluded()],
                    self.root,
                    env=self._env(),
                )

    def _excluded(self) -> list[str]:
        # The exclusions as positive pathspecs, for removing them from a seeded index.
        return [p.replace(":(exclude,", ":(", 1) for p in self._pathspec[1:]]

    def tree_now(self) -> str:
        """The working tree as a git tree (written as objects; no commit, no ref)."""
        if not self.index.exists():
            self._seed()
            self._index_tree = None
        # ``-v`` names each path whose entry changed (a refreshed stat alone is no change):
        # none, and the tree last written from this index is the tree now, no ``write-tree``
        # (about a fifth of a snapshot of 10,000 files where nothing changed).
        added = _git(["add", "-A", "-v", "--", *self._pathspec], self.root, env=self._env())
        if added.stdout or self._index_tree is None:
            self._index_tree = _git(["write-tree"], self.root, env=self._env()).stdout.strip()
        return self._index_tree

    def tree_of(self, commit: str) -> str:
        """The tree of ``commit`` (SnapshotMissingError when the repository lacks it)."""
        if commit not in self._trees:
            done = _git(
                ["rev-parse", "--verify", "-q", f"{commit}^{{tree}}"], self.root, check=False
            )
            if done.returncode != 0:
                raise SnapshotMissingError(
                    f"the snapshot {commit[:12]} is not in the repository at {self.root} (its "
                    f"ref {self.ref} was removed by `flow clean`, or this is another clone).",
                    hint="Rewind or fork without restoring files: --no-files.",
                )
            self._trees[commit] = done.stdout.strip()
        return self._trees[commit]

    def _look_up_trees(self, *commits: str) -> None:
        """The trees of ``commits`` in one git call (those not known yet); a commit the
        repository lacks is left to ``tree_of``, which says so."""
        wanted = [c for c in dict.fromkeys(commits) if c not in self._trees]
        if len(wanted) < 2 or not all(_OBJECT_ID.fullmatch(c) for c in wanted):
            return  # only object ids: never an option or a path to git
        done = _git(["rev-parse", *(f"{c}^{{tree}}" for c in wanted), "--"], self.root, check=False)
        trees = [line for line in done.stdout.split() if line != "--"]
        if done.returncode == 0 and len(trees) == len(wanted):
            self._trees.update(zip(wanted, trees, strict=True))

    def has(self, commit: str | None) -> bool:
        """Whether the repository holds ``commit`` (a snapshot of another clone is not)."""
        if commit is None:
            return False
        try:
            self.tree_of(commit)
        except SnapshotMissingError:
            return False
        return True

    def tip(self) -> str | None:
        """The commit the run's ref points at, if any."""
        done = _git(["rev-parse", "--verify", "-q", self.ref], self.root, check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    def take(self, previous: str | None, message: str) -> Taken:
        """Snapshot the working tree now; ``previous`` is the run's snapshot before (None:
        this is the run's base, whose changes are not listed). An unchanged tree makes no
        commit: ``previous`` is returned."""
        tree = self.tree_now()
        if previous is not None and self.tree_of(previous) == tree:
            return Taken(previous, tree, Changes())
        tip = self._tip or self.tip()
        parents = ["-p", tip] if tip else []
        commit = _git(
            ["commit-tree", tree, *parents, "-m", message], self.root, env=self._env()
        ).stdout.strip()
        update = ["update-ref", "-m", "flow snapshot", self.ref, commit]
        _git([*update, tip] if tip else [*update, ""], self.root)
        self._record()
        self._trees[commit] = tree
        self._tip = commit
        if previous is None:
            # A run's base: "what changed" would be every file of the repository.
            return Taken(commit, tree, Changes())
        return Taken(commit, tree, self.diff(self.tree_of(previous), tree))

    def diff(self, before: str, after: str) -> Changes:
        """What differs between two trees (or commits), renames found."""
        done = _git(["diff-tree", "-r", "-M", "--raw", "--numstat", "-z", before, after], self.root)
        return parse_diff(done.stdout)

    def _paths(self, before: str, after: str) -> dict[str, str]:
        """Path -> status letter (A, D, M, T) between two trees, renames as delete + add."""
        done = _git(
            ["diff-tree", "-r", "--no-renames", "--name-status", "-z", before, after], self.root
        )
        tokens = [t for t in done.stdout.split("\0") if t]
        return {tokens[i + 1]: tokens[i][:1] for i in range(0, len(tokens) - 1, 2)}

    def plan_restore(self, target: str, latest: str, *, force: bool = False) -> RestorePlan:
        """What restoring the working tree to snapshot ``target`` would do, ``latest`` being
        the run's last snapshot (the files as the run last left them)."""
        self._look_up_trees(target, latest)
        target_tree, latest_tree = self.tree_of(target), self.tree_of(latest)
        current = self.tree_now()
        by_others = self._paths(latest_tree, current)
        plan = RestorePlan(target=target, before=current)
        for path, status in sorted(self._paths(current, target_tree).items()):
            if path in by_others:
                if by_others[path] == "A" and status == "D":
                    plan.kept.append(path)  # neither snapshot has it: not the run's file
                    continue
                plan.conflicts.append(path)
                if not force:
                    continue
            (plan.delete if status == "D" else plan.write).append(path)
        check_plan(self.root, plan)
        return plan

    def in_chain(self, commit: str) -> bool:
        """Whether ``commit`` is one of the snapshots kept by the run's ref (its tip or an
        ancestor of it): a commit only a progress file names is not the run's."""
        tip = self._tip or self.tip()
        if tip is None:
            return False
        done = _git(["merge-base", "--is-ancestor", commit, tip], self.root, check=False)
        return done.returncode == 0

    def restore(self, plan: RestorePlan) -> None:
        """Put the files of ``plan`` back (the conflicts only if the plan was made with
        ``force``: then they are in ``write``/``delete`` too)."""
        if plan.before:
            # The files as they were, at the tip: a forced restore loses nothing either.
            self.mark(f"flow {self.run_id}: the files before a restore", plan.before)
        scratch = self.index.with_name("restore-index")
        scratch.parent.mkdir(parents=True, exist_ok=True)
        try:
            for path in plan.delete:
                remove_run_file(self.root, path)
            if plan.write:
                _git(["read-tree", self.tree_of(plan.target)], self.root, env=self._env(scratch))
                for path in plan.write:
                    clear_way(self.root, path)
                # git itself never writes through a link either: checkout-index replaces a
                # link where a file or folder goes, and refuses '..' and '.git' paths.
                _git(
                    ["checkout-index", "-f", "-z", "--stdin"],
                    self.root,
                    env=self._env(scratch),
                    stdin="".join(f"{p}\0" for p in plan.write),
                )
        finally:
            scratch.unlink(missing_ok=True)

    def mark(self, message: str, tree: str | None = None) -> None:
        """Record the working tree (or ``tree``) as a commit at the ref's tip, unless the tip
        holds it already: before a restore (so nothing it overwrites is lost) and after it
        (the next check for files changed by others compares with the restored tree)."""
        tree = tree or self.tree_now()
        tip = self._tip or self.tip()
        if tip is not None and self.tree_of(tip) == tree:
            return
        parents = ["-p", tip] if tip else []
        commit = _git(
            ["commit-tree", tree, *parents, "-m", message], self.root, env=self._env()
        ).stdout.strip()
        _git(["update-ref", "-m", "flow restore", self.ref, commit, tip or ""], self.root)
        self._record()
        self._trees[commit] = tree
        self._tip = commit

    def adopt(self, commit: str) -> None:
        """Point this run's ref at ``commit`` (a fork keeps its parent's snapshots alive)."""
        _git(["update-ref", "-m", "flow fork", self.ref, commit], self.root)
        self._record()
        self._tip = commit

    def remove(self) -> None:
        """Delete the run's ref and private index (``flow clean``), and this machine's record
        of them. Callers remove only what that record says flow made (``made_repo``)."""
        made = self.made()
        _git(["update-ref", "-d", self.ref], self.root, check=False)
        try:
            index = no_link_on_the_way(self.git_dir, f"flow/{self.run_id}")
        except PathEscapeError:
            index = None  # a link planted in the git folder: left, never followed
        if index is not None and not index.is_symlink() and index.is_dir():
            shutil.rmtree(index, ignore_errors=True)
        if made is not None:
            madehere.forget(made)


def remove_recorded(made: madehere.Made) -> None:
    """Delete the snapshot ref and private index this machine's record ``made`` names, and the
    record (``flow clean``): in the record's repository, even when the work tree the snapshots
    were of is gone (a worktree run's, removed with git)."""
    repository = Path(made.repository)
    if repository.is_dir():
        _git(["--git-dir", str(repository), "update-ref", "-d", made.name], repository, check=False)
    index = Path(made.folder)
    git_dir = index.parent.parent
    if index.name == made.run_id and index.parent.name == "flow" and valid_run_id(made.run_id):
        try:
            folder = no_link_on_the_way(git_dir, f"flow/{made.run_id}")
        except PathEscapeError:
            folder = None  # a link planted in the git folder: left, never followed
        if folder is not None and not folder.is_symlink() and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
    madehere.forget(made)


def made_repo(ref: str, run_id: str, progress: Path) -> SnapshotRepo | None:
    """The repository of run ``run_id``'s snapshot ref ``ref`` as this machine's record has
    it (docs/spec.md 10.10): found from the record, not from the progress file's
    ``snapshots.root``; None when flow on this machine made no such ref for ``progress``."""
    if not valid_run_id(run_id):
        return None
    found = madehere.find("snapshots", name=ref, run_id=run_id, progress=progress)
    if found is None or not os.path.isdir(found.root):
        return None
    repo = SnapshotRepo.find(Path(found.root), run_id, progress)
    if repo is None or repo.made() != found:
        return None
    return repo


def trusted_repo(record: Snapshots, run_id: str, progress: Path) -> SnapshotRepo:
    """The repository a restore or a review of run ``run_id`` may use: the one this machine's
    record names for the run's ref and ``progress``, which must be where the file's
    ``snapshots.root`` leads. ``SnapshotsNotMadeHereError`` (exit 19) otherwise."""
    repo = made_repo(record.ref, run_id, progress)
    named = root_of(record.root, progress)
    if repo is not None and madehere.real(named) == str(repo.root):
        return repo
    where = f"{record.ref} in {named}"
    raise SnapshotsNotMadeHereError(
        f"the file snapshots this progress file names ({where}) were not taken by flow on "
        f"this machine for run {run_id} with this file, so its files are not restored from "
        "them: a snapshot from elsewhere could change files of any repository. Nothing was "
        "changed.",
        path=progress,
        field="$.snapshots",
        hint="Pass --no-files to move the conversation only (a run resumed here takes its "
        "own snapshots from then on).",
    )


def _excluded_names(root: Path, progress: Path | None) -> list[bytes]:
    """Bytes that every path the snapshots leave out holds: ``.flow/``, and the progress
    file's name and sidecar folder when it lies in the repository outside ``.flow``."""
    needles = [b".flow/"]
    if _progress_excludes(root, progress):
        assert progress is not None
        needles += [os.fsencode(progress.name), os.fsencode(f"{stem_of(progress.name)}.files/")]
    return needles


def _may_list(index: Path, needles: Sequence[bytes]) -> bool:
    """Whether git index file ``index`` may list a path holding one of ``needles``: False only
    for an index of version 2 or 3 (whole paths, in the clear) without a split or sparse
    part (``link``, ``sdir``) that holds none of them. Removing such paths from a copied index
    takes a git call reading and writing every entry (about 15 ms at 10,000 files)."""
    try:
        data = index.read_bytes()
    except OSError:
        return True
    if data[:4] != b"DIRC" or data[4:8] not in (b"\0\0\0\2", b"\0\0\0\3"):
        return True
    return any(needle in data for needle in (b"link", b"sdir", *needles))


def _progress_excludes(root: Path, progress: Path | None) -> list[str]:
    """Pathspecs leaving out a progress file, its journal, lock, backups and sidecars, when it
    lies in the repository outside a ``.flow`` folder."""
    if progress is None:
        return []
    try:
        rel = progress.resolve().relative_to(root)
    except ValueError:
        return []
    if ".flow" in rel.parts:
        return []
    folder = rel.parent.as_posix()
    prefix = "" if folder == "." else _pathspec_glob(folder) + "/"
    name = _pathspec_glob(rel.name)
    return [
        f":(exclude,glob){prefix}{name}",
        f":(exclude,glob){prefix}{name}.*",
        f":(exclude,glob){prefix}.{name}.*",
        f":(exclude,glob){prefix}{_pathspec_glob(stem_of(rel.name))}.files/**",
    ]


def relative_root(root: Path, progress: Path) -> str:
    """``root`` as the progress file records it: relative to its folder when the two share a
    folder below the file system's root (a checkout and its ``.flow/worktrees/``), else
    absolute."""
    folder = progress.resolve().parent
    try:
        shared = Path(os.path.commonpath([root, folder]))
    except ValueError:  # different drives
        return root.as_posix()
    if shared == Path(shared.anchor):
        return root.as_posix()
    return Path(os.path.relpath(root, folder)).as_posix()


def root_of(recorded: str, progress: Path) -> Path:
    """The repository folder a progress file's ``snapshots.root`` names."""
    path = Path(recorded)
    return path if path.is_absolute() else (progress.resolve().parent / path).resolve()
