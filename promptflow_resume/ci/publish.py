"""What a ``flow ci`` job commits and where it pushes: the run's own files, redacted, to the
pull request's head branch of the same repository only (docs/spec.md 11.3).

- **What**: the progress file and its sidecar and child-run folders, regular files only (never
  the journal, lock or owner files, never anything else the job's workspace holds, whatever
  a hook or a command wrote there). The redactor passes over every byte before it is
  committed: a key that reached a file by any road is committed as ``[REDACTED:NAME]``.
- **Onto what**: the pull request's head commit, with a private index (``GIT_INDEX_FILE``),
  so the commit holds the head's tree plus the run's files whether or not the job checked the
  head out (a comment's job works in the base commit's checkout).
- **Where**: ``refs/heads/<head branch>`` of ``origin`` — never another branch a progress file
  names, never a fork's pull request (the file is then in the job's report and summary). A
  worktree run's own branch (``flow/<run-id>``, spec 9) is pushed beside it, no other.
- **With what**: the job's token, given to git for that one command through the environment
  (``GIT_CONFIG_*``), never written into ``.git/config`` where a hook or a model could read it.
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..base.redact import Redactor
from ..gitworktree import git

#: The identity of flow's commits in CI.
IDENTITY = {
    "GIT_AUTHOR_NAME": "flow",
    "GIT_AUTHOR_EMAIL": "flow@users.noreply.github.com",
    "GIT_COMMITTER_NAME": "flow",
    "GIT_COMMITTER_EMAIL": "flow@users.noreply.github.com",
}


def token_env(token: str | None) -> dict[str, str]:
    """Environment that makes one git command send the job's token to the remote (and keeps
    it out of ``.git/config`` and of the process list)."""
    if not token:
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraheader",
        "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
    }


def run_paths(path: Path) -> list[Path]:
    """Where a run's own files are: the progress file and its sidecar and child-run folders
    (never its journal, lock or owner files, which describe this machine's process)."""
    from ..sharing.files import sidecar_folder
    from ..sharing.share import steps_folder

    return [path, sidecar_folder(path), steps_folder(path)]


def run_files(path: Path) -> list[Path]:
    """The run's own files to commit (``run_paths`` that exist here)."""
    return [p for p in run_paths(path) if p == path or p.is_dir()]


def _regular_files(top: Path) -> Iterator[Path]:
    """``top`` and the regular files below it, links and special files left out."""
    if top.is_file() and not top.is_symlink():
        yield top
        return
    for folder, dirs, names in os.walk(top):  # never into a linked folder
        dirs.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                yield path


@dataclass
class Published:
    """What ``publish`` did."""

    commit: str | None = None
    pushed: list[str] = field(default_factory=list)
    #: Secrets replaced in what was committed (none is the expected count).
    redacted: int = 0
    notes: list[str] = field(default_factory=list)


def commit_run_files(
    workspace: Path, progress: Path, head: str, message: str, redactor: Redactor
) -> tuple[str | None, int]:
    """A commit on ``head`` that adds the run's files (redacted) and nothing else; None when
    they are as ``head`` has them. Returns the commit and how many secrets were replaced."""
    tops = run_files(progress)
    with tempfile.TemporaryDirectory(prefix="flow-ci-index-") as scratch:
        env = {**IDENTITY, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(["read-tree", head], workspace, env=env)
        names = [p.resolve().relative_to(workspace.resolve()).as_posix() for p in tops]
        # Files of the run's folders that are gone locally go from the commit too.
        gone = ["rm", "-r", "-q", "-f", "--cached", "--ignore-unmatch", "--", *names]
        git(gone, workspace, env=env)
        redacted = 0
        for top in tops:
            for path in _regular_files(top):
                data, count = redactor.redact_bytes(path.read_bytes())
                redacted += count
                blob = _hash_object(workspace, data)
                rel = path.resolve().relative_to(workspace.resolve()).as_posix()
                mode = "100755" if os.access(path, os.X_OK) else "100644"
                git(
                    ["update-index", "--add", "--cacheinfo", f"{mode},{blob},{rel}"],
                    workspace,
                    env=env,
                )
        tree = git(["write-tree"], workspace, env=env).stdout.strip()
    if tree == git(["rev-parse", f"{head}^{{tree}}"], workspace).stdout.strip():
        return None, redacted
    done = git(["commit-tree", tree, "-p", head, "-m", message], workspace, env=IDENTITY)
    return done.stdout.strip(), redacted


def _hash_object(workspace: Path, data: bytes) -> str:
    done = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=workspace,
        input=data,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode().strip()


def push(workspace: Path, refs: list[str], token: str | None) -> None:
    """Push ``refs`` (``SRC:DST``) to ``origin`` with the job's token."""
    if refs and git(["remote"], workspace).stdout.strip():
        git(["push", "--quiet", "origin", *refs], workspace, env=token_env(token))
