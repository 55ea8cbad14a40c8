"""Resuming a run: from its progress file, a ``ResumeRequest`` and the ``RunOptions`` to the
next attempt (``reconcile`` has the rules of what is reused, re-run or refused).

A resume goes in four named steps, each finished before the next begins:

1. ``_check``: before anything starts or is written, refuse what must not go on (a child's
   own file, a cycle of runs, an endpoint only the file chose, unsent model parameters, allow-
   lists that grew without consent) and find the workflow and the folder the run works in.
2. ``_plan``: what resume will do (``reconcile.plan_resume``), with the run's model deciding
   an ambiguous state when asked (``recovery``), or a person on a terminal.
3. ``_apply``: apply the plan to the run, record a decision, take ``--set`` and the
   overrides, and collect the notes the attempt shows and keeps.
4. ``_go_on``: the attempt itself (``attempt.run_attempt``), the path a start takes too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import (
    EXIT_OK,
    FileNotFoundFlowError,
    InputError,
    NeedsReviewError,
    PermissionsNotConfirmedError,
    SuspendedError,
)
from ..base.redact import Redactor
from ..progress import ProgressStore
from ..progress.location import progress_file
from ..progress.model import AllowLists, EditNote, LoadReport, Run, RunStatus
from ..progress.render import entries_phrase
from ..workflow import resolve_inputs
from ..workflow.records import Workflow
from .attempt import Attempt, Outcome, children, engine_options, exit_code_for, run_attempt
from .hooks import hooks_changed, load_run_hooks
from .planapply import apply_plan, check_servers, resume_note
from .reconcile import plan_resume
from .recorded import check_endpoint, check_params, outside_workspace, run_provider, workflow_for
from .requests import ResumeRequest, stringify
from .resumeplan import ChangeDecision, Choices, ResumePlan, Stop
from .runoptions import Permissions, RunOptions

if TYPE_CHECKING:
    from ..tools.mcp import McpServers
    from ..tools.mcp_records import McpConfig
    from ..tools.tool import Tool
    from .recovery import Decision


@dataclass
class _Resume:
    """One resume as its steps fill it in."""

    path: Path
    run: Run
    store: ProgressStore
    report: LoadReport
    request: ResumeRequest
    options: RunOptions
    workflow: Workflow | None = None
    root: Path = Path()
    allowed_now: AllowLists | None = None
    #: Notes found by the checks (workspace, permissions, worktree), shown after the plan's.
    found: list[str] = field(default_factory=list)
    tools: dict[str, Tool] = field(default_factory=dict)
    servers: McpServers | None = None
    secrets: tuple[str, ...] = ()
    mcp: McpConfig | None = None
    choices: Choices = field(default_factory=Choices)
    plan: ResumePlan | None = None
    decision: Decision | None = None
    deciding: bool = False

    @property
    def wf(self) -> Workflow:
        assert self.workflow is not None, "set by _check"
        return self.workflow

    def redactor(self) -> Redactor:
        """Secrets from the environment and the MCP configuration's inputs."""
        return Redactor.from_environment(extra_values=self.secrets)

    def replan(self, choices: Choices) -> ResumePlan:
        """The plan for ``choices`` (kept as the plan)."""
        self.plan = plan_resume(
            self.run, self.wf, self.report, self.tools, choices, workspace=self.root
        )
        return self.plan


def resume(progress_path: str | Path, options: RunOptions, request: ResumeRequest) -> Outcome:
    """Continue a stopped run from its checkpoint until it completes or stops again."""
    path = progress_file(progress_path)
    if not path.exists():
        raise FileNotFoundFlowError(f"no progress file at {path}.", path=path)
    store, run, report = ProgressStore.open(path)
    state = _Resume(path, run, store, report, request, options, choices=request.choices)
    try:
        _check(state)
        _start_tools(state)
        plan = _plan(state)
        if plan.stop is Stop.COMPLETED:
            return Outcome(
                run=run,
                path=path,
                exit_code=EXIT_OK,
                notes=["already completed"],
                already_completed=True,
            )
        stopped = (run.status, run.reason)
        notes = _apply(state, plan)
        _go_on(state, plan, notes, stopped)
    finally:
        store.close()
        if state.servers is not None:
            state.servers.close()
    return Outcome(run=run, path=path, exit_code=exit_code_for(run), resumed=True, notes=notes)


