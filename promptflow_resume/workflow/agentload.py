"""An agent file as a workflow: its keys checked and translated, its task as the one step.

The loader (``workflow.loader``) calls ``read_agent`` instead of the prompt-file builders when
``agentfile.is_agent_file`` says the path is an agent; everything after that (variables,
hashes, the ``Workflow`` record) is shared, so an agent runs, resumes and shows like any
workflow::

    loaded = read_agent(data, positions, col, path)
    step = task_step(loaded, line=body_line)     # sends ${input:task}
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .agentfile import (
    KNOWN_AGENT_KEYS,
    TASK_INPUT,
    claude_to_copilot,
    is_claude_agent,
    read_agent_keys,
)
from .config import WorkflowSettings, build_config
from .diagnostics import Collector
from .hashing import digest
from .header import validate_front_matter
from .records import AgentSpec, InputDecl, Step, Workflow
from .source import YamlPositions
from .toolnames import BUILTIN_TOOLS, SUBAGENT_TOOL

#: The id of an agent's one step (the task).
TASK_STEP_ID = "task"


@dataclass(frozen=True)
class LoadedAgent:
    """An agent file's front matter, checked: the keys that failed the schema, the settings
    it shares with prompt files, and what only agents say."""

    bad: set[str]
    settings: WorkflowSettings
    spec: AgentSpec


def read_agent(data: dict[str, Any], pos: YamlPositions, col: Collector, path: Path) -> LoadedAgent:
    """Check an agent's front matter against ``schemas/agent.schema.json`` and build its
    settings (a Claude agent's keys are read in Claude's dialect first)."""
    bad = (
        validate_front_matter(data, pos, col, kind="agent", known=KNOWN_AGENT_KEYS)
        if data
        else set()
    )
    claude = is_claude_agent(path)
    shared = claude_to_copilot(data, pos, col) if claude else dict(data)
    if isinstance(shared.get("tools"), str):
        # A Copilot agent written with Claude's habit: the same comma-separated names.
        shared["tools"] = [t.strip() for t in shared["tools"].split(",") if t.strip()]
    settings = build_config(shared, pos, col, bad)
    spec = read_agent_keys(data, pos, col, claude=claude)
    if "tools" not in shared:
        # An agent without `tools:` gets the host's defaults: every built-in (commands and
        # fetches still ask for consent), every command it declares, the tools of the MCP
        # servers it defines, and the subagent tool (offered only when another agent may be
        # called).
        settings.tools = (*settings.commands, *BUILTIN_TOOLS, SUBAGENT_TOOL)
        settings.tool_map.update(dict.fromkeys(server_tool_names(spec.mcp_servers), ()))
    return LoadedAgent(bad, settings, spec)


def server_tool_names(servers: dict[str, Any]) -> list[str]:
    """The tool names an agent's ``mcp-servers:`` offer: ``NAME/TOOL`` for each tool a
    server's ``tools:`` lists, ``NAME/*`` for every tool (``tools: ["*"]``, or none listed)."""
    names: list[str] = []
    for name, spec in servers.items():
        listed = spec.get("tools") if isinstance(spec, dict) else None
        if not isinstance(listed, list) or "*" in listed:
            names.append(f"{name}/*")
        else:
            names.extend(f"{name}/{tool}" for tool in listed if isinstance(tool, str))
    return names


def task_step(agent: LoadedAgent, line: int) -> Step:
    """The agent's one step: the task, sent as the user message."""
    template = f"${{input:{TASK_INPUT}}}"
    return Step(
        id=TASK_STEP_ID,
        title="Task",
        index=1,
        kind="prompt",
        body=template,
        hash=digest(template),
        line=line,
    )


def task_input(agent: LoadedAgent) -> InputDecl:
    """The input ``task``: required, described by the agent's ``argument-hint``."""
    hint = agent.spec.argument_hint
    return InputDecl(
        name=TASK_INPUT,
        type="string",
        description=hint or "what the agent should do",
        required=True,
    )


def use_agent(cfg: WorkflowSettings, agent: Workflow, data: dict[str, Any]) -> None:
    """A prompt file's settings with ``agent: NAME``: the agent's tools unless the file lists
    ``tools:`` (the file's win, as in VS Code), its model unless the file names one, and its
    commands beside the file's own (the file's win on a name clash); the calls either's
    ``approve:`` names wait for a person."""
    cfg.commands = {**agent.commands, **cfg.commands}
    cfg.approve = tuple(dict.fromkeys((*cfg.approve, *agent.approve)))
    if not cfg.tools_listed:
        own = tuple(t for t in cfg.tools if t not in agent.tools)
        cfg.tools = (*agent.tools, *own)
        cfg.tool_map = {**agent.tool_map, **cfg.tool_map}
    if "model" in data:
        return
    # A model id belongs to its provider: the agent's model goes with the agent's provider,
    # or with the file's own provider when the agent names none or the same one.
    if "provider" not in data:
        cfg.provider, cfg.model, cfg.models = agent.provider, agent.model, agent.models
        cfg.model_refs, cfg.provider_named = agent.model_refs, agent.provider_named
    elif agent.provider in (None, cfg.provider):
        cfg.model, cfg.models, cfg.model_refs = agent.model, agent.models, agent.model_refs
