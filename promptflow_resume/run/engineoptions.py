"""What the engine is given: how a run executes (``EngineOptions``) and the runner of its
child runs, with the records it speaks in (``ChildCall``, ``AgentCall``, ``ChildResult``).

    options = EngineOptions(workspace=Path("."), timeout=600)
    Engine(workflow, run, store, provider, tools, options).execute()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..base.clock import sleep as clock_sleep
from ..base.costledger import SharedBudget
from ..base.redact import Redactor
from ..base.truststore import Verdict
from ..progress.model import Run
from ..providers.provider import Provider
from ..tools.approval import ApprovalPolicy
from ..tools.consent import Asker, Consent
from ..tools.tool import Tool
from ..workflow.records import Step, Workflow
from ..workflow.skillfile import Skill
from .events import Reporter
from .hooks import RunHookSet

#: How many quota-window suspensions a run may use unless ``--max-suspensions`` says
#: (docs/spec.md 4.18): enough for a daily window or two, few enough that a run stuck on an
#: exhausted quota stops asking.
DEFAULT_MAX_SUSPENSIONS = 3


@dataclass
class ChildCall:
    """What a workflow step asks of the sub-workflow runner: run or resume its child."""

    #: The parent's progress file and run, and the step that runs the child.
    parent_path: Path
    parent: Run
    step: Step
    #: The child's progress file, relative to the parent's folder (``steps.<id>.child``).
    child: str
    #: The child's input values, as recorded in the step's call entry.
    inputs: dict[str, Any]
    #: What is left of the parent's budget for this step (turns, tokens, cost), as limits.
    budget: dict[str, Any]
    #: Seconds left of this attempt's time limit, or None.
    timeout: float | None
    provider: Provider
    options: EngineOptions


@dataclass
class AgentCall:
    """What a subagent call asks of the runner: run or resume the called agent's child run."""

    parent_path: Path
    parent: Run
    step: Step
    #: The tool call's id: with the step, it fixes where the child's file goes.
    call_id: str
    #: The agent's name and its file, as this machine's agent folders offer it (never a path
    #: from the progress file).
    agent: str
    agent_path: Path
    #: The child's progress file, relative to the parent's folder (``steps.<id>.agents``).
    child: str
    task: str
    #: What is left of the parent's budget for this call (turns, tokens, cost), as limits.
    budget: dict[str, Any]
    #: Seconds left of this attempt's time limit, or None.
    timeout: float | None
    provider: Provider
    options: EngineOptions


@dataclass
class ChildResult:
    """How a child run ended: the run itself and, once completed, its final output."""

    run: Run
    output: str | None


class ChildRunner(Protocol):
    """Runs sub-workflows for workflow steps (``subworkflows.SubworkflowRunner``)."""

    def location(self, parent_path: Path, step_id: str) -> str:
        """Where a step's child progress file goes, relative to the parent's folder."""
        ...

    def set_aside(self, parent_path: Path, child: str) -> None:
        """Move an earlier child run of a step that starts again out of the way."""
        ...

    def run(self, call: ChildCall) -> ChildResult:
        """Start the child, or resume it when its progress file exists; until it stops."""
        ...

    def agent_location(self, parent_path: Path, step_id: str, call_id: str) -> str:
        """Where a subagent call's child progress file goes, relative to the parent's folder."""
        ...

    def agent_tool(self, workflow: Workflow, workspace: Path) -> Tool | None:
        """The subagent tool for a run of ``workflow`` (None: no agent may be called)."""
        ...

    def run_agent(self, call: AgentCall) -> ChildResult:
        """Start a subagent call's child, or resume it when its file exists; until it stops."""
        ...


@dataclass
class EngineOptions:
    """How a run executes: where tools work, time limits, the display, redaction."""

    workspace: Path
    reporter: Reporter = field(default_factory=Reporter)
    redactor: Redactor = field(default_factory=Redactor.from_environment)
    #: Wall-clock limit of this attempt in seconds (``--timeout``), on top of the budget's.
    timeout: float | None = None
    #: Editor variables (``${workspaceFolder}``, ``${file}``, …) for prompt text.
    editor: Mapping[str, str] = field(default_factory=dict)
    #: Notice given to the model before its next call (set when a run is resumed).
    resume_note: str | None = None
    #: Sleep used between provider retries (tests pass a recorder).
    sleep: Callable[[float], None] = clock_sleep
    #: Who allows model-chosen commands and fetches (None: nobody, they are refused).
    consent: Consent | None = None
    #: The workspace's custom instructions, added to the run's first (system) entry.
    instructions: str = ""
    #: The skills the model may load (``load_skill``), listed in the run's first entry.
    skills: tuple[Skill, ...] = ()
    #: Tools offered besides the workflow's own in steps without a ``tools`` list (MCP).
    extra_tools: tuple[str, ...] = ()
    #: A handoff chain's parts: per step id, the MCP tools its agent names (spec 4.13).
    part_tools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Called with a step's id when the step completes (a run in a worktree commits there).
    on_step_completed: Callable[[str], None] | None = None
    #: Runs the sub-workflows of workflow steps (None: a workflow step cannot run here).
    children: ChildRunner | None = None
    #: The hooks files this attempt runs (``hooks.py``).
    hooks: RunHookSet = field(default_factory=RunHookSet)
    #: What the workspace brings that its trust left out (relative path, verdict): hooks
    #: files, MCP configurations, agents; said once as the attempt begins (spec 10.9).
    untrusted: tuple[tuple[str, Verdict], ...] = ()
    #: Which tool calls wait for a person's yes (``approve:``, ``--approve``; spec 4.17).
    approval: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    #: Asks a person about one held call on a terminal (None: the run stops
    #: ``awaiting_approval`` instead).
    approval_ask: Asker | None = None
    #: ``--on-consent stop``: without a terminal, a command or fetch that needs consent is
    #: held for ``flow approve`` instead of refused (spec 4.17).
    consent_stop: bool = False
    #: How many quota-window suspensions the run may use in all (``--max-suspensions``).
    max_suspensions: int = DEFAULT_MAX_SUSPENSIONS
    #: A cost budget shared with runs in other processes (a batch's ``--max-cost``): every
    #: model call holds a reservation on it (docs/spec.md 8.3).
    shared_budget: SharedBudget | None = None
    #: Snapshot the working tree after each call that can change files, in a git repository
    #: (``--no-snapshots``: False; a sub-workflow's run: False, its parent's call has one).
    snapshots: bool = True
