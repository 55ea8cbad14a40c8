"""Where a run stands: ``flow status`` and ``flow resume --plan``.

Nothing is started and nothing is written: the run is loaded without its lock, and the plan is
the one ``flow resume`` would make now (docs/spec.md 4.6)::

    report = run_status(".flow/runs/<run-id>/progress.md")
    print(report.state.text(), report.can_resume, report.to_dict()["steps_done"])

Only what a question needs is imported: the tools when a call is in flight, the sub-workflows
when the run has children, ``recovery`` only with ``decide``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import FileNotFoundFlowError, FlowError
from ..progress import load_progress
from ..progress.location import progress_file
from ..progress.model import LoadReport, Run, run_models
from ..progress.state import RunState, run_state
from ..workflow.records import Compaction, Workflow
from ..workflow.toolnames import SUBAGENT_TOOL
from .handoffs import chain_line, chain_view
from .reconcile import plan_resume
from .recorded import check_endpoint, outside_workspace, workflow_for
from .requests import ResumeRequest
from .resumeplan import Choices, ResumePlan, Stop
from .runoptions import RunOptions
from .runview import run_facts

if TYPE_CHECKING:
    from ..progress.children import ChildNode
    from ..tools.allowlists import PermissionsChange
    from ..tools.tool import Tool
    from ..trust import TrustState
    from .compaction import ContextStatus
    from .recovery import Decision


@dataclass
class StatusReport:
    """Where a run stands: for ``flow status``."""

    path: Path
    run: Run
    load: LoadReport
    plan: ResumePlan | None
    workflow_error: str | None
    #: The run's sub-workflow runs, each with its own (docs/spec.md 4.10).
    children: list[ChildNode] = field(default_factory=list)
    #: The recovery decision ``flow resume --plan --decide`` asked for (not applied).
    decision: Decision | None = None
    #: Compactions and the next request's size against the window (docs/spec.md 4.6).
    context: ContextStatus | None = None
    #: How the workflow's allow-lists changed since the run last went on, in words, and
    #: whether they grew (then resume needs --accept-permissions or a yes; docs/spec.md 10.7).
    permissions_change: str | None = None
    permissions_widened: bool = False
    #: Whether the workspace's hooks, MCP configuration and agents would run on resume
    #: (docs/spec.md 10.9).
    trust: TrustState | None = None

    @property
    def stop(self) -> Stop | None:
        """Why ``flow resume`` would not continue the run now (None: it would): the plan's
        ``stop``, the one value resume decides by, or ``NO_WORKFLOW`` without a plan."""
        return Stop.NO_WORKFLOW if self.plan is None else self.plan.stop

    @property
    def nothing_to_do(self) -> bool:
        """The run is completed and no step was set back: ``flow resume`` has nothing to do."""
        return self.run.status == "completed" and not (self.plan.reset if self.plan else [])

    def chain_text(self) -> str | None:
        """The handoff chain in one line, each part's agent and status (None: no chain)."""
        rows = chain_view(self.run)
        return None if rows is None else chain_line(rows)

    def edited_entries_text(self) -> str:
        """The entries edited by hand, in words (``entries 3 and 5 edited by hand``)."""
        from ..progress.render import entries_phrase

        return f"{entries_phrase(self.load.edited_entries)} edited by hand"

    @property
    def priced(self) -> bool:
        """Whether the run's models have a price (given or in the table)."""
        from ..providers.givenprices import from_record
        from ..providers.pricing import priced

        return priced(run_models(self.run), from_record(self.run.config.prices))

    def incomplete_replies(self) -> list[dict[str, Any]]:
        """``{step, entry, why}`` for each step whose final reply is empty or was cut off at
        the token limit: the outputs of completed steps, and the reply the run stopped on."""
        from .conversation import final_answer, incomplete_why

        run = self.run
        by_id = {e.id: e for e in run.transcript}
        found: list[dict[str, Any]] = []
        for step_id, state in run.steps.items():
            entry = by_id.get(state.output_entry) if state.output_entry is not None else None
            if entry is None and step_id == run.cursor.step:
                entry = final_answer(run.transcript, step_id)
            why = incomplete_why(entry) if entry is not None else None
            if entry is not None and why is not None:
                found.append({"step": step_id, "entry": entry.id, "why": why})
        return found

    @property
    def can_resume(self) -> bool:
        """True when ``flow resume`` would continue the run now (nothing stops it)."""
        return self.stop is None

    @property
    def state(self) -> RunState:
        """The effective state (``progress.state``), resumable as the plan says."""
        run = self.run
        return replace(run_state(self.path, run.status, run.reason), resumable=self.can_resume)

    def to_dict(self) -> dict[str, Any]:
        """The stable ``flow status --json`` document (documented in docs/spec.md)."""
        run = self.run
        plan = self.plan
        facts = run_facts(run, self.state).to_dict()
        # The run's facts as every view gives them (runview; the trace id: recorded, or
        # derived from the run id as flow export otel derives it for an older file), and
        # what resume would do.
        shared = (
            "run_id", "status", "reason", "until", "trace_id", "recorded_status",
            "owner_alive", "state", "step", "step_index", "steps_total", "steps_done",
            "percent",
        )  # fmt: skip
        return {
            "path": str(self.path),
            **{key: facts[key] for key in shared},
            "suspensions": sum(1 for a in run.attempts if a.until is not None),
            "can_resume": self.can_resume,
            "resume_from": plan.resume_from if plan else None,
            "blocked": plan.blocked if plan else self.workflow_error,
            "stop": None if self.stop is None else self.stop.value,
            "retry_tools": [f.call_id for f in plan.retry_tools] if plan else [],
            # Of those, the subagent calls: they resume inside their child runs (4.14).
            "resume_agents": [f.call_id for f in plan.retry_tools if f.tool == SUBAGENT_TOOL]
            if plan
            else [],
            "trust": self.trust.to_dict() if self.trust is not None else None,
            "review_tools": [f.call_id for f in plan.review_tools] if plan else [],
            "unsealed_calls": [asdict(c) for c in plan.unsealed_tools] if plan else [],
            "rerun_steps": plan.rerun if plan else [],
            "reset_steps": plan.reset if plan else [],
            "workflow_changed": bool(plan and plan.workflow_changed),
            "changed_steps": [
                {"step": c.step_id, "kind": c.kind, "started": c.started} for c in plan.changes
            ]
            if plan
            else [],
            "edited_entries": list(self.load.edited_entries),
            "edited_inputs": list(self.load.edited_inputs),
            "warnings": list(self.load.warnings),
            "usage": facts["usage"],
            # False: no model of the run has a price, and its cost is unknown (docs/spec.md 5.4).
            "priced": self.priced,
            # Replies that ended a step empty or cut off at the token limit (docs/spec.md 4.1).
            "incomplete_replies": self.incomplete_replies(),
            "attempts": facts["attempts"],
            "models": facts["models"],
            "model_attempts": facts["model_attempts"],
            "last_error": None
            if run.last_error is None
            else {
                "type": run.last_error.type,
                "message": run.last_error.message,
                "at": run.last_error.at,
            },
            "workflow_error": self.workflow_error,
            # The handoff chain, part by part (docs/spec.md 4.13); null for a run without one.
            "handoffs": facts["handoffs"],
            "estimated_input_tokens": plan.estimated_input_tokens if plan else None,
            "worktree": _worktree_status(run, self.path),
            # Tool calls held for a person's decision (docs/spec.md 4.17).
            "approvals": facts["approvals"],
            "permissions": facts["permissions"],
            "steps": facts["steps"],
            **self._tree(),
            "skip_steps": plan.skip if plan else [],
            "decision": self.decision.to_dict() if self.decision else None,
            "permissions_change": None
            if self.permissions_change is None
            else {"change": self.permissions_change, "widened": self.permissions_widened},
            **(
                self.context.to_dict()
                if self.context is not None
                else {"compactions": None, "context": None}
            ),
        }

    def _tree(self) -> dict[str, Any]:
        """``children``, ``usage_total`` and, for a child run, ``parent`` (spec 4.10)."""
        if not self.children and self.run.parent is None:
            # Neither parent nor child: the totals are the run's own, and subworkflows (which
            # imports the engine) stays unimported.
            return {"children": [], "usage_total": self.run.usage.to_dict()}
        from ..progress.children import usage_with_children
        from .subworkflows import is_child

        tree: dict[str, Any] = {
            "children": [c.to_dict() for c in self.children],
            "usage_total": usage_with_children(self.run, self.children).to_dict(),
        }
        if is_child(self.run):
            tree["parent"] = dict(self.run.parent or {})
        return tree


