"""One Agent Skill: a folder holding ``SKILL.md`` (YAML front matter and a Markdown body) and
whatever files the skill brings (``scripts/``, ``references/``, ``assets/`` ...).

The front matter is checked against ``schemas/skill.schema.json``; on top of it the skill's
``name`` should equal its folder's name. Every problem is a ``Diagnostic`` with its line and
column, and loading goes on after one to find the others. A skill is refused only where VS
Code refuses it too (no front matter, no ``name`` or ``description``, a file that cannot be
read); the format's finer rules (the name's spelling and length, the folder's name, the
description's length, ``metadata`` values that are not text, ``allowed-tools`` as a list) are
warnings, as VS Code and Claude Code load such skills (``LENIENT``)::

    skill, diagnostics = load_skill(Path(".github/skills/pdf-tools/SKILL.md"))
    if skill is not None:
        skill.name, skill.digest, skill.files   # "pdf-tools", "3f2a…", ("scripts/fill.py",)

A skill's digest covers ``SKILL.md`` and every file in its folder, so a changed script is a
changed skill (docs/spec.md 1.11).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import SpecialFileError
from ..base.packagedata import read_text
from ..base.safeopen import read_regular
from ..base.textnorm import normalize_newlines
from .diagnostics import Collector
from .header import read_front_matter
from .records import Diagnostic
from .source import FrontMatterUnclosed, field_path, split_source

#: What a skill's name may be (the schema's ``pattern``; a test keeps the two equal).
NAME_PATTERN = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
#: The file that makes a folder a skill.
SKILL_FILE = "SKILL.md"
#: Largest ``SKILL.md`` read; a larger one is an error.
MAX_SKILL_BYTES = 256 * 1024
#: Files of a skill's folder listed and hashed; a folder with more is an error.
MAX_SKILL_FILES = 500
#: Largest file of a skill's folder hashed by content (a larger one counts by size only).
MAX_HASHED_BYTES = 8 * 1024 * 1024
#: Keys the skill format and the hosts define; any other is reported as a warning.
KNOWN_KEYS = (
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
    "disable-model-invocation",
    "user-invocable",
    "user-invokable",
    "argument-hint",
)


@dataclass(frozen=True)
class Skill:
    """A skill as a run sees it: what the model is told, where it lives, its digest."""

    name: str
    description: str
    #: The ``SKILL.md`` file and the folder holding it (both absolute).
    path: Path
    folder: Path
    #: The Markdown body of ``SKILL.md`` (what loading the skill returns).
    body: str
    #: Short sha256 (16 hex digits) of ``SKILL.md`` and every file of the folder.
    digest: str
    #: The other files of the folder, relative to it, ``/``-separated, sorted.
    files: tuple[str, ...]
    #: False with ``disable-model-invocation: true``: the model is not offered the skill.
    model_invocable: bool = True
    #: ``user-invocable`` (or ``user-invokable``): a person may run the skill directly.
    user_invocable: bool = True
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: tuple[str, ...] = ()
    #: ``argument-hint``: what a person running the skill directly should give as the task.
    argument_hint: str | None = None
    #: Where it was found: ``workspace``, ``user`` or ``option`` (``--skills DIR``).
    source: str = "workspace"


@functools.lru_cache(maxsize=1)
def skill_schema() -> dict[str, Any]:
    """``schemas/skill.schema.json``: the front matter of ``SKILL.md``."""
    data: dict[str, Any] = json.loads(read_text("schemas/skill.schema.json"))
    return data


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    # jsonschema is imported when a skill is first read: `flow --help` never needs it.
    from jsonschema import Draft202012Validator

    return Draft202012Validator(skill_schema())


def load_skill(
    path: Path, *, source: str = "workspace"
) -> tuple[Skill | None, tuple[Diagnostic, ...]]:
    """The skill whose ``SKILL.md`` is ``path``, and every problem found (None with errors)."""
    col = Collector(str(path))
    text = _read(path, col)
    if text is None:
        return None, col.sorted()
    try:
        src = split_source(text, path=str(path))
    except FrontMatterUnclosed:
        col.error(
            "the front matter opened by `---` on line 1 is never closed; add a `---` line "
            "after it.",
            line=1,
            column=1,
            code="skill",
        )
        return None, col.sorted()
    if src.front_matter_text is None:
        col.error(
            "a SKILL.md starts with front matter between `---` lines that gives the skill's "
            "`name` and `description`.",
            line=1,
            column=1,
            code="skill",
        )
        return None, col.sorted()
    parsed = read_front_matter(src, col)
    if parsed is None:
        return None, col.sorted()
    data, positions = parsed
    _check_schema(data, positions, col)
    folder = path.resolve().parent
    name = data.get("name")
    # An invalid name has its own warning; that it differs from the folder's would be noise.
    if isinstance(name, str) and NAME_PATTERN.fullmatch(name) and name != folder.name:
        line, column = positions.value(("name",))
        col.warning(
            f"the skill's name `{name}` differs from its folder's name `{folder.name}`; "
            "rename one of them so they are equal (the skill is offered as "
            f"`{name}`).",
            line=line,
            column=column,
            field="$.name",
            code="skill-format",
        )
    for key in data:
        if key not in KNOWN_KEYS:
            line, column = positions.key((key,))
            col.warning(
                f"the key `{key}` is not part of the skill format; flow ignores it.",
                line=line,
                column=column,
                field=field_path((key,)),
                code="skill-unknown-key",
            )
    files = _folder_files(folder, col)
    if col.has_errors or files is None:
        return None, col.sorted()
    return _skill(data, path.resolve(), folder, src.body, text, files, source), col.sorted()


def _read(path: Path, col: Collector) -> str | None:
    try:
        data = read_regular(path, MAX_SKILL_BYTES, what="skill file", follow=True)
    except (OSError, SpecialFileError) as error:
        col.error(f"cannot read the skill file: {error}", code="skill")
        return None
    if data is None:
        col.error("there is no such file.", code="not-found")
        return None
    if len(data) > MAX_SKILL_BYTES:
        col.error(
            f"the skill file is larger than {MAX_SKILL_BYTES // 1024} KiB; keep SKILL.md "
            "short and move details to files beside it.",
            code="skill",
        )
        return None
    try:
        return normalize_newlines(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        col.error(f"the skill file is not UTF-8 text (byte {error.start}).", code="skill")
        return None


_MESSAGES = {
    ("name", "pattern"): "`name` may hold only lowercase letters, digits and hyphens, with no "
    "hyphen at the start, at the end or twice in a row (e.g. `pdf-tools`)",
    ("name", "maxLength"): "`name` is longer than 64 characters; shorten it",
    ("name", "minLength"): "`name` is empty; give the skill a name",
    ("description", "maxLength"): "`description` is longer than 1,024 characters; shorten it "
    "(details belong in the body)",
    ("description", "minLength"): "`description` is empty; say what the skill does and when "
    "to use it",
    ("compatibility", "maxLength"): "`compatibility` is longer than 500 characters; shorten it",
}


def _check_schema(data: dict[str, Any], positions: Any, col: Collector) -> None:
    """Each schema error as a positioned diagnostic with a message a person can act on."""
    schema = skill_schema()
    validator = _validator()
    for missing in (key for key in schema["required"] if key not in data):
        col.error(
            f"a skill needs `{missing}`: "
            + (
                "its name, equal to its folder's name."
                if missing == "name"
                else "what it does and when to use it (what the model is told)."
            ),
            line=positions.value(())[0] or 1,
            column=1,
            field=f"$.{missing}",
            code="skill",
        )
    for error in sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.path]):
        where = tuple(error.path)
        if error.validator == "required":
            continue  # reported above, one diagnostic per missing key
        key = str(where[0]) if where else ""
        message = _MESSAGES.get((key, str(error.validator)))
        if message is None:
            message = str(error.message)
        if str(error.validator) == "maxLength" and isinstance(error.instance, str):
            message += f" (it has {len(error.instance):,} characters)"
        line, column = positions.value(where)
        if _lenient(key, str(error.validator)):
            col.warning(
                message + f"; {_LENIENT_EFFECT.get(key, 'the skill loads as it is')}.",
                line=line,
                column=column,
                field=field_path(where),
                code="skill-format",
            )
            continue
        col.error(message + ".", line=line, column=column, field=field_path(where), code="skill")


#: Rules of the skill format that VS Code and Claude Code do not enforce: a skill breaking
#: one loads (with a warning), as it does there. (key, JSON Schema keyword); "*" any keyword.
LENIENT = frozenset(
    {
        ("name", "pattern"),
        ("name", "maxLength"),
        ("description", "maxLength"),
        ("compatibility", "maxLength"),
        ("compatibility", "minLength"),
        ("compatibility", "type"),
        ("license", "type"),
        ("metadata", "*"),
        ("allowed-tools", "*"),
        ("disable-model-invocation", "type"),
        ("user-invocable", "type"),
        ("user-invokable", "type"),
        ("argument-hint", "type"),
    }
)
#: What a lenient rule's breach means for the skill, said after its message.
_LENIENT_EFFECT = {
    "metadata": "flow does not read `metadata`, and the skill loads",
    "disable-model-invocation": "the key is ignored (the default, false, holds)",
    "user-invocable": "the key is ignored (the default, true, holds)",
    "user-invokable": "the key is ignored (the default, true, holds)",
    "license": "the key is ignored",
    "argument-hint": "the key is ignored",
    "compatibility": "the key is ignored",
    "allowed-tools": "the key is ignored",
}


def _lenient(key: str, keyword: str) -> bool:
    return (key, keyword) in LENIENT or (key, "*") in LENIENT


def _folder_files(folder: Path, col: Collector) -> list[tuple[str, Path]] | None:
    """The folder's other files (relative name, path), sorted; links and hidden folders
    are left out, so a skill's files are the ones in it."""
    found: list[tuple[str, Path]] = []
    for current, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(names):
            path = Path(current) / name
            rel = path.relative_to(folder).as_posix()
            if rel == SKILL_FILE or path.is_symlink() or not path.is_file():
                continue
            found.append((rel, path))
            if len(found) > MAX_SKILL_FILES:
                col.error(
                    f"the skill's folder holds more than {MAX_SKILL_FILES} files; a skill is "
                    "a small folder (instructions, scripts, references).",
                    code="skill",
                )
                return None
    return sorted(found)


