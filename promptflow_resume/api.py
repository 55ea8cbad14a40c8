"""The library API: start a run, resume one, ask where one stands.

The ``flow`` command is a thin layer over these functions; other programs and the tests call
them directly (``tests/guards/test_doctests.py`` runs this example from a folder holding
``workflows/``; ``echo`` is the offline dry-run provider):

    >>> from promptflow_resume import Limits, resume_run, run_status, start_run
    >>> outcome = start_run("workflows/release-notes.prompt.md", provider="echo")
    >>> outcome.run.status, outcome.exit_code
    ('completed', 0)
    >>> again = resume_run(outcome.path, limits=Limits(max_cost=1.0))  # nothing left to run
    >>> again.run.status, again.exit_code
    ('completed', 0)
    >>> run_status(outcome.path).to_dict()["steps_done"]  # the workflow's three steps
    3
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import faults
from .base.clock import now_iso
from .base.errors import (
    EXIT_AWAITING_INPUT,
    EXIT_INTERRUPTED,
    EXIT_NEEDS_REVIEW,
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_RUN_INCOMPLETE,
    FileNotFoundFlowError,
    InputError,
    NeedsReviewError,
    PermissionsNotConfirmedError,
    ProviderError,
    ProviderSetupError,
    ReplayMismatchError,
)
from .base.paths import relative_path
from .base.redact import Redactor
from .base.runids import id_from_folder, new_run_id

# Re-exported: compacting a run by hand is compaction's, and these names were always here.
from .compaction import CompactOutcome as CompactOutcome
from .compaction import compact_run as compact_run
from .events import Reporter
from .progress import ProgressStore
from .progress.location import progress_file
from .progress.model import (
    AllowLists,
    Cursor,
    Run,
    RunConfig,
    StepState,
    WorkflowRef,
    WorktreeRef,
)
from .progress.render import entries_phrase
from .progress.seal import Key, mark_written_here
from .reconcile import (
    ChangeDecision,
    Choices,
    ResumePlan,
    Stop,
    apply_plan,
    check_servers,
    plan_resume,
    resume_note,
)
from .recorded import (
    check_endpoint,
    check_params,
    make_provider,
    outside_workspace,
    workflow_for,
)

# Re-exported: where a run stands is its own module, and these names were always here.
from .status import StatusReport as StatusReport
from .status import run_status as run_status
from .workflow import (
    editor_variables,
    load_inputs_file,
    load_workflow,
    resolve_inputs,
)
from .workflow.model import InputDecl, Workflow

if TYPE_CHECKING:
    from .engine import EngineOptions
    from .providers.base import Provider
    from .recovery import Decision
    from .subworkflows import SubworkflowRunner
    from .tools.base import Tool
    from .tools.consent import Asker, Consent
    from .tools.mcp import McpServers

#: Where runs live unless ``--progress`` says otherwise (relative to the working directory).
RUNS_DIR = Path(".flow") / "runs"

_EXIT_BY_STATUS = {
    "completed": EXIT_OK,
    "interrupted": EXIT_INTERRUPTED,
    "needs_review": EXIT_NEEDS_REVIEW,
    "awaiting_input": EXIT_AWAITING_INPUT,
}


@dataclass
class Outcome:
    """How a ``start_run`` / ``resume_run`` call ended."""

    run: Run
    path: Path
    #: The process exit code the CLI uses for this outcome.
    exit_code: int
    resumed: bool = False
    notes: list[str] = field(default_factory=list)
    #: ``resume_run`` found the run completed with nothing set back: nothing was done.
    already_completed: bool = False


@dataclass
class Limits:
    """Budget overrides from the command line (None = keep the workflow's or checkpoint's)."""

    max_cost: float | None = None
    max_tokens: int | None = None
    max_turns: int | None = None
    timeout: float | None = None

    def apply(self, budget: dict[str, Any]) -> dict[str, Any]:
        """The budget with these overrides applied."""
        merged = dict(budget)
        for key, value in (
            ("max_cost_usd", self.max_cost),
            ("max_tokens", self.max_tokens),
            ("max_turns", self.max_turns),
        ):
            if value is not None:
                merged[key] = value
        return merged


#: ``last_error.type`` of a run that failed because of its model provider.
_PROVIDER_ERRORS = frozenset(
    c.__name__ for c in (ProviderError, ProviderSetupError, ReplayMismatchError)
)


def exit_code_for(run: Run) -> int:
    """The documented exit code for a run's status (a provider's failure has its own)."""
    error = run.last_error
    if run.status == "failed" and error is not None and error.type in _PROVIDER_ERRORS:
        return EXIT_PROVIDER
    return _EXIT_BY_STATUS.get(run.status, EXIT_RUN_INCOMPLETE)


def _run_id_for(progress_path: Path, workflow: Workflow) -> str:
    """The folder's name in the default layout (``.flow/runs/<run-id>/``), else a new id."""
    return id_from_folder(progress_path) or new_run_id(workflow.name)


