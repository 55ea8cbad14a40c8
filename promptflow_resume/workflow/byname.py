"""What ``flow run NAME`` runs: a file, or an agent or a skill found by name.

A path that exists is that file. Otherwise a bare name (no folder, no ``.md``) is looked up
as ``flow agents`` lists agents (``--agents DIR``, the workspace's ``.github/agents`` and
``.claude/agents``, the user's folders; the agent's ``name:`` or file name, without case),
then as ``flow skills`` lists skills (``--skills DIR``, the workspace's and the user's skill
folders)::

    target("gem-planner", Path.cwd())        # Path(".github/agents/gem-planner.agent.md")
    target("pdf-tools", Path.cwd())          # Path(".github/skills/pdf-tools/SKILL.md")

A name found nowhere is a ``FileNotFoundFlowError`` (exit 5) that names the folders searched
and what they hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..base.errors import FileNotFoundFlowError
from .agentdirs import locate_agent, searched_text
from .skillset import find_skills, skill_roots


def looks_like_a_path(given: str) -> bool:
    """True when ``given`` names a file rather than an agent or a skill: it has a folder, or
    it ends with ``.md``."""
    return "/" in given or "\\" in given or given.lower().endswith(".md")


def target(
    given: str | Path,
    workspace: Path,
    agent_dirs: Sequence[Path] = (),
    skill_dirs: Sequence[str | Path] = (),
) -> Path:
    """The file ``flow run GIVEN`` runs (see the module's docstring)."""
    path = Path(given)
    text = str(given)
    if path.exists() or looks_like_a_path(text):
        return path
    agent = locate_agent(text, workspace, agent_dirs)
    if agent is not None:
        return agent
    skills = find_skills(workspace, [Path(d) for d in skill_dirs])
    wanted = text.strip().lower()
    skill = next((s for s in skills.skills if s.name.lower() == wanted), None)
    if skill is not None:
        return skill.path
    known = ", ".join(s.name for s in skills.skills) or "none"
    folders = ", ".join(str(f) for f, _ in skill_roots(workspace, [Path(d) for d in skill_dirs]))
    raise FileNotFoundFlowError(
        f"`{text}` is not a file, and no agent or skill has that name: agents "
        f"{searched_text(workspace, agent_dirs)}; skills searched {folders} (skills found: "
        f"{known}).",
        path=text,
        hint="Give the path of a *.prompt.md, *.agent.md or SKILL.md file, or one of the "
        "names `flow agents` and `flow skills` list (--agents DIR and --skills DIR search "
        "other folders).",
    )
