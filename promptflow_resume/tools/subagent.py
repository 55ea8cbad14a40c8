"""The subagent tool: a custom agent calls another agent by name with a task.

An agent whose ``tools:`` name ``agent`` / ``runSubagent`` (Claude: ``Task``, ``Agent``), or
that lists ``agents:``, is offered ``run_agent {agent, task}``. Which agents it may call is
decided here, from this machine's agent folders (``workflow.agentfind``), when the run starts
or resumes; a progress file never adds one (docs/spec.md 4.14 and 10)::

    offer = subagent_offer(workflow, workspace, extra=(Path("my-agents"),))
    tool = SubagentTool(offer) if offer else None

The engine runs a call as a child run (``subworkflows.SubworkflowRunner.run_agent``); the
tool's own ``run`` only answers a caller that has no child runner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..chat import ToolSpec
from ..workflow.agentdirs import beside, file_stem
from ..workflow.agentfind import find_agents
from ..workflow.records import Workflow
from ..workflow.toolnames import SUBAGENT_TOOL
from .builtin import _object_schema, error_result, signature, validate_arguments
from .tool import ToolContext, ToolResult


@dataclass(frozen=True)
class OfferedAgent:
    """One agent the subagent tool may run: its name, what it does, and its file."""

    name: str
    description: str
    path: Path
    #: The agent file's hash (``Workflow.hash``): a later attempt tells a changed file.
    hash: str = ""


def subagent_offer(
    workflow: Workflow, workspace: Path, extra: Sequence[Path] = ()
) -> tuple[OfferedAgent, ...]:
    """The agents ``workflow`` may call, in search order: those its ``agents:`` allows (every
    agent found when it has none, or for a prompt file), without itself, without agents that
    have errors, and without those marked ``disable-model-invocation: true``."""
    allowed = workflow.agent.agents if workflow.agent is not None else None
    wanted = {a.strip().lower() for a in allowed} if allowed is not None else None
    own = workflow.path.resolve()
    offer: list[OfferedAgent] = []
    for found in find_agents(workspace, beside(workflow, extra)):
        agent = found.workflow
        if agent is None or agent.agent is None or not agent.agent.model_invocable:
            continue
        if found.path.resolve() == own:
            continue
        if wanted is not None and not {found.name.lower(), file_stem(found.path)} & wanted:
            continue
        offer.append(OfferedAgent(found.name, agent.description or "", found.path, agent.hash))
    return tuple(offer)


def wants_subagents(workflow: Workflow, offered: Sequence[str]) -> bool:
    """Whether a run of ``workflow`` gets the subagent tool: its tools name it, or it is an
    agent whose ``agents:`` lists at least one name."""
    if SUBAGENT_TOOL in offered:
        return True
    return workflow.agent is not None and bool(workflow.agent.agents)


class SubagentTool:
    """``run_agent {agent, task}``: run one of the offered agents on a task; the result is
    its final answer."""

    #: A call in flight at a crash runs again by resuming its child run where it stopped, so
    #: nothing the child completed is done twice (docs/spec.md 4.14).
    idempotent = True

    def __init__(self, agents: Sequence[OfferedAgent]) -> None:
        self.agents = tuple(agents)
        listed = "\n".join(
            f"- {a.name}: {' '.join(a.description.split()) or '(no description)'}"
            for a in self.agents
        )
        self.spec = ToolSpec(
            name=SUBAGENT_TOOL,
            description=(
                "Run another agent on a task, as a subagent with its own instructions and "
                "tools, and get its final answer. Give it everything it needs in `task`: it "
                f"does not see this conversation. The agents you may run:\n{listed}"
            ),
            parameters=_object_schema(
                {
                    "agent": {
                        "type": "string",
                        "enum": [a.name for a in self.agents],
                        "description": "the agent to run",
                    },
                    "task": {
                        "type": "string",
                        "minLength": 1,
                        "description": "what the agent should do, with all it needs to know",
                    },
                },
                ["agent", "task"],
            ),
        )

    def agent(self, name: Any) -> OfferedAgent | None:
        """The offered agent called ``name`` (compared without case), or None."""
        if not isinstance(name, str):
            return None
        wanted = name.strip().lower()
        return next((a for a in self.agents if a.name.lower() == wanted), None)

    def check(self, arguments: dict[str, Any]) -> ToolResult | OfferedAgent:
        """The agent a call runs, or the error result the model gets for a bad call (an
        agent that is not offered is one)."""
        agent = self.agent(arguments.get("agent"))
        if agent is None and isinstance(arguments.get("agent"), str):
            names = ", ".join(a.name for a in self.agents) or "none"
            return error_result(
                f"the agent {arguments['agent']!r} may not be run from here; agents you may "
                f"run: {names}."
            )
        problem = validate_arguments(self.spec.parameters, arguments)
        if problem is not None or agent is None:
            return error_result(f"{problem}. Expected: {signature(self.spec)}.")
        return agent

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Only a run with a child runner runs agents: anywhere else the call is refused."""
        return error_result("subagents run only inside `flow run` / `flow resume`.")


def offer_changes(before: dict[str, str], now: dict[str, str]) -> str | None:
    """One line on how the agents offered changed since an earlier attempt, or None."""
    parts = []
    added = [n for n in now if n not in before]
    removed = [n for n in before if n not in now]
    changed = [n for n in now if n in before and before[n] != now[n]]
    for label, names in (("added", added), ("removed", removed), ("changed", changed)):
        if names:
            parts.append(f"{label} {', '.join(names)}")
    if not parts:
        return None
    return (
        "the agents the subagent tool offers changed since the last attempt (this machine's "
        f"agent folders decide): {'; '.join(parts)}."
    )
