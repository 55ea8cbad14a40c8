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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base.errors import FileNotFoundFlowError
from .agentdirs import (
    USER_FOLDERS,
    WORKSPACE_FOLDERS,
    agent_folders,
    locate_agent,
    searched_files,
    searched_text,
)
from .records import Diagnostic, Workflow

__all__ = [
    "USER_FOLDERS",
    "WORKSPACE_FOLDERS",
    "FoundAgent",
    "agent_folders",
    "agent_path",
    "find_agents",
]


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
    #: The file as read even when it has errors (``workflow`` is None then), for listing it.
    read: Workflow | None = None

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        """The diagnostics that are errors."""
        return tuple(d for d in self.diagnostics if d.severity == "error")

    def to_dict(self) -> dict[str, Any]:
        """The agent as ``flow agents --json`` prints it (docs/spec.md, "Custom agents")."""
        wf = self.read
        spec = wf.agent if wf is not None else None
        raw_model = wf.front_matter.get("model") if wf is not None else None
        models = [str(m) for m in raw_model] if isinstance(raw_model, list) else []
        if isinstance(raw_model, str):
            models = [raw_model]
        return {
            "name": self.name,
            "description": wf.description if wf is not None else None,
            "path": str(self.path),
            "source": self.source,
            "dialect": spec.dialect if spec is not None else None,
            "tools": list(wf.tools) if wf is not None else [],
            "tool_names": list(wf.tool_map) if wf is not None else [],
            "models": models,
            "provider": wf.provider if wf is not None else None,
            "model": wf.model if wf is not None else None,
            "user_invocable": spec.user_invocable if spec is not None else None,
            "model_invocable": spec.model_invocable if spec is not None else None,
            "argument_hint": spec.argument_hint if spec is not None else None,
            "handoffs": [
                {"label": h.label, "agent": h.agent, "send": h.send}
                for h in (spec.handoffs if spec is not None else ())
            ],
            "mcp_servers": sorted(spec.mcp_servers) if spec is not None else [],
            "shadows": [str(p) for p in self.shadows],
            "errors": len(self.errors),
            "warnings": len(self.diagnostics) - len(self.errors),
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }


def find_agents(workspace: Path, extra: Sequence[Path] = ()) -> list[FoundAgent]:
    """Every agent in the searched folders, the first of each name winning (it lists the
    later ones it hides in ``shadows``), in search order."""
    from .loader import check_workflow

    found: dict[str, FoundAgent] = {}
    escaped: list[Path] = []
    for path, source in searched_files(workspace, extra, escaped=escaped):
        workflow, diagnostics = check_workflow(path)
        name = workflow.name if workflow is not None else path.name
        key = name.lower()
        agent = FoundAgent(
            name,
            path,
            source,
            workflow if workflow and not workflow.errors else None,
            tuple(diagnostics),
            read=workflow,
        )
        if key in found:
            first = found[key]
            found[key] = replace(first, shadows=(*first.shadows, path))
        else:
            found[key] = agent
    for path in escaped:
        problem = Diagnostic(
            "error",
            f"leads outside the workspace (to {path.resolve()}); an agent a repository brings "
            "is read only inside it, so it was skipped.",
            str(path),
            code="outside-workspace",
        )
        skipped = FoundAgent(path.name, path, "workspace", None, (problem,))
        found.setdefault(f"{path.name} ({path})", skipped)
    return list(found.values())


def agent_path(name: str, workspace: Path, extra: Sequence[Path] = ()) -> Path:
    """The file of the agent called ``name``; ``FileNotFoundFlowError`` names the folders
    searched and the agents there when none is."""
    found = locate_agent(name, workspace, extra)
    if found is not None:
        return found
    raise FileNotFoundFlowError(
        f"no agent is called `{name}`; {searched_text(workspace, extra)}.",
        hint="Name an agent by its `name:` or file name, or add its folder with --agents DIR.",
    )