def seconds_to_window(run: Run) -> float:
    """For a ``suspended`` run, the seconds until its provider's window opens (0: open now,
    or the run is not suspended)."""
    if run.status != "suspended" or not run.until:
        return 0.0
    from ..base.clock import parse_iso, wall

    return max(0.0, parse_iso(run.until).timestamp() - wall())


def refuse_early_resume(run: Run, path: Path) -> None:
    """A run suspended at a quota window does not go on before the window opens: the request
    would only be refused again (docs/spec.md 4.18). Nothing is sent, nothing written."""
    left = seconds_to_window(run)
    if left <= 0:
        return
    why = (run.reason or "").removeprefix(f"until {run.until}: ").rstrip(".")
    raise SuspendedError(
        f"the run is suspended until {run.until} (in {left:.0f} s): "
        f"{why or 'the provider asked to wait'}. Nothing was sent.",
        path=path,
        hint="Run `flow resume --wait` to wait for the window and continue, or resume after "
        f"{run.until}.",
    )


def _check(state: _Resume) -> None:
    """The checks made before anything starts or is written."""
    from .subworkflows import refuse_child_cycles, refuse_direct_resume

    run, path, options = state.run, state.path, state.options
    refuse_early_resume(run, path)
    refuse_direct_resume(run, path)
    refuse_child_cycles(run, path)
    # --decide, ``recovery: model`` and the run itself all send to the endpoint this resume
    # ends up with.
    check_endpoint(run, path, options.provider, options.base_url)
    moved = state.request.workflow_path
    wf = state.workflow = workflow_for(
        run, path, moved, workspace=options.root(), agent_dirs=options.agent_dirs
    )
    check_params(run, wf, path)
    state.allowed_now, permissions_note = check_permissions(run, wf, path, options.permissions)
    state.root = options.root()
    outside = None if moved is not None else outside_workspace(run, path, state.root)
    tree_note = None
    if run.worktree is not None:
        from ..gitworktree import attach_worktree

        state.root, tree_note = attach_worktree(run.worktree, path)
    state.found = [note for note in (outside, permissions_note, tree_note) if note]
    # Hooks come from the workspace and --hooks, never from the file; a bad one stops here.
    state.found += hooks_changed(run, load_run_hooks(state.root, options, state.wf))


def _start_tools(state: _Resume) -> None:
    """The workflow's tools, with the MCP servers it names started."""
    from ..tools import build_tools
    from ..tools.mcp_wiring import start_mcp

    options = state.options
    state.tools = build_tools(state.wf, state.root, skills=options.skills)
    mcp = options.mcp_for(state.wf, state.root)
    state.secrets = tuple(mcp.secrets) if mcp else ()
    state.mcp = mcp
    state.servers = start_mcp(state.wf, state.root, state.tools, mcp, state.path, state.redactor())


def _plan(state: _Resume) -> ResumePlan:
    """What resume will do: the plan, with the model's decision or a person's answer."""
    from .recovery import model_decision, wants_decision

    request, options = state.request, state.options
    plan = state.replan(state.choices)
    state.deciding = wants_decision(state.wf, state.choices, decide=request.decide)
    if state.deciding:
        state.decision = model_decision(
            state.run,
            state.path,
            plan,
            state.wf,
            provider=options.provider,
            model=options.model,
            base_url=options.base_url,
            record=options.record,
        )
        if state.decision is not None:
            plan = state.replan(state.decision.choices(state.choices))
    confirm = request.confirm_change
    if plan.decision is ChangeDecision.ASK and confirm is not None and not state.deciding:
        answer = confirm(plan)
        if answer is not None:
            state.choices = answer
            plan = state.replan(answer)
    return plan


