"""Finding custom agents by name: the folders the hosts read, in the order flow reads them.

A handoff (``agent: fixer``), a subagent call, a prompt file's ``agent: NAME`` and ``flow
agents`` all look agents up here. The folders, first match winning:

1. each ``--agents DIR``, in the order given;
2. the workspace's ``.github/agents/`` and ``.claude/agents/``;
3. the user's ``~/.copilot/agents/`` and ``~/.claude/agents/``.

A name is the agent's ``name:`` or its file name without ``.agent.md`` / ``.md``, compared
without case::

    found = find_agents(Path.cwd(), extra=(Path("my-agents"),))
    path = agent_path("reviewer", Path.cwd())
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import FileNotFoundFlowError
from .agentfile import AGENT_SUFFIX
from .model import Diagnostic, Workflow

#: Where a workspace keeps its agents, relative to its root.
WORKSPACE_FOLDERS: tuple[str, ...] = (".github/agents", ".claude/agents")
#: Where a user keeps agents for every workspace, relative to the home folder.
USER_FOLDERS: tuple[str, ...] = (".copilot/agents", ".claude/agents")


@dataclass(frozen=True)
class FoundAgent:
    """One agent file found: its name, where, from which kind of folder, and its loaded form
    (None when it has errors, which are in ``diagnostics``)."""

    name: str
    path: Path
    #: ``--agents``, ``workspace`` or ``user``.
    source: str
    workflow: Workflow | None
    diagnostics: tuple[Diagnostic, ...] = ()
    #: Paths of later agents with the same name, which this one hides.
    shadows: tuple[Path, ...] = field(default=())


def agent_folders(workspace: Path, extra: Sequence[Path] = ()) -> list[tuple[Path, str]]:
    """The folders searched, in order, each with its kind (those that do not exist too)."""
    folders = [(Path(d), "--agents") for d in extra]
    folders += [(workspace / f, "workspace") for f in WORKSPACE_FOLDERS]
    home = Path.home()
    folders += [(home / f, "user") for f in USER_FOLDERS]
    return folders


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    host_folder = folder.name == "agents" and folder.resolve().parent.name in (
        ".github",
        ".claude",
    )
    pattern = "*.md" if host_folder else f"*{AGENT_SUFFIX}"
    return sorted(p for p in folder.glob(pattern) if p.is_file())


def find_agents(workspace: Path, extra: Sequence[Path] = ()) -> list[FoundAgent]:
    """Every agent in the searched folders, the first of each name winning (it lists the
    later ones it hides in ``shadows``), in search order."""
    from .loader import check_workflow

    found: dict[str, FoundAgent] = {}
    for folder, source in agent_folders(workspace, extra):
        for path in _files(folder):
            workflow, diagnostics = check_workflow(path)
            name = workflow.name if workflow is not None else path.name
            key = name.lower()
            agent = FoundAgent(
                name,
                path,
                source,
                workflow if workflow and not workflow.errors else None,
                tuple(diagnostics),
            )
            if key in found:
                first = found[key]
                found[key] = FoundAgent(
                    first.name,
                    first.path,
                    first.source,
                    first.workflow,
                    first.diagnostics,
                    (*first.shadows, path),
                )
            else:
                found[key] = agent
    return list(found.values())


def agent_path(name: str, workspace: Path, extra: Sequence[Path] = ()) -> Path:
    """The file of the agent called ``name``; ``FileNotFoundFlowError`` names the folders
    searched and the agents there when none is."""
    wanted = name.strip().lower()
    agents = find_agents(workspace, extra)
    for agent in agents:
        if agent.name.lower() == wanted or agent_stem(agent.path) == wanted:
            return agent.path
    searched = ", ".join(str(f) for f, _ in agent_folders(workspace, extra))
    known = ", ".join(a.name for a in agents) or "none"
    raise FileNotFoundFlowError(
        f"no agent is called `{name}`; searched {searched} (agents found: {known}).",
        hint="Name an agent by its `name:` or file name, or add its folder with --agents DIR.",
    )


def agent_stem(path: Path) -> str:
    """An agent file's name without ``.agent.md`` / ``.md``, lower-cased (a name it goes by)."""
    base = path.name.lower()
    for suffix in (AGENT_SUFFIX, ".md"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base