def _worktree_status(run: Run, path: Path) -> dict[str, Any] | None:
    if run.worktree is None:
        return None
    from ..gitworktree import worktree_summary

    return worktree_summary(run.worktree, path)


def _permissions_change(run: Run, workflow: Workflow) -> PermissionsChange | None:
    """How the allow-lists changed since the run last went on, as resume will say it."""
    recorded = run.config.permissions
    front = workflow.front_matter
    if not (
        recorded.commands or recorded.hosts or "allow-commands" in front or "allow-fetch" in front
    ):
        return None  # nothing allowed then or now: the tools package need not load
    from ..tools.allowlists import allow_lists, permissions_change

    return permissions_change(recorded, allow_lists(workflow))


def run_status(
    progress_path: str | Path,
    options: RunOptions = RunOptions(),
    request: ResumeRequest = ResumeRequest(),
) -> StatusReport:
    """Load a run without locking it and work out what ``flow resume`` would do with
    ``options`` and ``request`` (its choices, a moved workflow, ``decide``).

    Nothing is started: an MCP call in flight is judged by what was recorded when it started
    (whether it may run again, and on which server), as resume judges it.
    With ``request.decide`` an ambiguous state is put to the model (the options' provider,
    model and base URL, as resume would use them) and the plan shows its decision; nothing is
    written.
    """
    path = progress_file(progress_path)
    if not path.exists():
        raise FileNotFoundFlowError(f"no progress file at {path}.", path=path)
    run, report = load_progress(path)
    workflow_path, choices, decide = request.workflow_path, request.choices, request.decide
    if decide:
        # Refused outright, as by resume: a decision would send the run to that endpoint.
        check_endpoint(run, path, options.provider, options.base_url)
    plan: ResumePlan | None = None
    problem: str | None = None
    decision: Decision | None = None
    settings: Compaction | None = None
    change: PermissionsChange | None = None
    root = Path(options.workspace) if options.workspace else Path.cwd()
    try:
        wf = workflow_for(
            run, path, workflow_path, workspace=options.root(), agent_dirs=options.agent_dirs
        )
        settings = wf.compaction
        change = _permissions_change(run, wf)
        outside = None if workflow_path is not None else outside_workspace(run, path, root)
        if outside:
            report.warnings.append(outside)
        if run.worktree is not None:
            from ..gitworktree import worktree_folder

            root = worktree_folder(run.worktree, path)
        tools = _tools_in_flight(run, wf, root, options)
        plan = plan_resume(run, wf, report, tools, choices, workspace=root)
        # recovery is imported only to decide: plain `flow status` does without it.
        if decide and _wants_decision(wf, choices):
            plan, decision = _decided(run, path, wf, report, tools, plan, choices, options, root)
    except FlowError as error:
        problem = str(error)
    _block_as_resume_would(plan, run, path)
    from ..trust import trust_state
    from .compaction import context_status

    children: list[ChildNode] = []
    if any(state.child or state.agents for state in run.steps.values()):
        # Reading the children loads each child's file; a run without children need not.
        from ..progress.children import child_runs

        children = child_runs(run, path)
    archived = plan.archive_from if plan is not None else None
    kept = run.transcript if archived is None else run.transcript[: archived - 1]
    return StatusReport(
        path=path,
        run=run,
        load=report,
        plan=plan,
        workflow_error=problem,
        children=children,
        decision=decision,
        # Without the workflow the model's window from the table is still known.
        context=context_status(kept, settings or Compaction(), run.config.model),
        permissions_change=change.line() if change is not None else None,
        permissions_widened=change is not None and change.widened,
        trust=trust_state(root, options.trust_in(root)),
    )