def _budget_dict(workflow: Workflow) -> dict[str, Any]:
    budget = workflow.budget
    return {
        key: value
        for key, value in (
            ("max_tokens", budget.max_tokens),
            ("max_cost_usd", budget.max_cost_usd),
            ("max_turns", budget.max_turns),
            ("max_seconds", budget.max_seconds),
        )
        if value is not None
    }


def _engine_options(
    workflow: Workflow,
    workspace: Path,
    redactor: Redactor,
    *,
    reporter: Reporter | None,
    limits: Limits,
    file: str | Path | None,
    permissions: Permissions,
    selection: str | None,
    instructions: bool,
) -> EngineOptions:
    """The engine's options for one attempt, from the arguments ``start_run`` and
    ``resume_run`` both take: one place turns them into consent, editor variables and the
    custom-instructions block."""
    # The engine is loaded by the commands that run one (not by status, list, log ...).
    from .engine import EngineOptions

    return EngineOptions(
        workspace=workspace,
        reporter=reporter or Reporter(),
        redactor=redactor,
        timeout=limits.timeout,
        editor=editor_variables(workspace, Path(file) if file else None, selection),
        consent=permissions.consent(workflow),
        instructions=_instructions(workspace, file) if instructions else "",
    )


def _instructions(root: Path, file: str | Path | None) -> str:
    from .workflow.instructions import find_instructions, instructions_block

    return instructions_block(find_instructions(root, Path(file) if file else None))


