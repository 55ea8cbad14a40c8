"""One attempt of a run, the first or a resumed one, and the checkpoint a new run starts from.

A start (``starting``) and a resume (``resuming``) prepare a run their own way, then take one
path: ``run_attempt`` assembles the engine with its options (consent, editor variables,
custom instructions), the sub-workflow runner and the MCP servers' tools, and runs it until
the run stops. ``exit_code_for`` maps how it stopped to the documented exit code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.clock import now_iso
from ..base.errors import (
    EXIT_AWAITING_APPROVAL,
    EXIT_AWAITING_INPUT,
    EXIT_INTERRUPTED,
    EXIT_NEEDS_REVIEW,
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_RUN_INCOMPLETE,
    EXIT_SUSPENDED,
    ProviderError,
)
from ..base.paths import relative_path
from ..base.redact import Redactor
from ..base.runids import id_from_folder, new_run_id
from ..base.traceids import TRACEPARENT_VARIABLE, parse_traceparent, trace_id_for
from ..base.truststore import untrusted_notice
from ..progress import ProgressStore
from ..progress.model import (
    AllowLists,
    Cursor,
    Run,
    RunConfig,
    StepState,
    TraceRef,
    WorkflowRef,
    approvals_view,
)
from ..progress.seal import Key, mark_written_here
from ..providers.models import ModelChoice, choose_models, fix_line, resolve_model
from ..workflow import editor_variables
from ..workflow.records import Diagnostic, Workflow
from .events import Reporter
from .hooks import load_run_hooks
from .resumeplan import Choices
from .runoptions import Limits, RunOptions

if TYPE_CHECKING:
    from ..providers.provider import Provider
    from ..tools.mcp import McpServers
    from ..tools.mcp_records import McpConfig
    from ..tools.tool import Tool
    from ..workflow.skillfile import Skill
    from .engine import EngineOptions
    from .recovery import Decision
    from .subworkflows import SubworkflowRunner

#: Where runs live unless ``--progress`` says otherwise (relative to the working directory).
RUNS_DIR = Path(".flow") / "runs"

_EXIT_BY_STATUS = {
    "completed": EXIT_OK,
    "interrupted": EXIT_INTERRUPTED,
    "needs_review": EXIT_NEEDS_REVIEW,
    "awaiting_input": EXIT_AWAITING_INPUT,
    "awaiting_approval": EXIT_AWAITING_APPROVAL,
    "suspended": EXIT_SUSPENDED,
}


def _provider_errors() -> frozenset[str]:
    """``last_error.type`` of a run that failed because of its model provider: the names of
    ``ProviderError`` and of every class below it."""
    found, todo = {ProviderError}, [ProviderError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return frozenset(c.__name__ for c in found)


_PROVIDER_ERRORS = _provider_errors()


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


def run_summary(run: Run, path: Path) -> dict[str, Any]:
    """The ``--json`` summary of how ``flow run`` / ``flow resume`` left a run."""
    return {
        "run_id": run.run_id,
        "path": str(path),
        "status": run.status,
        "reason": run.reason,
        "steps_done": run.steps_done(),
        "steps_total": len(run.steps),
        "step": run.cursor.step,
        "usage": run.usage.to_dict(),
        "last_error": run.last_error.message if run.last_error else None,
        **({"worktree": run.worktree.path} if run.worktree else {}),
        **({"approvals": approvals_view(run)} if run.approvals else {}),
        # A suspended run: when the provider's window opens (docs/spec.md 4.18).
        **({"until": run.until} if run.until else {}),
    }


def approval_lines(run: Run, path: Path) -> list[str]:
    """What a person reads when a run stops ``awaiting_approval``: each held call and the
    commands that decide (docs/spec.md 4.17)."""
    waiting = [a for a in run.approvals if a.decision == "pending"]
    lines = [f"Waiting for approval ({len(waiting)}):"]
    lines += [f"  {a.call_id}: {a.tool} {a.preview}  ({a.why})" for a in waiting]
    ids = " ".join(f"--call {a.call_id}" for a in waiting)
    lines.append(f"Approve with: flow approve {path} {ids}  (or --all)")
    lines.append(f"Deny with:    flow deny {path} --call ID --reason TEXT")
    lines.append("Or set decision: approved / denied under approvals: in the file's front matter.")
    return lines


def answer_location(path: Path) -> str:
    """``path:line`` of the answer placeholder of a run waiting for a person (in a child's
    file when the question was asked in a sub-workflow)."""
    from .humananswers import ANSWER_PLACEHOLDER
    from .subworkflows import question_at

    found = question_at(path)
    if found is None:
        return str(path)
    where, line = found
    return f"{where}:{line} (replace {ANSWER_PLACEHOLDER!r})"


def exit_code_for(run: Run) -> int:
    """The documented exit code for a run's status (a provider's failure has its own)."""
    error = run.last_error
    if run.status == "failed" and error is not None and error.type in _PROVIDER_ERRORS:
        return EXIT_PROVIDER
    return _EXIT_BY_STATUS.get(run.status, EXIT_RUN_INCOMPLETE)


def run_id_for(progress_path: Path, workflow: Workflow) -> str:
    """The folder's name in the default layout (``.flow/runs/<run-id>/``), else a new id."""
    return id_from_folder(progress_path) or new_run_id(workflow.name)