def _digest(text: str, files: list[tuple[str, Path]]) -> str:
    """sha256 of ``SKILL.md`` and of each file's name and content (size for a huge one)."""
    outer = hashlib.sha256()
    outer.update(b"SKILL.md\0" + text.encode("utf-8") + b"\0")
    for rel, path in files:
        inner = hashlib.sha256()
        try:
            size = path.stat().st_size
            if size <= MAX_HASHED_BYTES:
                inner.update(path.read_bytes())
            else:
                inner.update(f"size:{size}".encode())
        except OSError:
            inner.update(b"unreadable")
        outer.update(rel.encode("utf-8") + b"\0" + inner.hexdigest().encode() + b"\0")
    return outer.hexdigest()[:16]


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def allowed_tools(value: Any) -> tuple[str, ...]:
    """``allowed-tools`` as its tool names: a list (Claude Code's YAML list), a text separated
    by commas (``Read, Grep, Bash(git diff:*)``, Claude Code's) or by spaces (the skill
    format's); anything else names none."""
    if isinstance(value, list):
        items = [str(v).strip() for v in value if isinstance(v, str | int | float)]
    elif isinstance(value, str):
        items = value.split(",") if "," in value else value.split()
    else:
        return ()
    return tuple(i.strip() for i in items if i.strip())


def _skill(
    data: dict[str, Any],
    path: Path,
    folder: Path,
    body: str,
    text: str,
    files: list[tuple[str, Path]],
    source: str,
) -> Skill:
    user = data.get("user-invocable", data.get("user-invokable", True))
    return Skill(
        name=str(data["name"]).strip(),
        description=" ".join(str(data["description"]).split()),
        path=path,
        folder=folder,
        body=body.strip(),
        digest=_digest(text, files),
        files=tuple(rel for rel, _ in files),
        model_invocable=data.get("disable-model-invocation") is not True,
        user_invocable=user is not False,
        license=data.get("license") if isinstance(data.get("license"), str) else None,
        compatibility=_text(data.get("compatibility")),
        allowed_tools=allowed_tools(data.get("allowed-tools")),
        argument_hint=hint.strip() or None
        if isinstance(hint := data.get("argument-hint"), str)
        else None,
        source=source,
    )
