"""Real git repositories for the tests: a command runner and a stranger's repository cloned."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(where: Path, *args: str, stdin: str | None = None) -> str:
    """Run ``git ARGS`` in ``where`` with a fixed identity (``stdin`` on its input); its
    output (raises on failure)."""
    identity = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    return subprocess.run(
        ["git", *identity, *args],
        cwd=where,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def commit_all(where: Path, message: str = "files") -> None:
    """Stage and commit every file of the repository ``where`` (links included, as links)."""
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", message)


def stranger_clone(tmp_path: Path, files: dict[str, str | bytes]) -> tuple[Path, Path]:
    """A stranger's repository holding ``files`` (relative path -> text), committed, and a
    clone of it as a person gets one: (the stranger's repository, the clone)."""
    origin = tmp_path / "stranger"
    origin.mkdir()
    git(origin, "init", "-q")
    for rel, content in files.items():
        path = origin / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    commit_all(origin)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    return origin, clone
