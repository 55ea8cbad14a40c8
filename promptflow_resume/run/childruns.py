"""Child runs: a workflow step's sub-workflow and a subagent call's agent, each run (or
resumed) by the caller's ``ChildRunner`` as a run of its own, its usage rolled up into the
parent's and its stop the parent's stop.

    children = ChildRuns(workflow, run, store, provider, options, points, budgets, snapshots)
    result = children.workflow_result(step, state, mine)     # the step's output entry
    children.run_subagent(step, call, agent, task)           # a subagent call's result
"""

from __future__ import annotations

import json
import time
from typing import NoReturn

from ..base import faults
from ..base.clock import ms_since
from ..base.errors import NeedsReviewError
from ..progress import ProgressStore
from ..progress.entry import EntryMeta
from ..progress.model import AgentChild, Entry, ErrorInfo, Run, StepState
from ..providers.provider import Provider
from ..tools.subagent import OfferedAgent, SubagentTool
from ..tools.tool import Tool, ToolResult
from ..workflow import step_workflow_inputs
from ..workflow.records import Step, Workflow
from ..workflow.toolnames import SUBAGENT_TOOL
from .budgets import Budgets
from .checkpoints import Checkpoints, FileSnapshots
from .conversation import step_entries
from .engineoptions import AgentCall, ChildCall, ChildRunner, EngineOptions
from .runends import RunEnds
from .stepoutputs import step_outputs

#: The tool name of a workflow step's call and result entries (docs/spec.md 4.10).
WORKFLOW_TOOL = "workflow"


