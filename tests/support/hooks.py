"""Workspaces with hooks for the hooks tests: the counter workflow (``bump`` is not
idempotent, ``peek`` is), its scripted replies, and a ``.github/hooks`` file written per test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from promptflow_resume.workflow.hookfiles import EVENTS
from tests import support
from tests.support.trust import trusted

HOOKS = support.FIXTURES / "hooks"
OWN = HOOKS / "own"
ENGINE = support.FIXTURES / "engine"

#: ``flow run`` of the counter workflow into ``run/progress.md``.
RUN = (
    "run",
    "counter.prompt.md",
    "--recording",
    "counter.script.yaml",
    "--progress",
    "run/progress.md",
    "--new",
)


def workspace(where: Path, hooks: dict[str, Any] | None = None, *, name: str = "test") -> Path:
    """A folder with the counter workflow and, when given, ``.github/hooks/NAME/hooks.json``
    holding ``{"version": 1, "hooks": hooks}``."""
    where.mkdir(parents=True, exist_ok=True)
    for file in ("counter.prompt.md", "counter.script.yaml"):
        shutil.copy(ENGINE / file, where / file)
    if hooks is not None:
        write_hooks(where / ".github" / "hooks" / name / "hooks.json", hooks)
    return where


def write_hooks(path: Path, hooks: dict[str, Any]) -> Path:
    """Write a version-1 hooks file; one in a workspace's ``.github/hooks/`` is trusted as
    written, as the person whose workspace it is would trust it (``flow trust``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "hooks": hooks}, indent=2), encoding="utf-8")
    for folder in path.parents:
        if folder.name == "hooks" and folder.parent.name == ".github":
            trusted(folder.parent.parent)
            break
    return path


def command(script: str, *args: str, **extra: Any) -> dict[str, Any]:
    """A command entry running one of ``own/``'s scripts by its absolute path."""
    line = " ".join([str(OWN / script), *args])
    return {"type": "command", "bash": line, **extra}


def log_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a hook appended to ``path`` (none when it does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def audit_all(log: Path) -> dict[str, Any]:
    """Every event flow runs, each audited by ``own/audit.py`` into ``log``."""
    return {e: [command("audit.py", e, env={"HOOK_LOG": str(log)})] for e in EVENTS}
