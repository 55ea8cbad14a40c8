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
from .frontmatter import validate_front_matter
from .hashing import digest
from .model import AgentSpec, InputDecl, Step
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
    if isinstance(shared.get("model"), list):
        shared["model"] = shared["model"][0]
    if isinstance(shared.get("tools"), str):
        # A Copilot agent written with Claude's habit: the same comma-separated names.
        shared["tools"] = [t.strip() for t in shared["tools"].split(",") if t.strip()]
    settings = build_config(shared, pos, col, bad)
    if "tools" not in shared:
        # An agent without `tools:` gets the host's defaults: every built-in (commands and
        # fetches still ask for consent), every command it declares, and the subagent tool
        # (offered only when another agent may be called).
        settings.tools = (*settings.commands, *BUILTIN_TOOLS, SUBAGENT_TOOL)
    return LoadedAgent(bad, settings, read_agent_keys(data, pos, col, claude=claude))


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
