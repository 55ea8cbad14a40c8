"""The library API: start a run, resume one, ask where one stands.

The ``flow`` command is a thin layer over these functions; other programs and the tests call
them directly (``tests/test_doctests.py`` runs this example from a folder holding
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
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import faults
from .clock import now_iso
from .errors import (
    EXIT_AWAITING_INPUT,
    EXIT_INTERRUPTED,
    EXIT_NEEDS_REVIEW,
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_RUN_INCOMPLETE,
    FileNotFoundFlowError,
    FlowError,
    InputError,
    NeedsReviewError,
    PermissionsNotConfirmedError,
    ProviderError,
    ProviderSetupError,
    ReplayMismatchError,
)
from .events import Reporter
from .progress import ProgressStore, load_progress
from .progress.location import progress_file
from .progress.model import (
    AllowLists,
    Cursor,
    LoadReport,
    Run,
    RunConfig,
    StepState,
    Usage,
    WorkflowRef,
    WorktreeRef,
)
from .progress.render import entries_phrase
from .progress.seal import Key, mark_written_here, written_here
from .progress.state import RunState, run_state
from .providers import create_provider
from .providers.base import Provider, ProviderSettings
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
from .redact import Redactor
from .runids import id_from_folder, new_run_id
from .workflow import (
    IMPLICIT_STEP_ID,
    editor_variables,
    load_inputs_file,
    load_workflow,
    resolve_inputs,
)
from .workflow.model import Compaction, InputDecl, Workflow

if TYPE_CHECKING:
    from .compaction import ContextStatus
    from .engine import EngineOptions
    from .recovery import Decision
    from .subworkflows import ChildNode, SubworkflowRunner
    from .tools.base import Tool
    from .tools.consent import Asker, Consent
    from .tools.mcp import McpServers
    from .tools.mcp_config import McpConfig

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


def _relative(target: Path, start: Path) -> str:
    """``target`` relative to folder ``start``, with forward slashes (portable across machines)."""
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


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


def _make_provider(
    run: Run,
    progress_path: Path,
    *,
    stream: bool,
    record: bool,
    redactor: Redactor,
    base_url: str | None = None,
) -> Provider:
    """The run's provider; ``base_url`` is the endpoint as given (the file keeps it redacted)."""
    config = run.config
    # The last gate before a provider exists: whatever path led here, the endpoint is judged
    # with the provider as every override left it.
    check_endpoint(run, progress_path, None, base_url)
    recording = str(progress_path.parent / config.recording) if config.recording else None
    redact = lambda text: redactor.redact(text)[0]  # noqa: E731
    settings = ProviderSettings(
        name=config.provider,
        model=config.model,
        base_url=base_url or config.base_url,
        stream=stream,
        recording=recording,
        # replay compares requests as they were recorded: redacted.
        extra={"redact": redact} if config.provider == "replay" else {},
    )
    provider = create_provider(settings)
    if record:
        from .providers.recording import RecordingProvider

        target = progress_path.parent / "session.recording.jsonl"
        provider = RecordingProvider(provider, target, redact=redact)
    return provider


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
            path=_relative(workflow.path, progress_path.parent),
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
            recording=_relative(Path(recording), progress_path.parent) if recording else None,
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

    mcp = _mcp_config(wf, root, mcp_config, mcp_ask)
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
    provider_obj = _make_provider(
        run, path, stream=stream, record=record, redactor=redactor, base_url=base_url
    )
    from .tools import build_tools

    tools = build_tools(wf, root)
    servers = _start_mcp(wf, root, tools, mcp, path, redactor)
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
            _commit_steps(options, run, root)
            if tree is not None:
                options.reporter.notice(
                    f"working in the worktree {tree.path} on branch {tree.branch} "
                    f"(made from {tree.base[:12]})"
                )
            options.children = _children(permissions, Choices(), mcp_config, mcp_ask)
            from .engine import Engine

            engine = Engine(wf, run, store, provider_obj, tools, options)
            if servers is not None:
                servers.notice = options.reporter.notice
                options.extra_tools = servers.offer()
                engine.attempt_notes(_mcp_notes(run, servers))
            _notice_missing_tools(wf, servers, options.reporter)
            engine.execute()
        except KeyboardInterrupt:
            _checkpoint_early_stop(store, run)
            raise
        finally:
            store.close()
    finally:
        if servers is not None:
            servers.close()
    return Outcome(run=run, path=path, exit_code=exit_code_for(run))


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


