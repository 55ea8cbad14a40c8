"""Typed records for a loaded workflow (``*.prompt.md``) or custom agent (``*.agent.md``).

``workflow.load_workflow(path)`` reads and checks a file once and returns a frozen
``Workflow``; everything downstream (engine, reconcile, detect) reads these records and never
the raw front matter.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..base.retrypolicy import RetryPolicy
from ..providers.models import ModelRef

InputType = Literal["string", "integer", "number", "boolean", "list"]
StepKind = Literal["prompt", "command", "human", "workflow"]
Severity = Literal["error", "warning"]
VariableKind = Literal["input", "step", "editor"]
#: What a file is: a prompt file (the task is in the file), or a custom agent or a skill run
#: directly (the task is given).
WorkflowKind = Literal["prompt", "agent", "skill"]


class IncompleteReply(enum.Enum):
    """What a step does with a final reply that is empty or cut off at the token limit (the
    workflow's ``incomplete_reply:``)."""

    #: The default: the step completes with it, and the run's output and status say so.
    WARN = "warn"
    #: Ask the model once more; a second incomplete reply stops the run.
    RETRY = "retry"
    #: Stop the run (``failed``) for a person to look: a resume goes on with the reply as it
    #: then stands in the file (edited, or removed to ask again).
    STOP = "stop"


@dataclass(frozen=True)
class Diagnostic:
    """A problem found in a workflow file, with its position (1-based line and column)."""

    severity: Severity
    message: str
    path: str
    line: int | None = None
    column: int | None = None
    field: str | None = None
    code: str = "workflow"

    def __str__(self) -> str:
        loc = self.path
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        where = f" {self.field}:" if self.field else ""
        return f"{loc}: {self.severity}:{where} {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The diagnostic as the ``--json`` documents give it (``path`` left to the caller)."""
        return {
            "severity": self.severity,
            "line": self.line,
            "column": self.column,
            "field": self.field,
            "code": self.code,
            "message": self.message,
        }


@dataclass(frozen=True)
class InputDecl:
    """A declared input: ``inputs: {name: {type, default, description, required}}``."""

    name: str
    type: InputType = "string"
    default: Any = None
    description: str | None = None
    required: bool = True
    #: The placeholder from ``${input:name:placeholder}`` when the body gives one.
    placeholder: str | None = None
    #: The only values allowed (``choices:``), or None for any value of the type.
    choices: tuple[Any, ...] | None = None
    #: False for an input used in the body (``${input:x}``) but not declared under ``inputs:``.
    declared: bool = True


@dataclass(frozen=True)
class CommandDecl:
    """A command tool declared under ``commands:``; only these can ever be executed."""

    name: str
    argv: tuple[str, ...]
    description: str = ""
    idempotent: bool = False
    timeout: float = 60.0
    cwd: str | None = None
    #: Names of environment variables passed through; everything else is withheld.
    env: tuple[str, ...] = ()
    #: Captured output above this many bytes goes to a sidecar file.
    max_output: int = 65536
    #: Run ``argv`` through ``/bin/sh -c`` only when the workflow asks for it.
    shell: bool = False
    #: JSON Schema of the arguments the model may pass (substituted into ``{name}`` in argv).
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Budget:
    """Limits that end a run with ``budget_exhausted`` (or ``timeout`` for wall time)."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_turns: int | None = None
    max_seconds: float | None = None


@dataclass(frozen=True)
class Compaction:
    """Context compaction settings: ``compaction:`` and ``context_window:`` in the front matter."""

    enabled: bool = True
    #: Compact before a request would pass this share of the context window.
    threshold: float = 0.8
    #: Share of the window the most recent turns, kept verbatim, may take.
    keep_recent: float = 0.3
    #: The model's window in tokens; None: from the table (``providers.context``).
    context_window: int | None = None


@dataclass(frozen=True)
class Step:
    """One step: a prompt for the model, a direct command run, or a question for a person."""

    id: str
    title: str
    #: 1-based position in the workflow.
    index: int
    kind: StepKind
    #: The step's prompt text as written (variables not yet substituted).
    body: str
    #: ``algo:version:hex`` hash over the normalized step (text, model, params, its tools).
    hash: str
    #: 1-based line of the step's heading in the file.
    line: int
    #: Tools the model may call in this step; None means the workflow's ``tools``.
    tools: tuple[str, ...] | None = None
    max_turns: int | None = None
    #: For ``kind == "command"``: the declared command to run and its arguments.
    command: str | None = None
    command_args: dict[str, Any] = field(default_factory=dict)
    #: The step heading as written (``Step 1: Inspect``); None for a file without steps.
    heading: str | None = None
    #: For ``kind == "workflow"``: the sub-workflow's path as written (relative to this file),
    #: its input values (variables not yet substituted) and the loaded sub-workflow.
    workflow: str | None = None
    workflow_inputs: dict[str, str] = field(default_factory=dict)
    child: Workflow | None = field(default=None, compare=False, repr=False)
    #: A part of a handoff chain (``flow run AGENT --handoff LABEL``): its agent's
    #: instructions (the system text from this step on, variables not yet substituted), the
    #: model its requests use (the handoff's ``model:``, else the agent's; None: the run's),
    #: the agent's name and the handoff's label. All None for every other step; the
    #: instructions and model are in the step's hash.
    system: str | None = None
    model: str | None = None
    agent: str | None = None
    handoff: str | None = None
    #: A part of a handoff chain: its agent, loaded (its MCP tool names and ``mcp-servers:``
    #: decide the MCP tools the part is offered, docs/spec.md 4.13).
    part: Workflow | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class VariableUse:
    """One ``${...}`` variable in the body: which kind, where, and in which step."""

    kind: VariableKind
    #: Input name, step id, or editor variable name (``file``, ``workspaceFolder`` ...).
    name: str
    #: The text as written, e.g. ``${input:audience:the team}``.
    text: str
    line: int
    column: int
    #: The step whose text holds it; None for the shared context.
    step: str | None = None
    placeholder: str | None = None


@dataclass(frozen=True)
class Handoff:
    """One entry of an agent's ``handoffs:``: the next agent and the message it is sent."""

    label: str
    #: The next agent's name.
    agent: str
    #: The next part's user message (may be empty: the conversation so far is the context).
    prompt: str = ""
    #: ``send: true``: followed by ``--handoffs auto`` (in the editor: sent without a click).
    send: bool = False
    model: str | None = None
    #: 1-based line of the entry in the agent file.
    line: int | None = None


#: The Copilot CLI's default time limit of a hook, in seconds.
HOOK_TIMEOUT = 30.0


@dataclass(frozen=True)
class HookCommand:
    """One command entry of a hooks file, ready to run."""

    #: flow's moment (``EVENTS``), whichever name the file gives it.
    event: str
    #: Its position in the event's list (0-based), in its file.
    index: int
    #: The file it came from, as the run names it (relative to the workspace when inside).
    source: str
    #: The shell command run by ``bash -c`` (``bash``, else the portable ``command`` key).
    bash: str
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = HOOK_TIMEOUT
    #: For tool events: a regex the tool's name must match whole (``^(?:matcher)$``).
    matcher: str | None = None
    #: ``copilot`` (``version: 1``) or ``vscode``: which input the hook expects.
    dialect: str = "copilot"
    #: Where the entry is in its file, as the file names it (``PreToolUse[1].hooks[0]``);
    #: empty for ``event[index]``.
    label: str = ""

    @property
    def ref(self) -> str:
        """``FILE#event[i]``: how records and messages name this hook."""
        return f"{self.source}#{self.label or f'{self.event}[{self.index}]'}"

    def matches(self, tool: str) -> bool:
        """True when this hook applies to a call of ``tool``."""
        return self.matcher is None or re.fullmatch(f"(?:{self.matcher})", tool) is not None


@dataclass(frozen=True)
class AgentSpec:
    """What only an agent file says (``Workflow.agent``); tools and model are the workflow's."""

    argument_hint: str | None = None
    handoffs: tuple[Handoff, ...] = ()
    #: Agents it may call as subagents: None for any (``'*'`` or absent), () for none.
    agents: tuple[str, ...] | None = None
    #: ``mcp-servers:``: servers defined in the agent itself, by name.
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    #: ``hooks:``: hooks that run while this agent runs (VS Code's agent-scoped hooks).
    hooks: tuple[HookCommand, ...] = ()
    target: str | None = None
    #: ``user-invocable`` (default true): meant to be run by a person, not only as a subagent.
    user_invocable: bool = True
    #: Not ``disable-model-invocation``: other agents may call it as a subagent.
    model_invocable: bool = True
    #: ``claude`` for a ``.claude/agents`` file (its keys were translated), else ``copilot``.
    dialect: Literal["copilot", "claude"] = "copilot"

    def handoff(self, label: str) -> Handoff | None:
        """The handoff labelled ``label`` (compared without case), or None."""
        wanted = label.strip().lower()
        return next((h for h in self.handoffs if h.label.lower() == wanted), None)


class Recovery(enum.Enum):
    """Who decides an ambiguous state on resume (the workflow's ``recovery:``)."""

    #: The default: a person, with flags or on a terminal.
    PERSON = "person"
    #: The model, as with ``flow resume --decide``.
    MODEL = "model"


@dataclass(frozen=True)
class Workflow:
    """A loaded, checked workflow file."""

    path: Path
    name: str
    description: str | None
    #: Every front-matter key as written, including ones flow does not know.
    front_matter: dict[str, Any]
    #: Text before the first step: shared context for every step.
    context: str
    steps: tuple[Step, ...]
    inputs: dict[str, InputDecl]
    commands: dict[str, CommandDecl]
    #: Tool names the model may call (commands, built-ins, mapped prompt-file names).
    tools: tuple[str, ...]
    provider: str | None
    #: The first choice of ``model:`` as a model id; None: the command line decides.
    model: str | None
    #: Model parameters: temperature, max_tokens, top_p, ...
    params: dict[str, Any]
    budget: Budget
    retry: RetryPolicy
    #: ``algo:version:hex`` hash over the normalized whole workflow.
    hash: str
    diagnostics: tuple[Diagnostic, ...] = ()
    #: Every flow variable used in the body, in file order.
    variables: tuple[VariableUse, ...] = ()
    #: Each name in the front matter's ``tools:`` as written -> the tools it resolves to
    #: (empty for a name nothing fits, which is not offered to the model).
    tool_map: dict[str, tuple[str, ...]] = field(default_factory=dict)
    compaction: Compaction = field(default_factory=Compaction)
    #: ``recovery:`` — ``person`` (the default) or ``model``: ``flow resume`` lets the model
    #: decide ambiguous states as with ``--decide``.
    recovery: Recovery = Recovery.PERSON
    #: ``incomplete_reply:`` — what a step does with an empty or cut-off final reply.
    incomplete_reply: IncompleteReply = IncompleteReply.WARN
    #: ``agent`` for a custom agent file: ``context`` is its instructions, the one step sends
    #: the task (the input ``task``), and ``agent`` holds the agent-only keys.
    kind: WorkflowKind = "prompt"
    agent: AgentSpec | None = None
    #: MCP servers an agent defines itself (``mcp-servers:`` of this agent file, or of the
    #: agent a prompt file's ``agent: NAME`` names), by name as written, and that agent's file.
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    mcp_servers_file: Path | None = None
    #: The hooks of the run's agent (``hooks:`` of this agent file, or of the agent a prompt
    #: file's ``agent: NAME`` uses) and the file they come from.
    agent_hooks: tuple[HookCommand, ...] = ()
    agent_hooks_file: Path | None = None
    #: Every model id of ``model:`` in order, ``model`` first: one for a single name, none
    #: without ``model:``. A model the provider refuses as unknown or unavailable to the key
    #: is replaced by the next for the rest of the attempt (docs/spec.md 5.3).
    models: tuple[str, ...] = ()
    #: Each name of ``model:`` as flow understands it (``providers.models.ModelRef``), in
    #: order; a run that names no provider takes the first whose provider has credentials.
    model_refs: tuple[ModelRef, ...] = ()
    #: True when the file (or the agent it uses) names its provider with ``provider:``.
    provider_named: bool = False
    #: ``approve:`` patterns: the file's, and with ``agent: NAME`` that agent's too (4.17).
    approve: tuple[str, ...] = ()

    def step(self, step_id: str) -> Step | None:
        """The step with ``step_id``, or None."""
        return next((s for s in self.steps if s.id == step_id), None)

    def parts(self) -> tuple[Workflow, ...]:
        """The agents of a handoff chain's later parts, in step order (none for any other)."""
        return tuple(s.part for s in self.steps if s.part is not None)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        """Diagnostics of severity ``error``."""
        return tuple(d for d in self.diagnostics if d.severity == "error")