def _apply(state: _Resume, plan: ResumePlan) -> list[str]:
    """Apply the plan and the overrides to the run; the notes of what changed."""
    run, store, decision = state.run, state.store, state.decision
    if decision is not None and decision.stops and plan.stop is not Stop.NEEDS_REVIEW:
        # Ask a person about a failed step or a workflow change: nothing else changes.
        _stop_for_review(state, decision, plan, status=True)
    check_servers(plan, state.tools)
    try:
        notes = apply_plan(run, state.wf, plan, archive=store.write_sidecar)
    except NeedsReviewError:
        if decision is None:
            store.checkpoint(run)
            raise
        if decision.stops:
            _stop_for_review(state, decision, plan, status=False)
        # Recorded whatever it chose: a decision about a workflow change can leave a call
        # in flight that the next ``--decide`` is asked about.
        _record(state, decision)
        raise
    if decision is not None:
        notes.extend(decision.notes())
        _record_decision(state, decision)
    if (
        plan.answered_tools
        or plan.applied_tools
        or plan.continued_tools
        or plan.unsealed_choice
        or decision is not None
    ):
        # Entries changed in place (a hand-written result is no longer an error) or added by
        # the plan (an edit found applied): the journal only appends, so fold now.
        store.checkpoint(run)
    notes += _apply_set(run, state.wf, state.request.set_values)
    return notes + _found_notes(state)


def _record_decision(state: _Resume, decision: Decision) -> None:
    from .recovery import record_decision

    record_decision(state.run, decision, state.redactor())


def _record(state: _Resume, decision: Decision) -> None:
    """A decision that did not stop the run, kept with its attempt before a review stop."""
    from .recovery import decision_attempt

    _record_decision(state, decision)
    decision_attempt(state.run, decision)
    state.store.checkpoint(state.run)


def _stop_for_review(state: _Resume, decision: Decision, plan: ResumePlan, *, status: bool) -> None:
    """The model asked for a person: record its decision, stop with ``needs_review``."""
    from .recovery import decision_attempt

    run = state.run
    _record_decision(state, decision)
    if status:
        run.status = "needs_review"
    run.reason = reason = decision.stop_reason(plan)
    decision_attempt(run, decision)
    state.store.checkpoint(run)
    raise NeedsReviewError(reason) from None


def _found_notes(state: _Resume) -> list[str]:
    """Notes on what changed around the run: the checks', hand edits, instructions."""
    report = state.report
    notes = list(state.found)
    if report.edited_entries:
        notes.append(EditNote(f"{entries_phrase(report.edited_entries)} edited by hand"))
    if state.options.instructions:
        notes += _instructions_changed(state.run, state.root, state.options.file)
    if state.options.skills:
        notes += _skills_changed(state.run, state.root, state.options)
    notes.extend(
        EditNote(f"input edited by hand: {change} (used by every prompt not answered yet)")
        for change in report.edited_inputs
    )
    return notes


def _go_on(
    state: _Resume, plan: ResumePlan, notes: list[str], stopped: tuple[RunStatus, str | None]
) -> None:
    """The attempt: the overrides in the run's configuration, then the engine."""
    run, options = state.run, state.options
    _override_config(run, options)
    assert state.allowed_now is not None, "set by _check"
    given = options.permissions
    run.config.permissions = state.allowed_now.with_given(given.commands, given.hosts)
    redactor = state.redactor()
    provider = run_provider(run, state.path, options, redactor)
    engine = engine_options(state.wf, state.root, redactor, options, state.mcp)
    # The resume note says why the run stopped: as it was before the plan was applied.
    engine.resume_note = resume_note(
        replace(run, status=stopped[0], reason=stopped[1]), plan, state.wf
    )
    attempt = Attempt(
        state.wf,
        run,
        state.store,
        provider,
        state.tools,
        state.servers,
        engine,
        children(options, state.choices),
    )
    run_attempt(attempt, notes=notes, decision=state.decision)


