"""The workspace's custom instructions, included the way VS Code includes them.

Found under the workspace root, in this order:

- ``.github/copilot-instructions.md``;
- ``.github/instructions/**/*.instructions.md`` whose front matter ``applyTo`` (globs separated
  by commas) matches: ``**`` (or ``**/*``) always, any other glob when it matches the file
  named by ``--file``;
- ``AGENTS.md``.

They are added to the run's first (system) entry under one heading, each introduced by a line
naming the file and a short hash of its text, so the progress file says which were used, and a
resumed run can report that one changed since (``changed_instructions``)::

    found = find_instructions(Path.cwd(), file=None)
    text = instructions_block(found)
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..base import yamlio
from ..base.errors import FlowError, SpecialFileError
from ..base.globs import glob_regex
from ..base.safeopen import read_inside
from ..base.textnorm import normalize_newlines
from .source import split_source

HEADING = "## Custom instructions"
#: Largest instructions file read; a larger one is skipped.
MAX_INSTRUCTIONS_BYTES = 256 * 1024
_LINE = re.compile(
    r"^Instructions from `(?P<path>[^`]+)` \(sha256:(?P<hash>[0-9a-f]{16})\):$", re.M
)


@dataclass(frozen=True)
class Instruction:
    """One instructions file: its path relative to the workspace, its text, its short hash."""

    path: str
    text: str
    digest: str


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def applies(apply_to: str, file: str | None) -> bool:
    """True when an ``applyTo`` value covers the run: ``**`` always, a glob when ``file``
    (relative to the workspace) matches it."""
    globs = [g.strip().removeprefix("./") for g in _split_globs(apply_to) if g.strip()]
    if any(g in ("**", "**/*", "*") for g in globs):
        return True
    return file is not None and any(re.match(glob_regex(g) + r"\Z", file) for g in globs)


def _split_globs(value: str) -> list[str]:
    """Split on commas outside ``{...}``."""
    parts, depth, current = [], 0, ""
    for ch in value:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += (ch == "{") - (ch == "}")
        current += ch
    parts.append(current)
    return parts


def _read(root: Path, path: Path, problems: list[str]) -> str | None:
    """The text of an instructions file, or None (and a line in ``problems``) for one that is
    not a regular file inside the workspace, too large, or not UTF-8: a link to
    ``~/.aws/credentials`` or to ``.git/config`` is never sent to a model (docs/spec.md 10.9)."""
    try:
        data = read_inside(root, path, MAX_INSTRUCTIONS_BYTES, what="instructions file")
    except SpecialFileError as error:
        problems.append(str(error))
        return None
    except OSError as error:
        problems.append(f"{path}: cannot be read ({error.strerror}); skipped.")
        return None
    if data is None:
        return None
    if len(data) > MAX_INSTRUCTIONS_BYTES:
        problems.append(f"{path}: larger than {MAX_INSTRUCTIONS_BYTES:,} bytes; skipped.")
        return None
    try:
        return normalize_newlines(data.decode("utf-8")).strip()
    except UnicodeDecodeError as error:
        problems.append(f"{path}: not UTF-8 text (byte {error.start}); skipped.")
        return None


def _apply_to(text: str, where: str) -> tuple[str | None, str]:
    """The ``applyTo`` value of an instructions file and its body."""
    src = split_source(text, path=where)
    if src.front_matter_text is None:
        return None, text
    try:
        data = yamlio.load(src.front_matter_text, path=where)
    except FlowError:
        return None, src.body.strip()
    value = data.get("applyTo") if isinstance(data, dict) else None
    return (value if isinstance(value, str) else None), src.body.strip()


def find_instructions(
    workspace: Path, file: Path | None = None, problems: list[str] | None = None
) -> list[Instruction]:
    """The instructions that apply to a run in ``workspace`` (about ``file``, if given); a
    file that cannot be used is skipped with a line in ``problems``."""
    problems = [] if problems is None else problems
    root = workspace.resolve()
    rel_file: str | None = None
    if file is not None:
        try:
            rel_file = (root / file).resolve().relative_to(root).as_posix()
        except ValueError:
            rel_file = None
    found: list[Instruction] = []

    def add(path: Path, text: str) -> None:
        rel = path.relative_to(root).as_posix()
        if text:
            found.append(Instruction(rel, text, _digest(text)))

    main = root / ".github" / "copilot-instructions.md"
    if os.path.lexists(main) and (text := _read(root, main, problems)) is not None:
        add(main, text)
    folder = root / ".github" / "instructions"
    if folder.is_dir():
        for path in sorted(folder.rglob("*.instructions.md")):
            if not path.is_file() or path.is_symlink():
                continue
            text = _read(root, path, problems)
            if text is None:
                continue
            apply_to, body = _apply_to(text, str(path))
            if apply_to is not None and applies(apply_to, rel_file):
                add(path, body)
    agents = root / "AGENTS.md"
    if os.path.lexists(agents) and (text := _read(root, agents, problems)) is not None:
        add(agents, text)
    return found


def instructions_block(found: list[Instruction]) -> str:
    """The text added to the run's system entry (empty when there are none)."""
    if not found:
        return ""
    parts = [HEADING]
    for item in found:
        parts.append(f"Instructions from `{item.path}` (sha256:{item.digest}):\n\n{item.text}")
    return "\n\n".join(parts)


def recorded_instructions(system_text: str) -> dict[str, str]:
    """Path → short hash of the instructions recorded in a run's system entry."""
    return {m.group("path"): m.group("hash") for m in _LINE.finditer(system_text)}


def changed_instructions(recorded: dict[str, str], found: list[Instruction]) -> list[str]:
    """What changed since the instructions were recorded: ``path (changed|added|removed)``."""
    now = {i.path: i.digest for i in found}
    changes = [f"{p} (changed)" for p in recorded if p in now and now[p] != recorded[p]]
    changes += [f"{p} (added)" for p in now if p not in recorded]
    changes += [f"{p} (removed)" for p in recorded if p not in now]
    return changes
