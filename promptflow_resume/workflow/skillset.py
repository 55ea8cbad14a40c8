"""Which skills a run may load, and how the run records them (docs/spec.md 1.11).

Skills are found in this order; the first skill of a name wins and a later one of the same
name is reported as shadowed:

1. each ``--skills DIR`` (a folder of skill folders, or one skill's folder);
2. the workspace's ``.github/skills/``, ``.claude/skills/``, ``.agents/skills/``;
3. the user's ``~/.copilot/skills/``, ``~/.claude/skills/``, ``~/.agents/skills/``.

A run is told each offered skill's name, description and digest in its first (system) entry
(``skills_block``), and loads one with the ``load_skill`` tool, whose recorded result starts
with a line naming the skill and its digest (``loaded_line``). A resumed run compares both
with the skills found now (``changed_skills``)::

    found = find_skills(Path.cwd(), extra=[Path("my-skills")])
    text = skills_block(found.skills)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.confine import leads_inside
from .records import Diagnostic
from .skillfile import SKILL_FILE, Skill, load_skill

#: The workspace's skill folders, in the order they are searched.
WORKSPACE_FOLDERS = (".github/skills", ".claude/skills", ".agents/skills")
#: The user's skill folders under the home folder, in the order they are searched.
USER_FOLDERS = (".copilot/skills", ".claude/skills", ".agents/skills")
#: The built-in tool that loads a skill.
LOAD_TOOL = "load_skill"
HEADING = "## Skills"
_LISTED = re.compile(r"^- `(?P<name>[a-z0-9-]+)` \(sha256:(?P<hash>[0-9a-f]{16})\): ", re.M)
_LOADED = re.compile(r"\ASkill `(?P<name>[a-z0-9-]+)` \(sha256:(?P<hash>[0-9a-f]{16})\)")


@dataclass(frozen=True)
class FoundSkills:
    """The skills found, the problems of those that could not be used, the shadowed ones."""

    skills: tuple[Skill, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    #: ``SKILL.md`` paths of valid skills hidden by an earlier skill of the same name.
    shadowed: tuple[Path, ...] = field(default_factory=tuple)

    @property
    def offered(self) -> tuple[Skill, ...]:
        """The skills the model is told about (not ``disable-model-invocation``)."""
        return tuple(s for s in self.skills if s.model_invocable)

    def named(self, name: str) -> Skill | None:
        """The skill called ``name``, if found."""
        return next((s for s in self.skills if s.name == name), None)


def skill_roots(
    workspace: Path, extra: Sequence[Path] = (), *, home: Path | None = None
) -> list[tuple[Path, str]]:
    """The folders searched, with the source each stands for, in order."""
    roots = [(Path(p), "option") for p in extra]
    roots += [(workspace / rel, "workspace") for rel in WORKSPACE_FOLDERS]
    user_home = home if home is not None else _home()
    if user_home is not None:
        roots += [(user_home / rel, "user") for rel in USER_FOLDERS]
    return roots


def _home() -> Path | None:
    try:
        return Path.home()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return None


def skill_files(folder: Path) -> list[Path]:
    """The ``SKILL.md`` files a folder stands for: its own, else its subfolders'."""
    own = folder / SKILL_FILE
    if own.is_file():
        return [own]
    if not folder.is_dir():
        return []
    return [
        child / SKILL_FILE
        for child in sorted(folder.iterdir())
        if child.is_dir() and not child.name.startswith(".") and (child / SKILL_FILE).is_file()
    ]


def find_skills(
    workspace: Path, extra: Sequence[Path] = (), *, home: Path | None = None
) -> FoundSkills:
    """Every skill a run in ``workspace`` may use (see the module's docstring for the order)."""
    skills: dict[str, Skill] = {}
    diagnostics: list[Diagnostic] = []
    shadowed: list[Path] = []
    seen: set[Path] = set()
    for root, source in skill_roots(workspace.resolve(), extra, home=home):
        for path in skill_files(root):
            real = path.resolve()
            if real in seen:
                continue
            seen.add(real)
            if source == "workspace" and not leads_inside(workspace, path):
                diagnostics.append(
                    Diagnostic(
                        "error",
                        f"leads outside the workspace (to {real}); a skill a repository "
                        "brings is read only inside it, so it was skipped.",
                        str(path),
                        code="outside-workspace",
                    )
                )
                continue
            skill, problems = load_skill(path, source=source)
            diagnostics.extend(problems)
            if skill is None:
                continue
            if skill.name in skills:
                shadowed.append(skill.path)
                continue
            skills[skill.name] = skill
    return FoundSkills(tuple(skills.values()), tuple(diagnostics), tuple(shadowed))