def _workflow_for(run: Run, progress_path: Path, override: str | Path | None) -> Workflow:
    if override is not None:
        return _as_run_loaded(run, load_workflow(override))
    path = progress_path.parent / run.workflow.path
    # Anything that exists is loaded, so a pipe or a device there is refused as one (10.4).
    if not path.exists() or path.is_dir():
        raise FileNotFoundFlowError(
            f"the workflow of this run, {run.workflow.path} (relative to the progress file), "
            "does not exist.",
            path=progress_path,
            field="$.workflow.path",
            hint="Pass the workflow with --workflow PATH, or restore the file.",
        )
    return _as_run_loaded(run, load_workflow(path))


def _as_run_loaded(run: Run, workflow: Workflow) -> Workflow:
    """``workflow`` read as one prompt when the run was started that way (``--single-prompt``):
    the checkpoint has the one step ``main`` and the one-prompt reading has its hash."""
    if (
        workflow.hash != run.workflow.hash
        and list(run.workflow.steps) == [IMPLICIT_STEP_ID]
        and len(workflow.steps) > 1
    ):
        single = load_workflow(workflow.path, single_prompt=True)
        if single.hash == run.workflow.hash:
            return single
    return workflow


def outside_workspace(run: Run, progress_path: Path, workspace: Path) -> str | None:
    """A warning when the workflow a progress file names lies outside the workspace.

    A shared progress file chooses the workflow that runs (and so its commands); one that
    leads out of the folder being worked on is worth a second look before it runs.
    """
    target = (progress_path.parent / run.workflow.path).resolve()
    root = workspace.resolve()
    if target == root or root in target.parents:
        return None
    return (
        f"the run's workflow ({run.workflow.path}, from $.workflow.path of {progress_path}) is "
        f"{target}, outside the working folder {root}; check that it is the workflow you mean "
        "to run, or pass --workflow PATH."
    )


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


def check_params(run: Run, workflow: Workflow, progress_path: Path) -> None:
    """Refuse model parameters from the progress file that flow does not send (spec 10.2)."""
    from .providers.params import check_recorded_params

    check_recorded_params(run.config.params, workflow.params, source=progress_path)


