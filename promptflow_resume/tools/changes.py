"""``get_changed_files {}``: the workspace's uncommitted changes (``git status`` and diff).

Runs ``git`` read-only in the workspace root (no shell, ``GIT_OPTIONAL_LOCKS=0`` so that not
even the index is refreshed on disk) and returns the short status, then the diff of tracked
files against ``HEAD`` and the names of untracked files. Output is capped like a command's.
A workspace that is not a git repository, or a machine without git, gets a result saying so.
Idempotent.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..chat import ToolSpec
from .builtin import _object_schema, error_result
from .declared import run_process
from .tool import Standalone, ToolContext, ToolResult

MAX_CHANGES_CHARS = 60_000
GIT_TIMEOUT = 30.0


def _git(root: Path, *args: str) -> tuple[int, str]:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    }
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    outcome = run_process(["git", "--no-pager", *args], cwd=root, env=env, timeout=GIT_TIMEOUT)
    text = (outcome.stdout or outcome.stderr).decode("utf-8", errors="replace")
    return outcome.returncode, text


class GetChangedFiles(Standalone):
    """``get_changed_files {}``: git status and diff of the workspace."""

    idempotent = True
    #: Changes no file: no snapshot after its calls (docs/spec.md 12).
    read_only = True
    spec = ToolSpec(
        name="get_changed_files",
        description=(
            "Show the workspace's uncommitted changes: git status, the diff of changed "
            "files, and untracked files."
        ),
        parameters=_object_schema({}, []),
    )

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Status, diff and untracked files, or why there are none to show."""
        root = Path(ctx.workspace)
        try:
            code, inside = _git(root, "rev-parse", "--is-inside-work-tree")
        except OSError:
            return error_result("git is not installed, so changes cannot be shown")
        if code != 0 or inside.strip() != "true":
            return ToolResult("the workspace is not a git repository; no changes to show")
        _, status = _git(root, "status", "--short", "--untracked-files=all")
        if not status.strip():
            return ToolResult("no changes: the working tree matches the last commit")
        code, diff = _git(root, "diff", "HEAD", "--no-color", "--no-ext-diff")
        if code != 0:  # no commit yet: compare with the index
            _, diff = _git(root, "diff", "--no-color", "--no-ext-diff")
        text = f"git status --short:\n{status.rstrip()}"
        diff = diff.rstrip()
        if len(diff) > MAX_CHANGES_CHARS:
            # Cut at a line end, inside the fence, so the block still closes.
            cut = diff.rfind("\n", 0, MAX_CHANGES_CHARS)
            diff = diff[: cut if cut > 0 else MAX_CHANGES_CHARS]
            diff += "\n[... diff cut here; read the files for the rest ...]"
        if diff:
            longest = max((len(m) for m in re.findall(r"`+", diff)), default=0)
            fence = "`" * max(3, longest + 1)
            text += f"\n\n{fence}diff\n{diff}\n{fence}"
        return ToolResult(text)
