"""Handoff chains: a custom agent's ``handoffs:`` followed without a person (docs/spec.md 4.13).

In the editor a handoff is a button under the agent's answer: it switches to the next agent and
sends the handoff's prompt. ``flow run AGENT --handoff LABEL`` (repeatable, in order) or
``--handoffs auto`` (each ``send: true`` handoff, at most ``--max-handoffs``) follows them in one
run. The chain is resolved when the run starts and composed into one workflow: the agent's own
step (the task), then one step per handoff, each carrying its agent's instructions, tools and
model. The progress file records the chain (``workflow.handoffs``: the labels and the agent
files), so a resume composes the same steps from the same files, and a changed agent file is a
changed step::

    links = resolve_chain(first, Follow(labels=("Review",)), workspace, agent_dirs=())
    workflow = compose(first, links)
    run.workflow.handoffs = chain_record(Follow(labels=("Review",)), links, workflow, folder)
    again = recompose(first, run.workflow.handoffs, folder)     # on resume: the same steps
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..base.errors import FileNotFoundFlowError, InputError, WorkflowError
from ..base.paths import display_path, rebase, relative_path
from ..chat import Message
from ..progress.model import HandoffChain, HandoffPart, Run
from ..workflow.hashing import digest
from ..workflow.records import Handoff, Step, Workflow

#: ``--max-handoffs`` when not given: how many ``send: true`` handoffs ``auto`` follows.
DEFAULT_MAX_HANDOFFS = 5
#: The user message of a handoff whose ``prompt`` is empty: the conversation is the context.
EMPTY_PROMPT = "Continue from the conversation above."
#: The id of a part's step: ``handoff-<n>-<slug of the label>``.
STEP_PREFIX = "handoff"


@dataclass(frozen=True)
class Follow:
    """Which handoffs a run follows: ``labels`` in order, or ``auto`` up to ``max``."""

    labels: tuple[str, ...] = ()
    auto: bool = False
    max: int = DEFAULT_MAX_HANDOFFS
    #: ``--model``: wins over every part's own model (recorded with the chain).
    model: str | None = None

    @property
    def wanted(self) -> bool:
        """Whether any handoff is to be followed."""
        return bool(self.labels) or self.auto


@dataclass(frozen=True)
class Link:
    """One handoff followed: its entry in the previous agent, the next agent and its file."""

    handoff: Handoff
    agent: Workflow
    path: Path


@dataclass(frozen=True)
class Chain:
    """A chain resolved for a new run: what was asked and the handoffs found."""

    follow: Follow
    links: tuple[Link, ...]


def chained(
    first: Workflow, follow: Follow, workspace: Path, agent_dirs: Sequence[Path] = ()
) -> tuple[Workflow, Chain]:
    """``first`` composed with the handoffs ``follow`` names, and the chain to record when the
    run starts (``StartRequest.handoffs``)."""
    links = tuple(resolve_chain(first, follow, workspace, agent_dirs))
    return compose(first, links), Chain(follow, links)


def resolve_chain(
    first: Workflow, follow: Follow, workspace: Path, agent_dirs: Sequence[Path] = ()
) -> list[Link]:
    """The handoffs ``follow`` names, from ``first`` on, each next agent found by name
    (``workflow.agentfind``). An unknown label is an ``InputError`` naming the agent's labels;
    an agent not found a ``FileNotFoundFlowError`` naming the folders searched."""
    from ..workflow.agentdirs import beside
    from ..workflow.agentfind import agent_path

    if first.kind != "agent" or first.agent is None:
        raise InputError(
            f"--handoff and --handoffs follow a custom agent's handoffs, and "
            f"{display_path(first.path)} is a prompt file.",
            hint="Run a *.agent.md file (or an agent in .github/agents) to follow its handoffs.",
        )
    links: list[Link] = []
    current = first
    wanted = list(follow.labels) if not follow.auto else [None] * max(follow.max, 0)
    for label in wanted:
        handoff = _next_handoff(current, label)
        if handoff is None:
            break  # auto: the agent sends nothing on
        path = agent_path(handoff.agent, workspace, beside(current, agent_dirs))
        agent = _load_agent(path, current, handoff)
        links.append(Link(handoff, agent, path))
        current = agent
    return links


def _next_handoff(agent: Workflow, label: str | None) -> Handoff | None:
    spec = agent.agent
    assert spec is not None, "only agents reach here"
    if label is None:
        return next((h for h in spec.handoffs if h.send), None)
    found = spec.handoff(label)
    if found is None:
        have = ", ".join(f"`{h.label}`" for h in spec.handoffs) or "none"
        raise InputError(
            f"--handoff {label!r}: the agent {agent.name} ({display_path(agent.path)}) has no "
            f"handoff with that label; its handoffs: {have}.",
            path=agent.path,
            field="$.handoffs",
            hint="Give a label from the agent's handoffs: list (compared without case), in the "
            "order the chain follows them.",
        )
    return found


def _load_agent(path: Path, previous: Workflow, handoff: Handoff) -> Workflow:
    from ..workflow import load_workflow

    agent = load_workflow(path)
    if agent.kind != "agent":
        raise WorkflowError(
            f"the handoff `{handoff.label}` of {previous.name} names `{handoff.agent}`, and "
            f"{display_path(path)} is not a custom agent file.",
            path=previous.path,
            line=handoff.line,
            field="$.handoffs",
        )
    return agent


def compose(first: Workflow, links: Sequence[Link]) -> Workflow:
    """``first`` with one step per handoff after its task: the workflow a chained run runs.

    Its tools stay the first agent's (the task's); each part's step lists its agent's, and
    carries the agent (``Step.part``: the MCP tools and servers it names). The commands of
    every agent are the run's (a name two agents declare differently is refused).
    """
    steps = list(first.steps)
    commands = dict(first.commands)
    for n, link in enumerate(links, start=1):
        previous = links[n - 2].agent if n > 1 else first
        _check_prompt(link, [s.id for s in steps], first, previous.path)
        steps.append(_part_step(link, n, len(steps) + 1))
        for name, decl in link.agent.commands.items():
            if name in commands and commands[name] != decl:
                raise WorkflowError(
                    f"the agents of the handoff chain declare the command `{name}` differently "
                    f"({display_path(link.agent.path)} and an agent before it); a run has one "
                    "command of each name.",
                    path=link.agent.path,
                    field=f"$.commands.{name}",
                    hint="Give one of them another name.",
                )
            commands[name] = decl
    whole = digest({"agent": first.hash, "handoffs": [[s.id, s.hash] for s in steps[1:]]})
    return replace(first, steps=tuple(steps), commands=commands, hash=whole)


def _check_prompt(link: Link, earlier: list[str], first: Workflow, where: Path) -> None:
    """Refuse a handoff prompt's ``${step:ID}`` of no earlier part and ``${input:NAME}`` the
    run does not have, before any model is called (the prompt is sent only later)."""
    from ..workflow.variables import scan

    for token in scan(link.handoff.prompt):
        unknown = (token.kind == "step" and token.name not in earlier) or (
            token.kind == "input" and token.name not in first.inputs and token.placeholder is None
        )
        if unknown:
            have = ", ".join(f"${{step:{i}}}" for i in earlier)
            raise WorkflowError(
                f"the prompt of the handoff `{link.handoff.label}` uses {token.text}, which this "
                f"chain has no value for (the parts before it: {have}; the inputs: "
                f"{', '.join(first.inputs) or 'none'}).",
                path=where,
                line=link.handoff.line,
                field="$.handoffs",
                hint="Use ${step:ID} of an earlier part (the first agent's is ${step:task}) or "
                "an input of the first agent.",
            )


def _part_step(link: Link, n: int, index: int) -> Step:
    # Imported here: the readers of a chain (status, show) need none of the file parsers.
    from ..workflow.body import slugify
    from ..workflow.commands import command_definition
    from ..workflow.toolnames import mcp_tool_names

    agent, handoff = link.agent, link.handoff
    model = handoff.model or agent.model
    prompt = handoff.prompt.strip() or EMPTY_PROMPT
    tools = [
        command_definition(agent.commands[t]) if t in agent.commands else {"builtin": t}
        for t in agent.tools
    ]
    payload: dict[str, Any] = {
        "kind": "prompt",
        "template": prompt,
        "system": agent.context,
        "agent": agent.name,
        "provider": agent.provider,
        "model": model,
        "params": agent.params,
        "tools": tools,
    }
    mcp = mcp_tool_names(agent.tool_map)
    if mcp:
        # The MCP tools the part's agent names are its tools too (a step without them keeps
        # the hash it had before parts were offered MCP tools).
        payload["mcp"] = mcp
    return Step(
        id=f"{STEP_PREFIX}-{n}-{slugify(handoff.label) or 'part'}",
        title=f"Handoff: {handoff.label} → {agent.name}",
        index=index,
        kind="prompt",
        body=prompt,
        hash=digest(payload),
        line=handoff.line or 1,
        tools=agent.tools,
        system=agent.context,
        model=model,
        agent=agent.name,
        handoff=handoff.label,
        part=agent,
    )


def chain_record(
    follow: Follow, links: Sequence[Link], composed: Workflow, folder: Path
) -> HandoffChain:
    """What the progress file keeps of the chain (agent files relative to ``folder``)."""
    parts = [
        HandoffPart(
            step=step.id,
            label=link.handoff.label,
            agent=link.agent.name,
            path=relative_path(link.path, folder),
        )
        for step, link in zip(composed.steps[1:], links, strict=True)
    ]
    return HandoffChain(
        follow="auto" if follow.auto else "labels",
        parts=parts,
        max=follow.max if follow.auto else None,
        model=follow.model,
    )


def recompose(first: Workflow, chain: HandoffChain, folder: Path) -> Workflow:
    """The chained workflow a recorded run goes on with, from the agent files it names
    (relative to ``folder``, the progress file's); a changed file gives a changed step."""
    links: list[Link] = []
    current = first
    for n, part in enumerate(chain.parts):
        where = f"$.workflow.handoffs.parts[{n}]"
        if current.agent is None:
            raise WorkflowError(
                f"the run follows the handoff `{part.label}`, and {display_path(current.path)} "
                "is no longer a custom agent.",
                path=current.path,
            )
        handoff = current.agent.handoff(part.label)
        if handoff is None:
            raise WorkflowError(
                f"the run follows the handoff `{part.label}` of {current.name}, and "
                f"{display_path(current.path)} no longer has it (part {n + 1} of the chain).",
                path=current.path,
                field="$.handoffs",
                hint="Restore the handoff, or start a new run.",
            )
        path = folder / part.path
        if not path.is_file():
            raise FileNotFoundFlowError(
                f"the agent {part.agent} of the handoff `{part.label}`, {part.path} (relative to "
                "the progress file), does not exist.",
                path=folder,
                field=f"{where}.path",
                hint="Restore the agent file.",
            )
        agent = _load_agent(path, current, handoff)
        links.append(Link(handoff, agent, path))
        current = agent
    return compose(first, links)


def rebase_chain(run: Run, old_folder: Path, new_folder: Path) -> None:
    """The chain's agent files named from ``new_folder`` (a copy of the progress file there:
    ``flow fork``, ``flow share``), as ``workflow.path`` is."""
    chain = run.workflow.handoffs
    for part in chain.parts if chain is not None else ():
        part.path = rebase(part.path, old_folder, new_folder)


def pinned_model(step: Step, run: Run) -> str | None:
    """The one model a part of a chain is held to: ``--model`` given to the chained run, else
    the part's own (the handoff's ``model:``, else its agent's); None when the run's models
    (with their fallbacks, docs/spec.md 5.3) apply."""
    chain = run.workflow.handoffs
    if chain is not None and chain.model:
        return chain.model
    return step.model


def part_model(step: Step, run: Run, current: str | None) -> str | None:
    """The model a step's requests use: its pinned model (``pinned_model``), else
    ``current``, the run's model now (the first of its models not refused)."""
    return pinned_model(step, run) or current


def part_system(
    step: Step,
    *,
    inputs: Mapping[str, Any],
    step_outputs: Mapping[str, str],
    editor: Mapping[str, str],
    instructions: str,
) -> str:
    """The system text from a part's step on: its agent's instructions (variables filled in)
    and the workspace's custom instructions, as the run's first entry has them."""
    from ..workflow import render_text

    text = render_text(step.system or "", inputs=inputs, step_outputs=step_outputs, editor=editor)
    if instructions:
        text = f"{text.rstrip()}\n\n{instructions}" if text.strip() else instructions
    return text if text.strip() else f"(the agent {step.agent} has no instructions)"


def is_chained(workflow: Workflow) -> bool:
    """Whether a workflow has parts of a handoff chain."""
    return any(step.system is not None for step in workflow.steps)


def latest_system(messages: Sequence[Message]) -> Sequence[Message]:
    """One system prompt, the latest, first: a part's instructions replace the previous
    agent's, and each provider is sent exactly one."""
    systems = [i for i, m in enumerate(messages) if m.role == "system"]
    if not systems or systems == [0]:
        return messages
    return (messages[systems[-1]], *(m for m in messages if m.role != "system"))


def chain_view(run: Run, workflow_name: str | None = None) -> list[dict[str, Any]] | None:
    """The chain as ``flow status``/``show`` list it: each part's step, label, agent, status
    (the first part is the agent's own task); None for a run without a chain."""
    chain = run.workflow.handoffs
    if chain is None:
        return None
    first = next(iter(run.workflow.steps), None) or "task"
    rows = [
        {
            "step": first,
            "label": None,
            "agent": run.workflow.name or workflow_name,
            "path": run.workflow.path,
            "status": run.steps[first].status if first in run.steps else "pending",
        }
    ]
    for part in chain.parts:
        state = run.steps.get(part.step)
        rows.append(
            {
                "step": part.step,
                "label": part.label,
                "agent": part.agent,
                "path": part.path,
                "status": state.status if state is not None else "pending",
            }
        )
    return rows


def chain_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """The chain in one line: ``reviewer (completed) → [Fix] fixer (running) → …``."""
    shown = [
        (f"[{r['label']}] " if r["label"] else "") + f"{r['agent']} ({r['status']})" for r in rows
    ]
    return " → ".join(shown)