def shown_path(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace when inside it, else absolute (``/``-separated)."""
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def skills_block(skills: Iterable[Skill]) -> str:
    """The text added to a run's system entry: each offered skill's name, digest and
    description, and how to load one (empty when none is offered)."""
    offered = [s for s in skills if s.model_invocable]
    if not offered:
        return ""
    lines = [
        HEADING,
        "",
        "Skills are folders of instructions, scripts and references for particular tasks. "
        f"When a task matches a skill's description, call `{LOAD_TOOL}` with the skill's name "
        "before you start, then follow its instructions.",
        "",
    ]
    lines += [f"- `{s.name}` (sha256:{s.digest}): {s.description}" for s in offered]
    return "\n".join(lines)


def loaded_line(skill: Skill, workspace: Path) -> str:
    """The first line of a ``load_skill`` result: the skill, its digest, its file."""
    return (
        f"Skill `{skill.name}` (sha256:{skill.digest}) from `{shown_path(skill.path, workspace)}`"
    )


def listed_skills(system_text: str) -> dict[str, str]:
    """Name → digest of the skills a run's system entry lists."""
    if HEADING not in system_text:
        return {}
    tail = system_text[system_text.index(HEADING) :]
    return {m.group("name"): m.group("hash") for m in _LISTED.finditer(tail)}


def loaded_skill(result_text: str) -> tuple[str, str] | None:
    """(name, digest) of a recorded ``load_skill`` result, or None for another text."""
    match = _LOADED.match(result_text)
    return (match.group("name"), match.group("hash")) if match else None


def changed_skills(recorded: dict[str, str], found: FoundSkills) -> list[str]:
    """What changed since the skills were recorded: ``name (changed|added|removed)``."""
    now = {s.name: s.digest for s in found.offered}
    changes = [f"{n} (changed)" for n in recorded if n in now and now[n] != recorded[n]]
    changes += [f"{n} (added)" for n in now if n not in recorded]
    changes += [f"{n} (removed)" for n in recorded if n not in now]
    return changes


def skill_notes(
    system_text: str | None, loads: Sequence[tuple[int, str]], found: FoundSkills
) -> list[str]:
    """What a resumed run is told about skills that changed since they were recorded: the
    list in its first entry (``system_text``) and each recorded load (entry id, result text).

    The recorded texts stay what the model saw; these notes say so instead of mixing an old
    and a new version silently.
    """
    notes: list[str] = []
    if system_text is not None:
        changes = changed_skills(listed_skills(system_text), found)
        if changes:
            notes.append(
                "skills changed since the run started: "
                + ", ".join(changes)
                + "; the run goes on with the list recorded in its first entry"
            )
    for entry_id, text in loads:
        recorded = loaded_skill(text)
        if recorded is None:
            continue
        name, digest = recorded
        now = found.named(name)
        if now is None:
            notes.append(
                f"skill `{name}` loaded in entry {entry_id} (sha256:{digest}) is gone now; "
                "the model keeps the recorded text, and loading it again fails"
            )
        elif now.digest != digest:
            notes.append(
                f"skill `{name}` loaded in entry {entry_id} (sha256:{digest}) changed since "
                f"(now sha256:{now.digest}); the model keeps the recorded text until it loads "
                "the skill again"
            )
    return notes


def skill_record(skill: Skill, workspace: Path) -> dict[str, Any]:
    """One skill as ``flow skills --json`` shows it (stable keys; docs/spec.md 1.11)."""
    return {
        "name": skill.name,
        "description": skill.description,
        "path": shown_path(skill.path, workspace),
        "source": skill.source,
        "hash": f"sha256:{skill.digest}",
        "files": list(skill.files),
        "model_invocable": skill.model_invocable,
        "user_invocable": skill.user_invocable,
        "license": skill.license,
        "compatibility": skill.compatibility,
        "allowed_tools": list(skill.allowed_tools),
    }


def found_record(
    found: FoundSkills, workspace: Path, extra: Sequence[Path] = (), *, home: Path | None = None
) -> dict[str, Any]:
    """The ``flow skills --json`` document: the folders searched, the skills, the problems."""
    return {
        "searched": [
            {"folder": str(root), "source": source, "exists": root.is_dir()}
            for root, source in skill_roots(workspace, extra, home=home)
        ],
        "skills": [skill_record(s, workspace) for s in found.skills],
        "shadowed": [shown_path(p, workspace) for p in found.shadowed],
        "problems": [{"path": d.path, **d.to_dict()} for d in found.diagnostics],
    }