def default_progress_path(workflow: Workflow, root: Path | None = None) -> Path:
    """``.flow/runs/<run-id>/progress.md`` under ``root`` (the working directory)."""
    return (root or Path.cwd()) / RUNS_DIR / new_run_id(workflow.name) / "progress.md"


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
    notes: list[str] | None = None,
) -> Run:
    """The checkpoint of a run that has not started yet (``run_id``: one chosen already);
    what the choice of its models has to say for the person is added to ``notes``."""
    redactor = redactor or Redactor.from_environment()
    choice = model_choice(workflow, provider, model, notes)
    clean_inputs, redacted = redactor.redact_value(dict(inputs))
    # A password in the endpoint (https://user:pass@host) must not reach the file either.
    clean_url, url_redacted = redactor.redact(base_url) if base_url else (None, 0)
    created = now_iso()
    run = Run(
        run_id=run_id or run_id_for(progress_path, workflow),
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
            **choice.config(),
            params=dict(workflow.params),
            budget=limits.apply(_budget_dict(workflow)),
            prices=limits.apply_prices({}),
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

    run.config.permissions = _allow_lists(workflow)
    _count_redactions(run, (redacted, "inputs"), (url_redacted, "config.base_url"))
    run.trace = new_trace(run.run_id)
    return run


def model_choice(
    workflow: Workflow,
    provider: str | None = None,
    model: str | None = None,
    notes: list[str] | None = None,
) -> ModelChoice:
    """What a new run of ``workflow`` sends requests to (docs/spec.md 5.6): ``--model`` (one
    model, no fallbacks), else the workflow's ``model:`` list, tried in the author's order
    from the first model whose provider has credentials when neither ``--provider`` nor the
    file's ``provider:`` names one. What the choice has to say is added to ``notes``."""
    choice = _model_choice(workflow, provider, model)
    if notes is not None:
        notes.extend(choice.notes)
    return choice


def _model_choice(workflow: Workflow, provider: str | None, model: str | None) -> ModelChoice:
    named = provider or (workflow.provider if workflow.provider_named else None)
    if model is not None:
        ref = resolve_model(model)
        if named is None and ref.runnable and ref.provider is not None:
            named = ref.provider
        choice = choose_models([ref], provider=named or workflow.provider or "openai")
        notes = (
            [] if provider or ref.problem() is None else [f"{ref.problem()}; {fix_line(model)}."]
        )
        return ModelChoice(choice.provider, choice.models, (*choice.notes, *notes))
    if not workflow.model_refs:
        models = workflow.models or ((workflow.model,) if workflow.model else ())
        return ModelChoice(named or workflow.provider or "openai", tuple(models))
    return choose_models(workflow.model_refs, provider=named)


def _allow_lists(workflow: Workflow) -> AllowLists:
    """The workflow's allow-lists, recorded in the run (imported late: the tools layer)."""
    from ..tools.allowlists import allow_lists

    return allow_lists(workflow)


def new_trace(run_id: str) -> TraceRef:
    """The trace of a new run: its id from the run id, and the context it starts under
    (``$TRACEPARENT``, set by a batch for its rows; docs/spec.md 13)."""
    given = os.environ.get(TRACEPARENT_VARIABLE)
    parent = given.strip().lower() if given and parse_traceparent(given) else None
    return TraceRef(id=trace_id_for(run_id), parent=parent)


def _count_redactions(run: Run, *found: tuple[int, str]) -> None:
    """Record how many secrets were hidden, and where, in the run's ``redactions``."""
    for count, where in found:
        if count:
            run.redactions.count += count
            run.redactions.where.append(where)


def engine_options(
    workflow: Workflow,
    workspace: Path,
    redactor: Redactor,
    options: RunOptions,
    mcp: McpConfig | None = None,
) -> EngineOptions:
    """The engine's options for one attempt: one place turns the run options into consent,
    editor variables and the custom-instructions block; ``mcp`` is the run's MCP
    configuration, whose files left out for want of trust are said with the hooks'."""
    # The engine is loaded by the commands that run one (not by status, list, log ...).
    from .engine import DEFAULT_MAX_SUSPENSIONS, EngineOptions

    file = Path(options.file) if options.file else None
    suspensions = options.limits.max_suspensions
    reporter = options.reporter or Reporter()
    hooks = load_run_hooks(workspace, options, workflow)
    return EngineOptions(
        max_suspensions=DEFAULT_MAX_SUSPENSIONS if suspensions is None else suspensions,
        workspace=workspace,
        reporter=reporter,
        redactor=redactor,
        timeout=options.limits.timeout,
        editor=editor_variables(workspace, file, options.selection),
        consent=options.permissions.consent(workflow),
        instructions=_instructions(workspace, file, reporter) if options.instructions else "",
        skills=run_skills(workspace, options),
        hooks=hooks,
        untrusted=(*hooks.untrusted, *(mcp.untrusted if mcp else ())),
        approval=options.approval_policy(workflow),
        approval_ask=options.permissions.ask,
        consent_stop=options.consent_stop,
        shared_budget=options.shared_budget,
        snapshots=options.snapshots,
    )


def run_skills(workspace: Path, options: RunOptions) -> tuple[Skill, ...]:
    """The skills a run in ``workspace`` may load (none with ``--no-skills``); a skill that
    cannot be used is named on screen once per attempt, with its first problem."""
    if not options.skills:
        return ()
    from ..workflow.skillset import find_skills

    found = find_skills(workspace, [Path(d) for d in options.skill_dirs])
    skipped = [d for d in found.diagnostics if d.severity == "error"]
    if skipped:
        (options.reporter or Reporter()).notice(skipped_skills_line(skipped))
    return found.skills


def skipped_skills_line(skipped: Sequence[Diagnostic]) -> str:
    """One line for every skill a run cannot use, each with its first problem (a dozen
    skipped skills are one line, not twelve)."""
    first: dict[str, Diagnostic] = {}
    for diagnostic in skipped:
        first.setdefault(diagnostic.path, diagnostic)
    if len(first) == 1:
        (diagnostic,) = first.values()
        return f"skill skipped: {diagnostic} (flow check shows every problem)"
    parts = [
        f"{d.path}{f':{d.line}' if d.line else ''}: {_cut(d.message, 90)}" for d in first.values()
    ]
    return f"{len(first)} skills skipped (flow skills shows why): " + "; ".join(parts)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _instructions(root: Path, file: Path | None, reporter: Reporter) -> str:
    from ..workflow.instructions import find_instructions, instructions_block

    problems: list[str] = []
    block = instructions_block(find_instructions(root, file, problems))
    for problem in problems:
        reporter.notice(f"instructions skipped: {problem}")
    return block


def children(options: RunOptions, choices: Choices = Choices()) -> SubworkflowRunner:
    """The runner of the sub-workflows of workflow steps and of subagent calls (docs/spec.md
    4.10, 4.14)."""
    from .subworkflows import SubworkflowRunner

    return SubworkflowRunner(
        make_run=new_run,
        consent_for=options.permissions.consent,
        choices=choices,
        mcp_config=options.mcp_config,
        mcp_ask=options.mcp_ask,
        mcp_inputs=options.mcp_inputs,
        agent_dirs=tuple(options.agent_dirs),
        trust_in=options.trust_in,
    )


@dataclass
class Attempt:
    """What one attempt runs with, as a start or a resume assembled it."""

    workflow: Workflow
    run: Run
    store: ProgressStore
    provider: Provider
    tools: dict[str, Tool]
    servers: McpServers | None
    options: EngineOptions
    children: SubworkflowRunner


def run_attempt(
    attempt: Attempt,
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
    from ..tools.mcp_wiring import mcp_attempt_notes, notice_missing_tools, offer_mcp
    from .engine import Engine

    wf, run, options, servers = attempt.workflow, attempt.run, attempt.options, attempt.servers
    options.children = attempt.children
    _commit_steps(options, run, options.workspace)
    engine = Engine(wf, run, attempt.store, attempt.provider, attempt.tools, options)
    if decision is not None:
        # The decision's call belongs to this attempt (the run's total has it already).
        run.attempts[-1].usage.add(decision.usage)
    # The first is the tool-list hash, for the record; the rest (a changed list) is news.
    mcp_notes = mcp_attempt_notes(run.attempts, servers) if servers is not None else []
    left_out = untrusted_notice(options.untrusted, options.workspace)
    notes = [*notes, left_out] if left_out else list(notes)
    engine.attempt_notes([*notes, *mcp_notes])
    for note in [*notes, *mcp_notes[1:]]:
        options.reporter.notice(note)
    if servers is not None:
        servers.notice = options.reporter.notice
        offered = offer_mcp(servers, wf)
        options.extra_tools = offered.pop("")
        options.part_tools = offered
    if first:
        notice_missing_tools(wf, servers, options.reporter.notice)
    engine.execute()


def checkpoint_early_stop(store: ProgressStore, run: Run) -> None:
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
        from ..gitworktree import step_committer

        options.on_step_completed = step_committer(folder, run.run_id, options.reporter.notice)
