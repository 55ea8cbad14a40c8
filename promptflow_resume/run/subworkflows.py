"""Sub-workflows: a workflow step runs another workflow as a child run of its own.

A step with ``> workflow: child.prompt.md`` runs the child workflow in its own progress file
beside the parent's (``<stem>.steps/<step-id>/progress.md``, e.g.
``.flow/runs/<run-id>/progress.steps/review/progress.md``). The two are linked both ways: the
parent's ``steps.<id>.child`` names the child's file, the child's ``parent`` names the parent's
file (relative to the child's folder), its run id and the step, with ``kind: workflow``. The
rules (docs/spec.md section 4.10):

- The child uses the parent's provider connection (the same replies, recording or script), its
  own steps, tools, commands and inputs, and a budget no larger than what the parent has left.
  Its usage becomes the parent step's usage and is added to the parent run's.
- Resume descends: resuming the parent resumes the child through the same path as
  ``flow resume`` (journal replay, reconcile, resume note), then the parent goes on. A
  completed child is only read back, never run again.
- A child whose workflow names MCP tools gets its own MCP servers (from the workspace's
  ``.vscode/mcp.json`` or the parent's ``--mcp-config``), started when it starts or resumes
  and stopped when it stops; its MCP calls are durable like the parent's (recorded in flight
  before they are sent, judged by the server's annotations on resume).
- A child's own progress file is not resumed directly (``flow resume`` refuses it and names
  the parent), so the parent always learns how its child ended.

The engine calls ``SubworkflowRunner`` through ``EngineOptions.children``::

    runner = SubworkflowRunner(make_run=new_run, consent_for=permissions.consent)
    options.children = runner
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import (
    FileNotFoundFlowError,
    FlowError,
    InputError,
    NeedsReviewError,
    StorageError,
)
from ..base.paths import rebase, relative_path
from ..base.safeopen import linked_file
from ..base.truststore import Trust
from ..progress import ProgressStore
from ..progress.children import (
    MAX_DEPTH,
    child_folder,
    children_of_file,
    folder_name,
)
from ..progress.links import child_cycle_error, child_file
from ..progress.model import EditNote, Run, Usage
from ..progress.render import entries_phrase
from ..providers.provider import Provider
from ..tools import build_tools
from ..tools.consent import Consent
from ..tools.declared import command_output
from ..tools.subagent import SubagentTool, subagent_offer
from ..tools.tool import Tool
from .childreporter import ChildReporter
from .engine import Engine
from .engineoptions import AgentCall, ChildCall, ChildResult, EngineOptions
from .humananswers import answer_line
from .planapply import apply_plan, check_servers, resume_note
from .reconcile import plan_resume
from .resumeplan import Choices

if TYPE_CHECKING:
    from ..tools.mcp import McpServers
from ..workflow import load_workflow
from ..workflow.agentfile import TASK_INPUT
from ..workflow.records import Workflow

#: ``parent.kind`` of a child run (a fork's ``parent`` has no ``kind``).
CHILD_KIND = "workflow"
#: ``parent.kind`` of a subagent call's child run (docs/spec.md 4.14).
AGENT_KIND = "agent"

#: ``make_run(workflow, inputs, progress_path, provider=, model=, limits_budget=)`` → new Run.
MakeRun = Callable[..., Run]


def is_child(run: Run) -> bool:
    """True for the run of a sub-workflow or a subagent (its ``parent`` has ``kind:
    workflow`` or ``kind: agent``)."""
    return run.parent is not None and run.parent.get("kind") in (CHILD_KIND, AGENT_KIND)


def parent_of(run: Run, path: Path) -> Path | None:
    """The parent's progress file of a child run, or None for any other run."""
    if not is_child(run) or run.parent is None or not run.parent.get("path"):
        return None
    return Path(os.path.normpath(path.parent / run.parent["path"]))


def refuse_direct_resume(run: Run, path: Path) -> None:
    """A child is resumed through its parent: raise ``InputError`` naming the parent."""
    parent = parent_of(run, path)
    if parent is None:
        return
    step = run.parent.get("step", "?") if run.parent else "?"
    what = "a subagent" if run.parent and run.parent.get("kind") == AGENT_KIND else "a sub-workflow"
    raise InputError(
        f"{path} is the run of {what}: step {step!r} of the run in {parent}. It is "
        "resumed through that run, which then goes on with its own steps.",
        path=path,
        field="$.parent",
        hint=f"Run `flow resume {parent}`.",
    )