def _instructions_changed(run: Run, root: Path, file: str | Path | None) -> list[str]:
    """A note when the custom instructions recorded in the run's first entry changed since."""
    from .workflow.instructions import (
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


@dataclass(frozen=True)
class Permissions:
    """What the person running flow allows model-chosen commands and fetches to do.

    ``commands`` are ``--allow-commands`` patterns, ``hosts`` ``--allow-fetch`` hosts, and
    ``ask`` asks on a terminal (None without one). The workflow's ``allow-commands:`` and
    ``allow-fetch:`` lists are added when a run starts or resumes; nothing comes from a
    progress file (which records the workflow's lists only to notice a change, spec 10.7).
    """

    commands: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    ask: Asker | None = None
    #: ``--accept-permissions``: go on when the workflow's allow-lists grew since the run
    #: last went on (otherwise ``ask`` is asked, and without it the resume stops).
    accept: bool = False

    def consent(self, workflow: Workflow) -> Consent:
        """The consent of one run of ``workflow``."""
        from .tools.consent import Consent, patterns

        return Consent(
            commands=patterns(self.commands),
            workflow_commands=patterns(_string_list(workflow.front_matter.get("allow-commands"))),
            hosts=patterns(self.hosts),
            workflow_hosts=patterns(_string_list(workflow.front_matter.get("allow-fetch"))),
            ask=self.ask,
        )


def _string_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def prepare_inputs(
    workflow: Workflow,
    given: Mapping[str, str],
    inputs_file: str | Path | None,
    ask: Callable[[InputDecl], str] | None,
) -> dict[str, Any]:
    """Typed input values from ``--inputs FILE`` and ``--input k=v`` (the latter wins)."""
    merged = _stringify(load_inputs_file(inputs_file)) if inputs_file is not None else {}
    merged.update(given)
    return resolve_inputs(workflow, merged, ask=ask)


def new_run(
    workflow: Workflow,
    inputs: Mapping[str, Any],
    progress_path: Path,
    *,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    recording: str | Path | None = None,
    limits: Limits = Limits(),
    redactor: Redactor | None = None,
    keywords: list[str] | None = None,
    run_id: str | None = None,
) -> Run:
    """The checkpoint of a run that has not started yet (``run_id``: one chosen already)."""
    redactor = redactor or Redactor.from_environment()
    clean_inputs, redacted = redactor.redact_value(dict(inputs))
    # A password in the endpoint (https://user:pass@host) must not reach the file either.
    clean_url, url_redacted = redactor.redact(base_url) if base_url else (None, 0)
    created = now_iso()
    run = Run(
        run_id=run_id or _run_id_for(progress_path, workflow),
        workflow=WorkflowRef(
            path=relative_path(workflow.path, progress_path.parent),
            hash=workflow.hash,
            steps={s.id: s.hash for s in workflow.steps},
            name=workflow.name,
            description=workflow.description,
        ),
        status="running",
        created=created,
        updated=created,
        config=RunConfig(
            provider=provider or workflow.provider or "openai",
            model=model or workflow.model,
            params=dict(workflow.params),
            budget=limits.apply(_budget_dict(workflow)),
            base_url=clean_url,
            recording=relative_path(Path(recording), progress_path.parent) if recording else None,
        ),
        cursor=Cursor(
            step=workflow.steps[0].id if workflow.steps else None,
            index=1 if workflow.steps else 0,
            total=len(workflow.steps),
        ),
        inputs=clean_inputs,
        steps={s.id: StepState() for s in workflow.steps},
        keywords=list(keywords or []),
    )
    # Sealed from its first checkpoint: ``flow run`` resumes it without asking only then.
    mark_written_here(run, Key.ensure())

    from .tools.allowlists import allow_lists

    run.config.permissions = allow_lists(workflow)
    if redacted:
        run.redactions.count += redacted
        run.redactions.where.append("inputs")
    if url_redacted:
        run.redactions.count += url_redacted
        run.redactions.where.append("config.base_url")
    return run


def default_progress_path(workflow: Workflow, root: Path | None = None) -> Path:
    """``.flow/runs/<run-id>/progress.md`` under ``root`` (the working directory)."""
    return (root or Path.cwd()) / RUNS_DIR / new_run_id(workflow.name) / "progress.md"


def start_run(
    workflow_path: str | Path,
    *,
    inputs: Mapping[str, str] | None = None,
    inputs_file: str | Path | None = None,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    recording: str | Path | None = None,
    record: bool = False,
    progress: str | Path | None = None,
    limits: Limits = Limits(),
    workspace: str | Path | None = None,
    file: str | Path | None = None,
    ask: Callable[[InputDecl], str] | None = None,
    reporter: Reporter | None = None,
    stream: bool = False,
    workflow: Workflow | None = None,
    resolved_inputs: Mapping[str, Any] | None = None,
    permissions: Permissions = Permissions(),
    selection: str | None = None,
    instructions: bool = True,
    mcp_config: str | Path | None = None,
    mcp_ask: Callable[[str, str, bool], str] | None = None,
    worktree: bool = False,
) -> Outcome:
    """Start a new run of a workflow and execute it until it completes or stops.

    MCP servers come from ``mcp_config`` or the workspace's ``.vscode/mcp.json``;
    ``mcp_ask(id, description, password)`` asks for a configuration input on a terminal.
    With ``worktree``, the run works in a new git worktree on branch ``flow/<run-id>`` made
    from HEAD (see ``promptflow_resume.worktree``); the progress file stays where it is.
    """
    wf = workflow or load_workflow(workflow_path)
    values = (
        dict(resolved_inputs)
        if resolved_inputs is not None
        else prepare_inputs(wf, inputs or {}, inputs_file, ask)
    )
    path = Path(progress) if progress is not None else default_progress_path(wf)
    if recording is not None and not Path(recording).is_file():
        raise FileNotFoundFlowError(
            f"the recording {recording} does not exist.",
            path=recording,
            hint="Pass the path of a *.recording.jsonl file written by `flow run --record`.",
        )
    root = main_root = Path(workspace) if workspace is not None else Path.cwd()
    run_id: str | None = None
    tree = None
    if worktree:
        from .worktree import create_worktree

        run_id = _run_id_for(path, wf)
        tree, root = create_worktree(root, run_id, progress=path)
    try:
        return _start_in(
            wf,
            values,
            path,
            root,
            run_id,
            tree,
            provider=provider,
            model=model,
            base_url=base_url,
            recording=recording,
            record=record,
            limits=limits,
            file=file,
            reporter=reporter,
            stream=stream,
            permissions=permissions,
            selection=selection,
            instructions=instructions,
            mcp_config=mcp_config,
            mcp_ask=mcp_ask,
        )
    except BaseException:
        if tree is not None and not path.exists():
            # Nothing recorded the worktree: it would be left behind with no run to own it.
            from .worktree import remove_worktree, repository_root

            remove_worktree(tree, repository_root(main_root))
        raise


def _start_in(
    wf: Workflow,
    values: dict[str, Any],
    path: Path,
    root: Path,
    run_id: str | None,
    tree: WorktreeRef | None,
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    recording: str | Path | None,
    record: bool,
    limits: Limits,
    file: str | Path | None,
    reporter: Reporter | None,
    stream: bool,
    permissions: Permissions,
    selection: str | None,
    instructions: bool,
    mcp_config: str | Path | None,
    mcp_ask: Callable[[str, str, bool], str] | None,
) -> Outcome:
    """``start_run`` once the workspace (``root``, a worktree's folder or not) is known."""
    from .detect import keywords_for
    from .tools.mcp_wiring import find_mcp_config, start_mcp

    mcp = find_mcp_config(wf, root, mcp_config, mcp_ask)
    redactor = Redactor.from_environment(extra_values=mcp.secrets if mcp else ())
    run = new_run(
        wf,
        values,
        path,
        provider=provider,
        model=model,
        base_url=base_url,
        recording=recording,
        limits=limits,
        redactor=redactor,
        # From the redacted values: keywords are words of the inputs, and a token is a word.
        keywords=keywords_for(wf, redactor.redact_value(dict(values))[0]),
        run_id=run_id,
    )
    run.worktree = tree
    provider_obj = make_provider(
        run, path, stream=stream, record=record, redactor=redactor, base_url=base_url
    )
    from .tools import build_tools

    tools = build_tools(wf, root)
    servers = start_mcp(wf, root, tools, mcp, path, redactor)
    try:
        store = ProgressStore.create(path, run)
        try:
            faults.point("api.run_created")
            options = _engine_options(
                wf,
                root,
                redactor,
                reporter=reporter,
                limits=limits,
                file=file,
                permissions=permissions,
                selection=selection,
                instructions=instructions,
            )
            if tree is not None:
                options.reporter.notice(
                    f"working in the worktree {tree.path} on branch {tree.branch} "
                    f"(made from {tree.base[:12]})"
                )
            _run_attempt(
                wf,
                run,
                store,
                provider_obj,
                tools,
                servers,
                options,
                _children(permissions, Choices(), mcp_config, mcp_ask),
                first=True,
            )
        except KeyboardInterrupt:
            _checkpoint_early_stop(store, run)
            raise
        finally:
            store.close()
    finally:
        if servers is not None:
            servers.close()
    return Outcome(run=run, path=path, exit_code=exit_code_for(run))


def _run_attempt(
    wf: Workflow,
    run: Run,
    store: ProgressStore,
    provider: Provider,
    tools: dict[str, Tool],
    servers: McpServers | None,
    options: EngineOptions,
    children: SubworkflowRunner,
    *,
    notes: Sequence[str] = (),
    decision: Decision | None = None,
    first: bool = False,
) -> None:
    """One attempt of a run, the first or a resumed one: the engine with its sub-workflow
    runner and the MCP servers' tools, run until the run stops. ``notes`` (what resume
    decided, hand edits) go into the attempt's history and on screen; ``decision``'s model
    call is counted in this attempt; a ``first`` attempt also says which ``tools:`` names
    nothing provides."""
    from .engine import Engine
    from .tools.mcp_wiring import mcp_attempt_notes, notice_missing_tools

    options.children = children
    _commit_steps(options, run, options.workspace)
    engine = Engine(wf, run, store, provider, tools, options)
    if decision is not None:
        # The decision's call belongs to this attempt (the run's total has it already).
        run.attempts[-1].usage.add(decision.usage)
    # The first is the tool-list hash, for the record; the rest (a changed list) is news.
    mcp_notes = mcp_attempt_notes(run, servers) if servers is not None else []
    engine.attempt_notes([*notes, *mcp_notes])
    for note in [*notes, *mcp_notes[1:]]:
        options.reporter.notice(note)
    if servers is not None:
        servers.notice = options.reporter.notice
        options.extra_tools = servers.offer()
    if first:
        notice_missing_tools(wf, servers, options.reporter.notice)
    engine.execute()


def _checkpoint_early_stop(store: ProgressStore, run: Run) -> None:
    """A stop (Ctrl-C, or SIGTERM where it raises like Ctrl-C) between a new run's first
    checkpoint and its run loop, which handles signals itself from then on: the file says
    ``interrupted``, as the loop's own checkpoint would, not ``running``."""
    if run.status != "running":
        return
    run.status = "interrupted"
    run.reason = "stopped before its first step began"
    run.updated = now_iso()
    if run.attempts and run.attempts[-1].ended is None:
        # The engine was made (it opens the attempt) but never ran to close it.
        attempt = run.attempts[-1]
        attempt.ended, attempt.status, attempt.reason = run.updated, run.status, run.reason
    store.checkpoint(run)


def _commit_steps(options: EngineOptions, run: Run, folder: Path) -> None:
    """A run in a worktree commits there at the end of every step."""
    if run.worktree is not None:
        from .worktree import step_committer

        options.on_step_completed = step_committer(folder, run.run_id, options.reporter.notice)


def check_permissions(
    run: Run, workflow: Workflow, progress_path: Path, permissions: Permissions
) -> tuple[AllowLists, str | None]:
    """The workflow's allow-lists now, and one line on how they changed since the run last
    went on (None when they did not). Lists that grew are taken on only with
    ``--accept-permissions`` or a yes on the terminal; otherwise ``PermissionsNotConfirmedError``
    (docs/spec.md 10.7)."""
    from .tools.allowlists import allow_lists, permissions_change

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
    typed = resolve_inputs(workflow, {**_stringify(run.inputs), **assignments}, ask=None)
    for name in assignments:
        if name not in typed:
            raise InputError(f"--set {name}: the workflow has no input named {name!r}.")
        run.inputs[name] = typed[name]
        notes.append(f"--set {name}")
    return notes


def _stringify(values: Mapping[str, Any]) -> dict[str, str]:
    """Input values as the text ``--input`` would give (JSON for non-strings)."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


def resume_run(
    progress_path: str | Path,
    *,
    choices: Choices = Choices(),
    set_values: Mapping[str, str] | None = None,
    workflow_path: str | Path | None = None,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    limits: Limits = Limits(),
    workspace: str | Path | None = None,
    file: str | Path | None = None,
    reporter: Reporter | None = None,
    stream: bool = False,
    record: bool = False,
    confirm_change: Callable[[ResumePlan], Choices | None] | None = None,
    permissions: Permissions = Permissions(),
    selection: str | None = None,
    instructions: bool = True,
    mcp_config: str | Path | None = None,
    mcp_ask: Callable[[str, str, bool], str] | None = None,
    decide: bool = False,
) -> Outcome:
    """Continue a stopped run from its checkpoint (see ``reconcile`` for the rules).

    ``decide`` (or ``recovery: model`` in the workflow) lets the run's model choose how an
    ambiguous state is resolved (see ``recovery``); a choice in ``choices`` wins over it."""
    path = progress_file(progress_path)
    if not path.exists():
        raise FileNotFoundFlowError(f"no progress file at {path}.", path=path)
    store, run, report = ProgressStore.open(path)
    servers = None
    try:
        from .subworkflows import refuse_child_cycles, refuse_direct_resume

        refuse_direct_resume(run, path)
        refuse_child_cycles(run, path)
        # Before anything starts or is written: --decide, ``recovery: model`` and the run
        # itself all send to the endpoint this resume ends up with.
        check_endpoint(run, path, provider, base_url)
        wf = workflow_for(run, path, workflow_path)
        check_params(run, wf, path)
        allowed_now, permissions_note = check_permissions(run, wf, path, permissions)
        root = Path(workspace) if workspace is not None else Path.cwd()
        outside = None if workflow_path is not None else outside_workspace(run, path, root)
        tree_note = None
        if run.worktree is not None:
            from .worktree import attach_worktree

            root, tree_note = attach_worktree(run.worktree, path)
        from .tools import build_tools
        from .tools.mcp_wiring import find_mcp_config, start_mcp

        tools = build_tools(wf, root)
        mcp = find_mcp_config(wf, root, mcp_config, mcp_ask)
        mcp_secrets = mcp.secrets if mcp else ()
        servers = start_mcp(
            wf, root, tools, mcp, path, Redactor.from_environment(extra_values=mcp_secrets)
        )
        plan = plan_resume(run, wf, report, tools, choices, workspace=root)
        from .recovery import decision_attempt, model_decision, record_decision, wants_decision

        deciding = wants_decision(wf, choices, decide=decide)
        decision: Decision | None = None
        if deciding:
            decision = model_decision(
                run,
                path,
                plan,
                wf,
                provider=provider,
                model=model,
                base_url=base_url,
                record=record,
            )
            if decision is not None:
                plan = plan_resume(
                    run, wf, report, tools, decision.choices(choices), workspace=root
                )
        if plan.decision is ChangeDecision.ASK and confirm_change is not None and not deciding:
            answer = confirm_change(plan)
            if answer is not None:
                choices = answer
                plan = plan_resume(run, wf, report, tools, choices, workspace=root)
        if plan.stop is Stop.COMPLETED:
            return Outcome(
                run=run,
                path=path,
                exit_code=EXIT_OK,
                notes=["already completed"],
                already_completed=True,
            )
        stopped_status, stopped_reason = run.status, run.reason
        if decision is not None and decision.stops and plan.stop is not Stop.NEEDS_REVIEW:
            # Ask a person about a failed step or a workflow change: nothing else changes.
            record_decision(run, decision, Redactor.from_environment(extra_values=mcp_secrets))
            run.status, run.reason = "needs_review", decision.stop_reason(plan)
            decision_attempt(run, decision)
            store.checkpoint(run)
            raise NeedsReviewError(run.reason)
        check_servers(plan, tools)
        try:
            notes = apply_plan(run, wf, plan, archive=store.write_sidecar)
        except NeedsReviewError:
            if decision is not None:
                # Recorded whatever it chose: a decision about a workflow change can leave a
                # call in flight that the next ``--decide`` is asked about.
                record_decision(run, decision, Redactor.from_environment(extra_values=mcp_secrets))
            if decision is not None and decision.stops:
                run.reason = reason = decision.stop_reason(plan)
                decision_attempt(run, decision)
                store.checkpoint(run)
                raise NeedsReviewError(reason) from None
            if decision is not None:
                decision_attempt(run, decision)
            store.checkpoint(run)
            raise
        if decision is not None:
            notes.extend(decision.notes())
            record_decision(run, decision, Redactor.from_environment(extra_values=mcp_secrets))
        if (
            plan.answered_tools
            or plan.applied_tools
            or plan.continued_tools
            or plan.unsealed_choice
            or decision
        ):
            # Entries changed in place (a hand-written result is no longer an error) or added
            # by the plan (an edit found applied): the journal only appends, so fold now.
            store.checkpoint(run)
        notes += _apply_set(run, wf, set_values or {})
        if outside:
            notes.append(outside)
        if permissions_note:
            notes.append(permissions_note)
        if tree_note:
            notes.append(tree_note)
        if report.edited_entries:
            notes.append(f"{entries_phrase(report.edited_entries)} edited by hand")
        if instructions:
            notes += _instructions_changed(run, root, file)
        notes.extend(
            f"input edited by hand: {change} (used by every prompt not answered yet)"
            for change in report.edited_inputs
        )
        if provider is not None:
            run.config.provider = provider
        if model is not None:
            run.config.model = model
        run.config.permissions = allowed_now
        if base_url is not None:
            run.config.base_url, hidden = Redactor.from_environment().redact(base_url)
            if hidden and "config.base_url" not in run.redactions.where:
                run.redactions.count += hidden
                run.redactions.where.append("config.base_url")
        run.config.budget = limits.apply(run.config.budget)
        redactor = Redactor.from_environment(extra_values=mcp_secrets)
        provider_obj = make_provider(
            run, path, stream=stream, record=record, redactor=redactor, base_url=base_url
        )
        options = _engine_options(
            wf,
            root,
            redactor,
            reporter=reporter,
            limits=limits,
            file=file,
            permissions=permissions,
            selection=selection,
            instructions=instructions,
        )
        note_run = replace(run, status=stopped_status, reason=stopped_reason)
        options.resume_note = resume_note(note_run, plan, wf)
        _run_attempt(
            wf,
            run,
            store,
            provider_obj,
            tools,
            servers,
            options,
            _children(permissions, choices, mcp_config, mcp_ask),
            notes=notes,
            decision=decision,
        )
    finally:
        store.close()
        if servers is not None:
            servers.close()
    return Outcome(run=run, path=path, exit_code=exit_code_for(run), resumed=True, notes=notes)


def _children(
    permissions: Permissions,
    choices: Choices,
    mcp_config: str | Path | None = None,
    mcp_ask: Callable[[str, str, bool], str] | None = None,
) -> SubworkflowRunner:
    """The runner of the sub-workflows of workflow steps (docs/spec.md 4.10)."""
    from .subworkflows import SubworkflowRunner

    return SubworkflowRunner(
        make_run=new_run,
        consent_for=permissions.consent,
        choices=choices,
        mcp_config=mcp_config,
        mcp_ask=mcp_ask,
    )