class ChildRuns:
    """Starts and resumes the child runs of one attempt of a run, through its runner."""

    def __init__(
        self,
        workflow: Workflow,
        run: Run,
        store: ProgressStore,
        provider: Provider,
        options: EngineOptions,
        points: Checkpoints,
        budgets: Budgets,
        snapshots: FileSnapshots,
    ) -> None:
        self.workflow = workflow
        self.run = run
        self.store = store
        self.provider = provider
        self.options = options
        self.reporter = options.reporter
        self._points = points
        self._budgets = budgets
        self._snapshots = snapshots

    def workflow_result(self, step: Step, state: StepState, mine: list[Entry]) -> Entry:
        """A step that runs another workflow as a child run; its final output is the step's.

        The call entry and the child's location are durable before the child's file exists,
        so a resumed parent always finds its child (or starts it); the child itself resumes at
        message granularity like any run. Nothing of the child is re-run: a completed child is
        only read back.
        """
        runner = self.options.children
        if runner is None:
            raise NeedsReviewError(
                f"step {step.id!r} runs the workflow {step.workflow}, which this caller of the "
                "engine does not support.",
                hint="Run the workflow with `flow run` / `flow resume`.",
            )
        call_id = f"{step.id}-{WORKFLOW_TOOL}"
        call = next((e for e in mine if e.role == "tool_call" and e.call_id == call_id), None)
        if call is None:
            # A budget already used up stops the run before the child exists.
            self._budgets.check()
            values = step_workflow_inputs(
                self.workflow,
                step,
                inputs=self.run.inputs,
                step_outputs=step_outputs(self.workflow, self.run),
                editor=self.options.editor,
            )
            # A step that starts (again) begins a new child: an earlier one is set aside first.
            location = runner.location(self.store.path, step.id)
            runner.set_aside(self.store.path, location)
            state.child = location
            arguments = json.dumps(
                {"workflow": step.workflow, "inputs": values},
                sort_keys=True,
                ensure_ascii=False,
                default=str,
            )
            call = self._points.entry(
                "tool_call", arguments, step.id, call_id=call_id, tool=WORKFLOW_TOOL
            )
            self._points.append([call])
        result = next(
            (
                e
                for e in step_entries(self.run.transcript, step.id)
                if e.role == "tool_result" and e.call_id == call_id
            ),
            None,
        )
        if result is None:
            result = self._run_child(runner, step, state, call)
        return result

    def _run_child(self, runner: ChildRunner, step: Step, state: StepState, call: Entry) -> Entry:
        """Run or resume the step's child until it stops; its final output is the result."""
        run = self.run
        if state.child is None:  # removed by hand: the step's child goes where it always goes
            state.child = runner.location(self.store.path, step.id)
        try:
            recorded = json.loads(call.content)
            inputs = recorded["inputs"] if isinstance(recorded, dict) else None
        except (ValueError, KeyError):
            inputs = None
        if not isinstance(inputs, dict):
            inputs = step_workflow_inputs(
                self.workflow,
                step,
                inputs=run.inputs,
                step_outputs=step_outputs(self.workflow, self.run),
                editor=self.options.editor,
            )
        self._budgets.check_deadline()
        began = time.monotonic()
        faults.point("engine.child_started")
        left = self._budgets.seconds_left()
        self.reporter.notice(f"step {step.id}: runs the workflow {step.workflow} ({state.child})")
        outcome = runner.run(
            ChildCall(
                parent_path=self.store.path,
                parent=run,
                step=step,
                child=state.child,
                inputs=inputs,
                budget=self._budgets.left_for_child(state.usage),
                timeout=left,
                provider=self.provider,
                options=self.options,
            )
        )
        faults.point("engine.child_returned")
        self._budgets.roll_up(state, outcome.run.usage)
        child = outcome.run
        if child.status != "completed" or outcome.output is None:
            self._stopped(child, step, f"the sub-workflow of step {step.id!r} ({state.child})")
        entry = self._points.entry(
            "tool_result",
            outcome.output,
            step.id,
            call_id=call.call_id,
            tool=WORKFLOW_TOOL,
            meta=EntryMeta(ms=ms_since(began), kind="workflow"),
        )
        self._snapshots.due(call)
        self._points.append([entry])
        self._snapshots.take()
        return entry

    def keep_subagent_child(self, step: Step, call: Entry, tool: Tool | None) -> None:
        """A subagent call that has a child run is answered by that child or not at all: when
        the agent it names is not offered here now, the run stops for review instead of
        giving the call an error and leaving the child's work behind."""
        state = self.run.steps.get(step.id)
        link = state.agents.get(call.call_id or "") if state is not None else None
        if link is None or call.tool != SUBAGENT_TOOL:
            return
        if isinstance(tool, SubagentTool):
            try:
                arguments = json.loads(call.content or "{}")
            except (ValueError, RecursionError):
                arguments = None
            if isinstance(arguments, dict) and isinstance(tool.check(arguments), OfferedAgent):
                return
        raise NeedsReviewError(
            f"tool call {call.call_id} of step {step.id!r} has a subagent run ({link.child}, "
            f"agent {link.agent}), but the agent its arguments name is not offered here now "
            "(subagents come from the --agents folders, the workspace's and the user's agent "
            "folders); nothing was run.",
            hint="Resume with the --agents DIR the run started with, or restore the agent file.",
        )

    def _stopped(self, child: Run, step: Step, where: str) -> NoReturn:
        """A child run (a sub-workflow's or a subagent's) stopped before it completed: its
        error becomes the parent's, and the parent stops with the child's status (a suspended
        child's window too, so the parent waits for the same one)."""
        if child.last_error is not None:
            self.run.last_error = ErrorInfo(
                type=child.last_error.type,
                message=child.last_error.message,
                at=child.last_error.at,
                step=step.id,
            )
        raise RunEnds(child.status, f"in {where}: {child.reason or child.status}", child.until)

    def link_subagent(self, step: Step, call: Entry, agent: OfferedAgent) -> None:
        """Record where the call's child run goes (saved with its start record), so a
        resumed parent finds the child and never starts it again."""
        runner = self.options.children
        state = self.run.steps.setdefault(step.id, StepState())
        call_id = call.call_id or ""
        if runner is not None and call_id not in state.agents:
            where = runner.agent_location(self.store.path, step.id, call_id)
            # A step run again (rewound, changed) can repeat a call id (scripted and replayed
            # replies do): the earlier call's child is set aside, never resumed for this one.
            runner.set_aside(self.store.path, where)
            state.agents[call_id] = AgentChild(agent=agent.name, child=where)

    def run_subagent(self, step: Step, call: Entry, agent: OfferedAgent, task: str) -> ToolResult:
        """The call's child run, started or resumed until it stops; its final answer is the
        result. A child that stopped stops the parent too, with the call still in flight, so
        the next resume continues inside the child."""
        runner = self.options.children
        state = self.run.steps[step.id]
        link = state.agents[call.call_id or ""]
        if runner is None:  # the tool is offered only with a runner; a guard for callers
            return ToolResult("error: subagents cannot run here.", is_error=True)
        self._budgets.check_deadline()
        faults.point("engine.subagent_started")
        left = self._budgets.seconds_left()
        self.reporter.notice(f"step {step.id}: runs the agent {agent.name} ({link.child})")
        outcome = runner.run_agent(
            AgentCall(
                parent_path=self.store.path,
                parent=self.run,
                step=step,
                call_id=call.call_id or "",
                agent=agent.name,
                agent_path=agent.path,
                child=link.child,
                task=task,
                budget=self._budgets.left_for_child(link.usage),
                timeout=left,
                provider=self.provider,
                options=self.options,
            )
        )
        faults.point("engine.subagent_returned")
        self._budgets.roll_up_subagent(state, link, outcome.run.usage)
        child = outcome.run
        if child.status != "completed" or outcome.output is None:
            self._stopped(
                child, step, f"the subagent {agent.name} called in step {step.id!r} ({link.child})"
            )
        return ToolResult(outcome.output)