def check_endpoint(
    run: Run, progress_path: Path, provider: str | None, base_url: str | None
) -> None:
    """Refuse to send requests, and so an API key, to an endpoint only the progress file chose.

    ``provider`` and ``base_url`` are this call's overrides (``--provider``, ``--base-url``):
    the check is made with the provider the requests will really use (``providers.endpoints``
    has the rules, docs/spec.md 10.2).
    """
    from .providers.endpoints import check_recorded

    if (provider is None or provider == run.config.provider) and written_here(run, Key.find()):
        # Recorded by this machine's flow with this provider, unchanged since (the run's
        # seal covers both): the person's own earlier choice, as good as --base-url.
        return
    check_recorded(
        provider or run.config.provider, run.config.base_url, given=base_url, source=progress_path
    )


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
        wf = _workflow_for(run, path, workflow_path)
        check_params(run, wf, path)
        allowed_now, permissions_note = check_permissions(run, wf, path, permissions)
        root = Path(workspace) if workspace is not None else Path.cwd()
        outside = None if workflow_path is not None else outside_workspace(run, path, root)
        tree_note = None
        if run.worktree is not None:
            from .worktree import attach_worktree

            root, tree_note = attach_worktree(run.worktree, path)
        from .tools import build_tools

        tools = build_tools(wf, root)
        mcp = _mcp_config(wf, root, mcp_config, mcp_ask)
        mcp_secrets = mcp.secrets if mcp else ()
        servers = _start_mcp(
            wf, root, tools, mcp, path, Redactor.from_environment(extra_values=mcp_secrets)
        )
        plan = plan_resume(run, wf, report, tools, choices, workspace=root)
        from .recovery import decision_attempt, record_decision, wants_decision

        deciding = wants_decision(wf, choices, decide=decide)
        decision: Decision | None = None
        if deciding:
            decision = _decide(
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
        # The first is the tool-list hash, for the record; the rest (a changed list) is news.
        mcp_notes = _mcp_notes(run, servers) if servers is not None else []
        provider_obj = _make_provider(
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
        options.children = _children(permissions, choices, mcp_config, mcp_ask)
        note_run = replace(run, status=stopped_status, reason=stopped_reason)
        options.resume_note = resume_note(note_run, plan, wf)
        _commit_steps(options, run, root)
        from .engine import Engine

        engine = Engine(wf, run, store, provider_obj, tools, options)
        if decision is not None:
            # The decision's call belongs to this attempt (the run's total has it already).
            run.attempts[-1].usage.add(decision.usage)
        engine.attempt_notes(notes + mcp_notes)
        for note in notes + mcp_notes[1:]:
            options.reporter.notice(note)
        if servers is not None:
            servers.notice = options.reporter.notice
            options.extra_tools = servers.offer()
        engine.execute()
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


def _wants_decision(workflow: Workflow, choices: Choices) -> bool:
    """Whether ``flow status --decide`` has a decision to ask for (recovery loaded only then)."""
    from .recovery import wants_decision

    return wants_decision(workflow, choices, decide=True)


def _decide(
    run: Run,
    progress_path: Path,
    plan: ResumePlan,
    workflow: Workflow,
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    record: bool = False,
) -> Decision | None:
    """Ask the run's model (as this resume would use it) to decide an ambiguous state; its
    tokens and cost are added to the run's usage. None when the state is not ambiguous.
    With ``record`` the decision's exchange goes into the session recording (``--record``),
    so a replay of the session decides the same."""
    from .recovery import ask_model, failed_call, find_situation

    situation = find_situation(run, plan, workflow)
    if situation is None:
        return None
    config = replace(
        run.config,
        provider=provider or run.config.provider,
        model=model or run.config.model,
    )
    try:
        decider = _make_provider(
            replace(run, config=config),
            progress_path,
            stream=False,
            record=record,
            redactor=Redactor.from_environment(),
            base_url=base_url,
        )
    except ProviderError as error:  # a missing key or extra: a person decides
        return failed_call(situation, error)
    decision = ask_model(decider, replace(run, config=config), situation)
    run.usage.add(decision.usage)
    if situation.step is not None and situation.step in run.steps:
        run.steps[situation.step].usage.add(decision.usage)
    return decision


def _mcp_config(
    workflow: Workflow,
    workspace: Path,
    config_path: str | Path | None,
    ask: Callable[[str, str, bool], str] | None,
) -> McpConfig | None:
    """The MCP configuration a run of ``workflow`` uses (never one from a progress file)."""
    if config_path is None and not _names_unresolved_tools(workflow):
        return None  # what load_servers answers, without importing the MCP client (asyncio)
    from .tools.mcp import load_servers

    return load_servers(workflow, workspace, config_path=config_path, ask=ask)


def _start_mcp(
    workflow: Workflow,
    workspace: Path,
    tools: dict[str, Tool],
    config: McpConfig | None,
    progress_path: Path,
    redactor: Redactor,
) -> McpServers | None:
    """Start the MCP servers the workflow names; their stderr logs go beside the run."""
    if config is None:
        return None
    from .tools.mcp import start_servers

    return start_servers(
        workflow,
        workspace,
        tools,  # type: ignore[arg-type]
        config=config,
        log_dir=progress_path.parent,
        redact=lambda text: redactor.redact(text)[0],
    )


def _notice_missing_tools(wf: Workflow, servers: McpServers | None, reporter: Reporter) -> None:
    """Say once, at the start, which names in ``tools:`` nothing provides, and what the MCP
    configuration leaves out (broken entries the workflow does not name, task-only tools)."""
    if not _names_unresolved_tools(wf):
        return
    from .tools.mcp import missing_tools_notice

    for line in servers.notices() if servers is not None else []:
        reporter.notice(line)
    notice = missing_tools_notice(wf, servers)
    if notice is not None:
        reporter.notice(notice)


def _names_unresolved_tools(wf: Workflow) -> bool:
    """True when ``tools:`` names a tool that no built-in or command provides (an MCP tool);
    ``tools.mcp.mcp_names`` lists them."""
    from .workflow.toolnames import is_editor_only

    return any(not targets and not is_editor_only(n) for n, targets in wf.tool_map.items())


def _mcp_notes(run: Run, servers: McpServers) -> list[str]:
    """Attempt notes about the MCP tools: their hashes now, and which servers changed."""
    from .tools.mcp import attempt_notes

    return attempt_notes((note for attempt in run.attempts for note in attempt.notes), servers)


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

    @property
    def stop(self) -> Stop | None:
        """Why ``flow resume`` would not continue the run now (None: it would)."""
        plan = self.plan
        if plan is None:
            return Stop.NO_WORKFLOW
        if plan.stop is not None:
            return plan.stop
        # A completed run can resume only when a person set a step back (reset steps).
        if self.run.status == "completed" and not plan.reset:
            return Stop.COMPLETED
        return None

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
        done = sum(1 for s in run.steps.values() if s.status == "completed")
        total = run.cursor.total or len(run.steps)
        plan = self.plan
        state = self.state
        return {
            "path": str(self.path),
            "run_id": run.run_id,
            "status": state.status,
            "reason": state.reason,
            "recorded_status": run.status,
            "owner_alive": state.owner_alive,
            "state": state.text(),
            "step": run.cursor.step,
            "step_index": run.cursor.index,
            "steps_total": total,
            "steps_done": done,
            "percent": round(100 * done / total) if total else 100,
            "can_resume": self.can_resume,
            "resume_from": plan.resume_from if plan else None,
            "blocked": plan.blocked if plan else self.workflow_error,
            "stop": None if self.stop is None else self.stop.value,
            "retry_tools": [f.call_id for f in plan.retry_tools] if plan else [],
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
            "usage": run.usage.to_dict(),
            "attempts": len(run.attempts),
            "last_error": None
            if run.last_error is None
            else {
                "type": run.last_error.type,
                "message": run.last_error.message,
                "at": run.last_error.at,
            },
            "workflow_error": self.workflow_error,
            "estimated_input_tokens": plan.estimated_input_tokens if plan else None,
            "worktree": _worktree_status(run, self.path),
            **self._tree(),
            "skip_steps": plan.skip if plan else [],
            "decision": self.decision.to_dict() if self.decision else None,
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
        from .subworkflows import is_child, usage_with_children

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
    from .worktree import worktree_summary

    return worktree_summary(run.worktree, path)


def run_status(
    progress_path: str | Path,
    *,
    workflow_path: str | Path | None = None,
    workspace: str | Path | None = None,
    choices: Choices = Choices(),
    mcp_config: str | Path | None = None,
    decide: bool = False,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
) -> StatusReport:
    """Load a run without locking it and work out what ``flow resume`` would do.

    Nothing is started: an MCP call in flight is judged by what was recorded when it started
    (whether it may run again, and on which server), as resume judges it.
    With ``decide`` an ambiguous state is put to the model (``provider``/``model``/``base_url``
    as resume would use them) and the plan shows its decision; nothing is written.
    """
    path = progress_file(progress_path)
    if not path.exists():
        raise FileNotFoundFlowError(f"no progress file at {path}.", path=path)
    run, report = load_progress(path)
    if decide:
        # Refused outright, as by resume: a decision would send the run to that endpoint.
        check_endpoint(run, path, provider, base_url)
    plan: ResumePlan | None = None
    problem: str | None = None
    decision: Decision | None = None
    settings: Compaction | None = None
    try:
        wf = _workflow_for(run, path, workflow_path)
        settings = wf.compaction
        root = Path(workspace) if workspace else Path.cwd()
        outside = None if workflow_path is not None else outside_workspace(run, path, root)
        if outside:
            report.warnings.append(outside)
        if run.worktree is not None:
            from .worktree import worktree_folder

            root = worktree_folder(run.worktree, path)
        tools: dict[str, Tool] = {}
        if run.in_flight:
            from .tools import build_tools

            # MCP calls in flight are judged by their start records: no server is started.
            tools = build_tools(wf, root)
        else:
            # Only a call in flight needs its tool (is it idempotent?); without one the tool
            # modules stay unimported and only the check that building them makes is made.
            from .workflow.commands import check_cwd

            for decl in wf.commands.values():
                check_cwd(decl, root)
        plan = plan_resume(run, wf, report, tools, choices, workspace=root)
        # recovery is imported only to decide: plain `flow status` does without it.
        if decide and _wants_decision(wf, choices):
            decision = _decide(
                run, path, plan, wf, provider=provider, model=model, base_url=base_url
            )
            if decision is not None and not decision.stops:
                plan = plan_resume(
                    run, wf, report, tools, decision.choices(choices), workspace=root
                )
    except FlowError as error:
        problem = str(error)
    if plan is not None and run.worktree is not None and run.worktree.state == "discarded":
        # Resume refuses such a run (its files are gone); status says so the same way.
        plan.block(Stop.DISCARDED, "the run's worktree and branch were discarded (flow discard)")
    live = run_state(path, run.status, run.reason)
    if plan is not None and live.owner_alive:
        # Resume would fail on the lock (exit 6): status says so before anyone tries.
        plan.block(Stop.LIVE, f"the run is live ({live.reason}); wait for it to stop, or stop it")
    from .compaction import context_status

    children: list[ChildNode] = []
    if any(state.child for state in run.steps.values()):
        # subworkflows imports the engine; a run without children need not load it.
        from .subworkflows import child_runs

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
    )


@dataclass
class CompactOutcome:
    """What ``compact_run`` did: the summary entry it added, or why it added none."""

    path: Path
    compacted: bool
    #: First and last id of the entries the summary stands for.
    covers: tuple[int, int] | None = None
    entry: int | None = None
    #: Estimated tokens of the next request before and after.
    tokens_before: int = 0
    tokens_after: int = 0
    usage: Usage = field(default_factory=Usage)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "path": str(self.path),
            "compacted": self.compacted,
            "covers": list(self.covers) if self.covers else None,
            "entry": self.entry,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "usage": self.usage.to_dict(),
            "reason": self.reason,
        }


def compact_run(
    progress_path: str | Path,
    *,
    workflow_path: str | Path | None = None,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    record: bool = False,
    reporter: Reporter | None = None,
) -> CompactOutcome:
    """Compact a stopped run by hand: summarise its oldest turns into one ``compaction``
    entry, as a run does before its context would overflow (see ``compaction``).

    The window is the workflow's ``context_window:`` or the model's; when neither is known,
    the run's current size stands for it, so the recent turns kept are ``keep_recent`` of
    what the next request would send now. A live run is refused with the lock error.
    """
    from .compaction import summarise, view_tokens, window_for
    from .conversation import RequestView
    from .providers.pricing import cost_usd
    from .providers.retry import call_with_retry

    path = progress_file(progress_path)
    if not path.exists():
        raise FileNotFoundFlowError(f"no progress file at {path}.", path=path)
    store, run, _ = ProgressStore.open(path)
    try:
        wf = _workflow_for(run, path, workflow_path)
        check_params(run, wf, path)
        if provider is not None:
            run.config.provider = provider
        if model is not None:
            run.config.model = model
        check_endpoint(run, path, None, base_url)
        redactor = Redactor.from_environment()
        provider_obj = _make_provider(
            run, path, stream=False, record=record, redactor=redactor, base_url=base_url
        )
        view = RequestView()
        view.update(run.transcript)
        before = view_tokens(view, run.config.model)
        window = window_for(wf.compaction, run.config.model) or max(before, 1)
        step = run.cursor.step
        done = summarise(
            view,
            wf.compaction,
            window,
            call=lambda request: call_with_retry(provider_obj, request, wf.retry),
            cost=lambda reply: cost_usd(reply.model or run.config.model, reply.usage) or 0.0,
            model=run.config.model,
            params=run.config.params,
            step=step,
            redact=lambda text: redactor.redact(text)[0],
            announce=(
                (
                    lambda plan: reporter.notice(
                        f"compacting entries {plan.covers[0]}-{plan.covers[1]} "
                        f"(about {plan.tokens:,} tokens) into a summary."
                    )
                )
                if reporter is not None
                else None
            ),
        )
        if done is None:
            return CompactOutcome(
                path=path,
                compacted=False,
                tokens_before=before,
                tokens_after=before,
                reason="nothing to compact: only the step prompts and the most recent turns "
                "are left, and those are kept verbatim",
            )
        done.entry.id = run.next_entry_id()
        run.transcript.append(done.entry)
        run.usage.add(done.usage)
        if step is not None and step in run.steps:
            run.steps[step].usage.add(done.usage)
        if run.attempts:
            # No attempt of its own: the last one carries the call, with a note saying so, so
            # that `flow log` accounts for every model call.
            last = run.attempts[-1]
            last.usage.add(done.usage)
            first, final = done.plan.covers
            last.notes.append(
                f"flow compact: entries {first}-{final} summarised in entry {done.entry.id}"
            )
        run.updated = now_iso()
        store.save(run, [done.entry])
        store.checkpoint(run)
        view.update(run.transcript)
        return CompactOutcome(
            path=path,
            compacted=True,
            covers=done.plan.covers,
            entry=done.entry.id,
            tokens_before=before,
            tokens_after=view_tokens(view, run.config.model),
            usage=done.usage,
        )
    finally:
        store.close()