def _tools_in_flight(
    run: Run, workflow: Workflow, root: Path, options: RunOptions
) -> dict[str, Tool]:
    """The workflow's tools when a call is in flight (resume judges it by its tool); else
    none, with only the check that building them makes (the commands' folders)."""
    tools: dict[str, Tool] = {}
    if run.in_flight:
        from ..tools import build_tools

        # MCP calls in flight are judged by their start records: no server is started.
        tools = build_tools(workflow, root, skills=options.skills)
    else:
        # Only a call in flight needs its tool (is it idempotent?); without one the tool
        # modules stay unimported and only the check that building them makes is made.
        from ..workflow.commands import check_cwd

        for decl in workflow.commands.values():
            check_cwd(decl, root)
    return tools


def _decided(
    run: Run,
    path: Path,
    workflow: Workflow,
    report: LoadReport,
    tools: dict[str, Tool],
    plan: ResumePlan,
    choices: Choices,
    options: RunOptions,
    root: Path,
) -> tuple[ResumePlan, Decision | None]:
    """``flow status --decide``: the model's decision on an ambiguous state (the options'
    provider, model and base URL), and the plan made again with its choices unless it stops."""
    from .recovery import model_decision

    decision = model_decision(
        run,
        path,
        plan,
        workflow,
        provider=options.provider,
        model=options.model,
        base_url=options.base_url,
    )
    if decision is not None and not decision.stops:
        plan = plan_resume(run, workflow, report, tools, decision.choices(choices), workspace=root)
    return plan, decision


def _block_as_resume_would(plan: ResumePlan | None, run: Run, path: Path) -> None:
    """Block ``plan`` where resume would refuse the run: a discarded worktree, a live run."""
    if plan is not None and run.worktree is not None and run.worktree.state == "discarded":
        # Resume refuses such a run (its files are gone); status says so the same way.
        plan.block(Stop.DISCARDED, "the run's worktree and branch were discarded (flow discard)")
    live = run_state(path, run.status, run.reason)
    if plan is not None and live.owner_alive:
        # Resume would fail on the lock (exit 6): status says so before anyone tries.
        plan.block(Stop.LIVE, f"the run is live ({live.reason}); wait for it to stop, or stop it")


def _wants_decision(workflow: Workflow, choices: Choices) -> bool:
    """Whether ``flow status --decide`` has a decision to ask for (recovery loaded only then)."""
    from .recovery import wants_decision

    return wants_decision(workflow, choices, decide=True)