def child_output(run: Run, workflow: Workflow) -> str | None:
    """A completed child's final output: the output of its last step (None before that)."""
    if run.status != "completed" or not workflow.steps:
        return None
    last = workflow.steps[-1]
    state = run.steps.get(last.id)
    entry = run.entry(state.output_entry) if state and state.output_entry else None
    if entry is None:
        return ""
    if entry.role == "tool_result" and last.kind == "command":
        return command_output(entry.content)
    return entry.content


def _tighter(budget: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
    """``budget`` with each of ``caps`` applied where it is lower (or the budget has none)."""
    merged = dict(budget)
    for key, cap in caps.items():
        if merged.get(key) is None or float(cap) < float(merged[key]):
            merged[key] = cap
    return merged


def _own_budget(workflow: Workflow) -> dict[str, Any]:
    b = workflow.budget
    values = {
        "max_tokens": b.max_tokens,
        "max_cost_usd": b.max_cost_usd,
        "max_turns": b.max_turns,
        "max_seconds": b.max_seconds,
    }
    return {k: v for k, v in values.items() if v is not None}

    # run_started and close stay no-ops: the parent's display lives on after the child.


@dataclass
class _Child:
    """One child run as the runner starts or resumes it: a workflow step's or a subagent
    call's, told apart only by the link the child records and the title it is shown with."""

    parent_path: Path
    parent: Run
    step_id: str
    #: How the parent's display names the child (``Triage``, ``agent reviewer``).
    title: str
    #: The child's ``parent`` link (``path``, ``run_id``, ``step``, ``kind`` …).
    link: dict[str, str]
    inputs: dict[str, Any]
    budget: dict[str, Any]
    timeout: float | None
    provider: Provider
    options: EngineOptions
    #: What of the child's usage the parent has added to its own so far.
    rolled_up: Callable[[], Usage]


@dataclass
class SubworkflowRunner:
    """Starts and resumes the child runs of workflow steps and of subagent calls
    (``engine.ChildRunner``)."""

    #: ``api.new_run``: the checkpoint of a run that has not started.
    make_run: MakeRun
    #: The consent of one run of a workflow (the person's flags plus its allow-lists).
    consent_for: Callable[[Workflow], Consent]
    #: The answers to changed-workflow questions, as given to the parent's resume.
    choices: Choices = field(default_factory=Choices)
    depth: int = 0
    #: The progress files of the runs above the one this runner serves (outermost first).
    above: tuple[Path, ...] = ()
    #: The parent's ``--mcp-config`` (None: the workspace's ``.vscode/mcp.json``).
    mcp_config: str | Path | None = None
    #: Asks for an MCP configuration input on a terminal (``id, description, password``).
    mcp_ask: Callable[[str, str, bool], str] | None = None
    #: ``--mcp-input ID=VALUE``: the inputs' values given on the command line.
    mcp_inputs: Mapping[str, str] = field(default_factory=dict)
    #: ``--agents DIR``: searched for subagents before the workspace's and the user's folders.
    agent_dirs: tuple[Path, ...] = ()
    #: The trust a child's workspace is judged by (the run options' ``trust_in``; None: what
    #: ``flow trust`` recorded for it).
    trust_in: Callable[[Path], Trust] | None = None

    def location(self, parent_path: Path, step_id: str) -> str:
        """``<stem>.steps/<step-id>/progress.md``, relative to the parent's folder."""
        return f"{child_folder(parent_path)}/{step_id}/progress.md"

    def agent_location(self, parent_path: Path, step_id: str, call_id: str) -> str:
        """``<stem>.steps/<step-id>/agents/<call-id>/progress.md``: fixed by the step and the
        tool call, so a resume finds the child a crash left behind."""
        return f"{child_folder(parent_path)}/{step_id}/agents/{folder_name(call_id)}/progress.md"

    def agent_tool(self, workflow: Workflow, workspace: Path) -> Tool | None:
        """The subagent tool of a run of ``workflow``, offering the agents this machine's
        folders hold that it may call; None when there are none."""
        offer = subagent_offer(workflow, workspace, self.agent_dirs)
        return SubagentTool(offer) if offer else None

    def set_aside(self, parent_path: Path, child: str) -> None:
        """Rename an earlier child's folder to ``<step-id>.archive-N`` (a subagent's:
        ``<call-id>.archive-N``); nothing is deleted."""
        target = parent_path.parent / child
        folder = target.parent
        if not target.exists():
            return
        n = 1
        while (folder.parent / f"{folder.name}.archive-{n}").exists():
            n += 1
        try:
            os.replace(folder, folder.parent / f"{folder.name}.archive-{n}")
        except OSError as error:
            raise StorageError(
                f"cannot set the earlier child run {folder} aside (renaming it to "
                f"{folder.name}.archive-{n}): {error.strerror or error}.",
                path=folder,
                hint="Fix the folder's permissions or free some space, then resume.",
            ) from error

    def run(self, call: ChildCall) -> ChildResult:
        """Start the step's child run, or resume it, and execute it until it stops."""
        self._check_depth(call.step.id, call.parent_path)
        workflow = call.step.child
        if workflow is None:  # the loader refuses such a step; a guard for library callers
            raise FileNotFoundFlowError(
                f"step {call.step.id!r} names the workflow {call.step.workflow}, which was not "
                "loaded.",
                path=call.parent_path,
            )
        path = child_file(call.parent_path, call.step.id, call.child)
        self._refuse_cycle(call.parent_path, call.step.id, call.child, path)
        state = call.parent.steps.get(call.step.id)
        child = _Child(
            parent_path=call.parent_path,
            parent=call.parent,
            step_id=call.step.id,
            title=call.step.title,
            link={
                "path": relative_path(call.parent_path, path.parent),
                "run_id": call.parent.run_id,
                "step": call.step.id,
                "kind": CHILD_KIND,
            },
            inputs=call.inputs,
            budget=call.budget,
            timeout=call.timeout,
            provider=call.provider,
            options=call.options,
            rolled_up=lambda: state.usage if state is not None else Usage(),
        )
        if path.exists():
            return self._resume(child, path, lambda run: _step_workflow(call, path, run))
        return self._start(child, path, workflow)

    def run_agent(self, call: AgentCall) -> ChildResult:
        """Start a subagent call's child run, or resume it, and execute it until it stops.

        The agent file is the one this machine's folders hold for the name (the tool's offer);
        a child whose file records another agent file is not run (docs/spec.md 10)."""
        self._check_depth(call.step.id, call.parent_path)
        field_name = f"$.steps.{call.step.id}.agents.{call.call_id}.child"
        path = linked_file(
            call.parent_path.parent,
            call.child,
            what="subagent run file",
            source=call.parent_path,
            field=field_name,
        )
        self._refuse_cycle(call.parent_path, call.step.id, call.child, path, call.call_id)
        workflow = load_workflow(call.agent_path)
        state = call.parent.steps.get(call.step.id)
        recorded = state.agents.get(call.call_id) if state is not None else None
        child = _Child(
            parent_path=call.parent_path,
            parent=call.parent,
            step_id=call.step.id,
            title=f"agent {call.agent}",
            link={
                "path": relative_path(call.parent_path, path.parent),
                "run_id": call.parent.run_id,
                "step": call.step.id,
                "kind": AGENT_KIND,
                "call": call.call_id,
                "agent": call.agent,
            },
            inputs={TASK_INPUT: call.task},
            budget=call.budget,
            timeout=call.timeout,
            provider=call.provider,
            options=call.options,
            rolled_up=lambda: recorded.usage if recorded is not None else Usage(),
        )
        if path.exists():
            return self._resume(child, path, lambda run: _agent_workflow(call, path, run, workflow))
        path.parent.mkdir(parents=True, exist_ok=True)
        return self._start(child, path, workflow)

    def _check_depth(self, step_id: str, parent_path: Path) -> None:
        if self.depth >= MAX_DEPTH:
            raise InputError(
                f"step {step_id!r} would run workflows {MAX_DEPTH} levels deep; flow stops there.",
                path=parent_path,
            )

    def _refuse_cycle(
        self, parent_path: Path, step_id: str, link: str, path: Path, call_id: str | None = None
    ) -> None:
        chain = [*self.above, parent_path]
        if os.path.realpath(path) in {os.path.realpath(p) for p in chain}:
            # A file from someone else can point a step back at its own run (docs/spec.md 10.5).
            raise child_cycle_error(parent_path, step_id, link, chain, call_id)

    # --- one child ---------------------------------------------------------------------------

    def _child_options(
        self, child: _Child, workflow: Workflow, servers: McpServers | None
    ) -> EngineOptions:
        parent = child.options
        secrets = servers.config.secrets if servers is not None else ()
        if servers is not None:
            servers.notice = parent.reporter.notice  # says which server Ctrl-C stops
        return replace(
            parent,
            reporter=ChildReporter(
                parent.reporter,
                step_id=child.step_id,
                title=child.title,
                run=child.parent,
                rolled_up=child.rolled_up,
            ),
            timeout=child.timeout,
            resume_note=None,
            # Its files are snapshotted by the parent's call that runs it (docs/spec.md 12).
            snapshots=False,
            consent=self.consent_for(workflow),
            # The child's own MCP tools, never the parent's (its tools: list is its own).
            extra_tools=servers.offer() if servers is not None else (),
            redactor=parent.redactor.with_values(secrets) if secrets else parent.redactor,
            children=replace(self, depth=self.depth + 1, above=(*self.above, child.parent_path)),
        )

    def _servers(
        self, child: _Child, workflow: Workflow, path: Path, tools: dict[str, Any]
    ) -> McpServers | None:
        """Start the MCP servers the child's workflow names, adding their tools to ``tools``;
        their logs go beside the child's file, and their secrets join the parent's redactor."""
        from ..tools.mcp_wiring import find_mcp_config, start_mcp

        workspace = child.options.workspace
        trust = (self.trust_in or Trust.for_folder)(workspace)
        # A sub-workflow is the parent workflow's own (the person named it); a subagent is
        # the model's choice among the agents found, so its servers need the folder's trust.
        named = child.link.get("kind") != AGENT_KIND
        config = find_mcp_config(
            workflow,
            workspace,
            self.mcp_config,
            self.mcp_ask,
            trust,
            named=named,
            given=self.mcp_inputs,
        )
        if config is None:
            return None
        redactor = child.options.redactor.with_values(config.secrets)
        return start_mcp(workflow, workspace, tools, config, path, redactor)

    def _start(self, child: _Child, path: Path, workflow: Workflow) -> ChildResult:
        config = child.parent.config
        run = self.make_run(
            workflow,
            child.inputs,
            path,
            redactor=child.options.redactor,
            provider=config.provider,
            # The connection is the parent's; a child that names its own model uses it.
            model=workflow.model or config.model,
            base_url=config.base_url,
        )
        # Its models too: its own list, or the parent's when it names none.
        run.config.models = list(workflow.models if workflow.model else config.models)
        if len(run.config.models) < 2:
            run.config.models = []
        run.config.recording = (
            None
            if config.recording is None
            else rebase(config.recording, child.parent_path.parent, path.parent)
        )
        run.config.budget = _tighter(_own_budget(workflow), child.budget)
        run.config.prices = dict(config.prices)  # priced as its parent is
        run.parent = dict(child.link)
        path.parent.mkdir(parents=True, exist_ok=True)
        tools = build_tools(workflow, child.options.workspace, skills=bool(child.options.skills))
        # Before the child's file exists: a server that cannot start leaves no child behind.
        servers = self._servers(child, workflow, path, tools)
        try:
            store = ProgressStore.create(path, run)
            try:
                self._execute(child, workflow, run, store, note=None, tools=tools, servers=servers)
            finally:
                store.close()
        finally:
            if servers is not None:
                servers.close()
        return ChildResult(run=run, output=child_output(run, workflow))

    def _resume(
        self, child: _Child, path: Path, workflow_of: Callable[[Run], Workflow]
    ) -> ChildResult:
        store, run, report = ProgressStore.open(path)
        servers: McpServers | None = None
        try:
            workflow = workflow_of(run)
            if run.status == "completed":
                return ChildResult(run=run, output=child_output(run, workflow))
            tools = build_tools(
                workflow, child.options.workspace, skills=bool(child.options.skills)
            )
            servers = self._servers(child, workflow, path, tools)
            plan = plan_resume(
                run, workflow, report, tools, self.choices, workspace=child.options.workspace
            )
            check_servers(plan, tools)
            stopped_status, stopped_reason = run.status, run.reason
            try:
                notes = apply_plan(run, workflow, plan, archive=store.write_sidecar)
            except NeedsReviewError:
                store.checkpoint(run)  # the placeholders and the status, as flow resume does
                raise
            if plan.answered_tools or plan.applied_tools or plan.unsealed_choice:
                store.checkpoint(run)
            if report.edited_entries:
                notes.append(EditNote(f"{entries_phrase(report.edited_entries)} edited by hand"))
            run.config.budget = _tighter(_own_budget(workflow), child.budget)
            run.config.prices = dict(child.parent.config.prices)
            stopped = replace(run, status=stopped_status, reason=stopped_reason)
            note = resume_note(stopped, plan, workflow)
            self._execute(
                child, workflow, run, store, note=note, notes=notes, tools=tools, servers=servers
            )
        finally:
            store.close()
            if servers is not None:
                servers.close()
        return ChildResult(run=run, output=child_output(run, workflow))

    def _execute(
        self,
        child: _Child,
        workflow: Workflow,
        run: Run,
        store: ProgressStore,
        *,
        note: str | None,
        notes: list[str] | None = None,
        tools: dict[str, Any] | None = None,
        servers: McpServers | None = None,
    ) -> None:
        from ..tools.mcp_wiring import mcp_attempt_notes, notice_missing_tools

        options = self._child_options(child, workflow, servers)
        options.resume_note = note
        tools = (
            tools
            if tools is not None
            else build_tools(workflow, child.options.workspace, skills=bool(child.options.skills))
        )
        engine = Engine(workflow, run, store, child.provider, tools, options)
        # After the engine began the attempt: the tool-list hashes are recorded in it.
        mcp_notes = mcp_attempt_notes(run.attempts, servers) if servers is not None else []
        if notes or mcp_notes:
            engine.attempt_notes([*(notes or []), *mcp_notes])
        for news in mcp_notes[1:]:
            options.reporter.notice(news)
        notice_missing_tools(workflow, servers, options.reporter.notice)
        engine.execute()


def _step_workflow(call: ChildCall, path: Path, run: Run) -> Workflow:
    """The workflow a step's existing child resumes with: the step's, or, when the step now
    names another workflow than the child ran, the child's own."""
    workflow = call.step.child
    recorded = (path.parent / run.workflow.path).resolve()
    if workflow is None or recorded != workflow.path.resolve():
        return load_workflow(recorded)
    return workflow


def _agent_workflow(call: AgentCall, path: Path, run: Run, workflow: Workflow) -> Workflow:
    """The agent a subagent's existing child resumes with: always the file this machine's
    agent folders hold for the called name; a child that ran another file is refused, so a
    progress file cannot choose which agent runs (docs/spec.md 10)."""
    recorded = (path.parent / run.workflow.path).resolve()
    if recorded != call.agent_path.resolve():
        raise NeedsReviewError(
            f"the subagent run {path} (tool call {call.call_id} of step {call.step.id!r}) ran "
            f"the agent file {recorded}, but the agent `{call.agent}` is {call.agent_path} "
            "here; flow runs only the agents this machine's agent folders offer, so it was not "
            "resumed.",
            hint=(
                "Check the file: if it was edited, restore it from version control; else move "
                "the subagent run's folder away and resume to start the call afresh."
            ),
        )
    return workflow


def refuse_child_cycles(run: Run, path: Path) -> None:
    """Raise the positioned error for a ``child`` link, in this run or a run below it, that
    leads back to a run above it; before a resume writes anything (docs/spec.md 10.5)."""
    from ..progress import load_progress

    stack: list[tuple[Run, Path, tuple[Path, ...]]] = [(run, path, ())]
    while stack:
        current, where, above = stack.pop()
        chain = (*above, where)
        if len(chain) > MAX_DEPTH:
            continue
        seen = {os.path.realpath(p) for p in chain}
        for step_id, state in current.steps.items():
            links: list[tuple[str, str | None]] = [(state.child, None)] if state.child else []
            links += [(a.child, call_id) for call_id, a in state.agents.items()]
            for link, call_id in links:
                child_path = where.parent / link
                if os.path.realpath(child_path) in seen:
                    raise child_cycle_error(where, step_id, link, list(chain), call_id)
                if not child_path.is_file():
                    continue
                try:
                    child, _report = load_progress(child_path)
                except FlowError:
                    continue  # the resume that reaches this child reports it
                stack.append((child, child_path, chain))


def question_at(path: Path) -> tuple[Path, int] | None:
    """Where a run's open question waits for a person's answer: the file and line of the
    answer placeholder, in the run's own file or in a child's (a question asked inside a
    sub-workflow); None when there is none."""
    line = answer_line(path)
    if line is not None:
        return path, line
    for child in children_of_file(path):
        if child.status == "awaiting_input":
            return question_at(child.path)
    return None