def _override_config(run: Run, options: RunOptions) -> None:
    """``--provider``, ``--model``, ``--base-url`` and the limits, over the recorded ones."""
    if options.provider is not None:
        run.config.provider = options.provider
    if options.model is not None:
        from ..providers.models import resolve_model

        # One model, no fallbacks: the run keeps to it from now on, as to any --model. A
        # name is mapped as a new run maps it, and brings its provider unless --provider.
        ref = resolve_model(options.model)
        run.config.model = ref.model
        if options.provider is None and ref.runnable and ref.provider is not None:
            run.config.provider = ref.provider
        if run.workflow.handoffs is not None:
            run.workflow.handoffs.model = ref.model  # wins over every part's own model
        run.config.models = []
    if options.base_url is not None:
        run.config.base_url, hidden = Redactor.from_environment().redact(options.base_url)
        if hidden and "config.base_url" not in run.redactions.where:
            run.redactions.count += hidden
            run.redactions.where.append("config.base_url")
    run.config.budget = options.limits.apply(run.config.budget)
    run.config.prices = options.limits.apply_prices(run.config.prices)


def check_permissions(
    run: Run, workflow: Workflow, progress_path: Path, permissions: Permissions
) -> tuple[AllowLists, str | None]:
    """The workflow's allow-lists now, and one line on how they changed since the run last
    went on (None when they did not). Lists that grew are taken on only with
    ``--accept-permissions`` or a yes on the terminal; otherwise ``PermissionsNotConfirmedError``
    (docs/spec.md 10.7)."""
    from ..tools.allowlists import allow_lists, permissions_change

    now = allow_lists(workflow)
    change = permissions_change(run.config.permissions, now)
    if change is None:
        return now, None
    if change.widened and not permissions.accept:
        question = f"flow: {change.line()}. Go on with them? [y]es / [n]o: "
        if permissions.ask is None or permissions.ask(question) == "no":
            raise PermissionsNotConfirmedError(
                f"{change.line()}. The run was not resumed: a workflow that lets the model do "
                "more than before goes on only when you confirm it (the progress file records "
                "what it allowed when the run last went on).",
                path=workflow.path,
                field="$.allow-fetch" if not change.added_commands else "$.allow-commands",
                hint="Check the change (e.g. in the commit or pull request that made it), then "
                "resume with --accept-permissions, or remove it from the workflow.",
            )
    return now, change.line()


def _apply_set(run: Run, workflow: Workflow, assignments: Mapping[str, str]) -> list[str]:
    """``--set name=value``: override variables for the rest of the run."""
    notes: list[str] = []
    if not assignments:
        return notes
    typed = resolve_inputs(workflow, {**stringify(run.inputs), **assignments}, ask=None)
    for name in assignments:
        if name not in typed:
            raise InputError(f"--set {name}: the workflow has no input named {name!r}.")
        run.inputs[name] = typed[name]
        notes.append(f"--set {name}")
    return notes


def _instructions_changed(run: Run, root: Path, file: str | Path | None) -> list[str]:
    """A note when the custom instructions recorded in the run's first entry changed since."""
    from ..workflow.instructions import (
        HEADING,
        changed_instructions,
        find_instructions,
        recorded_instructions,
    )

    first = run.transcript[0] if run.transcript else None
    if first is None or first.role != "system" or HEADING not in first.content:
        return []
    found = find_instructions(root, Path(file) if file else None)
    changes = changed_instructions(recorded_instructions(first.content), found)
    if not changes:
        return []
    return [
        "custom instructions changed since the run started: "
        + ", ".join(changes)
        + "; the run goes on with the ones recorded in its first entry"
    ]


def _skills_changed(run: Run, root: Path, options: RunOptions) -> list[str]:
    """Notes on skills listed or loaded in the transcript that changed since (spec 1.11)."""
    from ..workflow.skillset import LOAD_TOOL, find_skills, skill_notes

    first = run.transcript[0] if run.transcript else None
    system = first.content if first is not None and first.role == "system" else None
    loads = [
        (e.id, e.content)
        for e in run.transcript
        if e.role == "tool_result" and e.tool == LOAD_TOOL and not e.is_error
    ]
    if system is None and not loads:
        return []
    found = find_skills(root, [Path(d) for d in options.skill_dirs])
    return skill_notes(system, loads, found)
