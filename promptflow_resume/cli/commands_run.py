"""``flow run``, ``flow resume`` and ``flow status``."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..base import clock
from .app import app, err, event_stream, out
from .options import (
    AgentsDirOpt,
    HandoffOpt,
    HandoffsOpt,
    InputOpt,
    InputsFileOpt,
    MaxHandoffsOpt,
    ProgressArg,
    RunTargetArg,
    TaskOpt,
    WorkflowMovedOpt,
)
from .runconsole import ConsoleReporter, Countdown, report_outcome
from .runflags import (
    AttemptFlags,
    ChoiceFlags,
    ConnectionFlags,
    McpFlags,
    OutputFlags,
    SharedFlags,
    given_options,
    spread_flag_groups,
)
from .statusview import print_status

if TYPE_CHECKING:
    # The API pulls in reconcile and every tool; `flow --help` registers this module without it.
    from ..api import Choices, ResumePlan

# The options of one command only (the shared ones are ``runflags``' groups).
RecordingOpt = Annotated[
    Path | None,
    typer.Option(
        "--recording",
        metavar="FILE",
        help="With --provider replay: the recorded session to replay.",
    ),
]
RunRecordOpt = Annotated[
    bool,
    typer.Option("--record", help="Record this session beside the progress file, for replay."),
]
RunProgressOpt = Annotated[
    Path | None,
    typer.Option(
        "--progress",
        metavar="FILE",
        help="Where to write progress.md (default .flow/runs/<run-id>/).",
    ),
]
NewOpt = Annotated[
    bool,
    typer.Option("--new", "-N", help="Start fresh without looking for similar incomplete runs."),
]
SinglePromptOpt = Annotated[
    bool, typer.Option("--single-prompt", help="Send the whole file as one prompt (no steps).")
]
RunYesOpt = Annotated[
    bool, typer.Option("--yes", "-y", help="Accept the best similar run without asking.")
]
WorktreeOpt = Annotated[
    bool,
    typer.Option(
        "--worktree",
        help="Work in a new git worktree on branch flow/<run-id> made from HEAD (needs a "
        "clean checkout); the progress file stays here. Then: flow review, flow merge, "
        "flow discard. Always starts a new run.",
    ),
]
SetOpt = Annotated[
    list[str],
    typer.Option(
        "--set",
        metavar="NAME=VALUE",
        help="Override an input for the rest of the run (repeatable).",
    ),
]
PlanOpt = Annotated[
    bool,
    typer.Option(
        "--plan",
        help="Show what would be reused and re-run, then exit without a model call "
        "(with --decide: only the decision's) and without writing anything.",
    ),
]
ResumeRecordOpt = Annotated[
    bool,
    typer.Option(
        "--record",
        help="Record this attempt's model calls (a --decide decision's too) into "
        "session.recording.jsonl beside the progress file, for replay.",
    ),
]
ResumeYesOpt = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask questions on a terminal.")
]
WaitOpt = Annotated[
    bool,
    typer.Option(
        "--wait",
        help="A run suspended at a provider's quota window: wait until the window opens "
        "(a countdown on a terminal; Ctrl-C stops waiting and leaves the file as it was), "
        "then continue. Without it, resuming before the window exits 16 and sends nothing.",
    ),
]


def _stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


@app.command("run")
@spread_flag_groups
def run_command(
    workflow: RunTargetArg,
    task: TaskOpt = None,
    agents: AgentsDirOpt = [],  # noqa: B006 - typer copies list defaults
    handoff: HandoffOpt = [],  # noqa: B006 - typer copies list defaults
    handoffs: HandoffsOpt = None,
    max_handoffs: MaxHandoffsOpt = None,
    input_: InputOpt = [],  # noqa: B006 - typer copies list defaults
    inputs_file: InputsFileOpt = None,
    *,
    connection: ConnectionFlags,
    recording: RecordingOpt = None,
    record: RunRecordOpt = False,
    progress: RunProgressOpt = None,
    attempt: AttemptFlags,
    new: NewOpt = False,
    single_prompt: SinglePromptOpt = False,
    yes: RunYesOpt = False,
    mcp: McpFlags,
    worktree: WorktreeOpt = False,
    output: OutputFlags,
) -> int:
    """Start a run of WORKFLOW (a prompt file, or a custom agent given --task); first offer
    to resume a similar incomplete run.

    The run is checkpointed after every model reply, tool call and step into its progress.md.
    Exit codes: 0 completed, 1 failed/budget/timeout, 8 needs review, 14 git problem
    (--worktree), 16 suspended at a provider's quota window (continue with flow resume
    --wait), 130 interrupted (see docs/spec.md for all).
    """
    from ..front import RunCommand, handoffs_to_follow, read_selection, run_workflow

    follow = handoffs_to_follow(handoff, handoffs, max_handoffs)
    # The task read from stdin leaves no stdin for questions: nobody is there to answer them.
    task_text = sys.stdin.read() if task == "-" else read_selection(task, "--task")
    as_json, verbose = output.as_json, output.verbose
    interactive = _stdin_is_terminal() and not as_json and task != "-"
    live = sys.stderr.isatty() and not as_json
    reporter = ConsoleReporter(live=live, verbose=verbose, quiet_dry_run=as_json)
    stream = event_stream(output.events)
    command = RunCommand(
        workflow,
        input_items=tuple(input_),
        inputs_file=inputs_file,
        task=task_text,
        handoffs=follow,
        ask=_ask_input if interactive else None,
        selection=attempt.selection,
        single_prompt=single_prompt,
        progress=progress,
        recording=recording,
        worktree=worktree,
        new=new,
        yes=yes,
        interactive=interactive,
        read=_ask_on_stderr,
        write=err,
        verbose=verbose,
    )
    flags = SharedFlags(connection, attempt, mcp, output, agents, record)
    options = flags.options(interactive, reporter, stream)
    try:
        outcome = run_workflow(command, options)
    finally:
        if stream is not None:
            stream.close_target()
    return report_outcome(outcome.run, outcome.path, outcome.exit_code, as_json)


def _ask_input(decl: Any) -> str:
    hint = f" ({decl.description})" if decl.description else ""
    default = decl.placeholder if decl.placeholder is not None else decl.default
    return str(typer.prompt(f"{decl.name}{hint}", default=default if default is not None else ...))


def _ask_on_stderr(prompt: str) -> str:
    """Ask on stderr, where the list of matches went, so stdout stays clean for scripts."""
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return input()


def _wait_for_window(progress: Path, live: bool) -> None:
    """Sleep until a suspended run's provider window opens (docs/spec.md 4.18): a countdown
    on a terminal, one line otherwise. Nothing is opened for writing meanwhile, so Ctrl-C or
    a kill leaves the file as it was."""
    from ..front import window_wait

    left, until = window_wait(progress)
    if until is None:
        return
    err(f"flow: the run is suspended until {until}; waiting {left:.0f} s for the window.")
    # A hair past the moment: ``until`` is whole seconds, the clock is not.
    end = clock.monotonic() + left + 0.05
    status: Any = None
    if live:
        from ..base.printing import console

        status = console(stderr=True).status(
            Countdown("waiting for the provider's window · {left} left", end)
        )
        status.start()
    try:
        while (rest := end - clock.monotonic()) > 0:
            clock.sleep(min(rest, 0.5))
    finally:
        if status is not None:
            status.stop()


def _confirm_change(plan: ResumePlan) -> Choices | None:
    from ..api import Choices

    changed = ", ".join(c.step_id for c in plan.changes if c.started)
    err(f"flow: the workflow changed in steps that already ran: {changed}.")
    answer = (
        typer.prompt(
            "Re-run from the first changed step [r], keep completed results [k], or abort [a]?",
            default="a",
        )
        .strip()
        .lower()
    )
    if answer.startswith("r"):
        return Choices(rerun_changed=True)
    if answer.startswith("k"):
        return Choices(keep_completed=True)
    return None


@app.command("resume")
@spread_flag_groups
def resume_command(
    ctx: typer.Context,
    progress: ProgressArg,
    agents: AgentsDirOpt = [],  # noqa: B006 - typer copies list defaults
    set_: SetOpt = [],  # noqa: B006 - typer copies list defaults
    plan_only: PlanOpt = False,
    *,
    choice: ChoiceFlags,
    record: ResumeRecordOpt = False,
    workflow: WorkflowMovedOpt = None,
    connection: ConnectionFlags,
    attempt: AttemptFlags,
    yes: ResumeYesOpt = False,
    wait: WaitOpt = False,
    mcp: McpFlags,
    output: OutputFlags,
) -> int:
    """Continue a stopped run exactly where it stopped.

    Completed steps and tool calls are reused, never re-run. If the workflow changed in steps
    that already ran, choose --rerun-changed or --keep-completed (on a terminal you are asked).
    After a failure or a call left in flight, --retry-step or --skip-step chooses for one
    step, or --decide lets the run's model choose (recorded in the file with its reason).
    A run suspended at a provider's quota window goes on once the window opens: --wait
    sleeps until then; before it, resume sends nothing and exits 16.
    """
    from ..api import ResumeRequest, RunOptions, resume_run, run_status
    from ..front import Target, parse_assignments, read_selection, resume_target

    request = ResumeRequest(choices=choice.choices(), workflow_path=workflow, decide=choice.decide)
    as_json = output.as_json
    flags = SharedFlags(connection, attempt, mcp, output, agents, record)
    if resume_target(progress, request, given_options(ctx)) is Target.BATCH:
        from .commands_batch import batch_status_command, resume_batch_command

        if plan_only:
            return batch_status_command(progress, as_json)
        # No row asks anything: the rows run in worker processes, with no terminal.
        options = flags.options(False, None, None, read_selection(attempt.selection))
        return resume_batch_command(
            progress,
            options,
            workflow=workflow,
            choices=request.choices,
            otel=output.otel,
            as_json=as_json,
            events=output.events,
        )
    if plan_only:
        c = connection
        connected = RunOptions(provider=c.provider, model=c.model, base_url=c.base_url)
        return print_status(run_status(progress, connected, request), as_json, plan=True)
    interactive = _stdin_is_terminal() and not as_json and not yes
    live = sys.stderr.isatty() and not as_json
    if wait:
        _wait_for_window(progress, live)
    reporter = ConsoleReporter(live=live, verbose=output.verbose)
    stream = event_stream(output.events)
    request = dataclasses.replace(
        request,
        set_values=parse_assignments(set_, "--set"),
        confirm_change=_confirm_change if interactive else None,
    )
    options = flags.options(interactive, reporter, stream, read_selection(attempt.selection))
    try:
        outcome = resume_run(progress, options, request)
    finally:
        if stream is not None:
            stream.close_target()
    if outcome.already_completed and not as_json:
        out(f"already completed: nothing to resume — {outcome.path}")
        return 0
    return report_outcome(outcome.run, outcome.path, outcome.exit_code, as_json)


@app.command("status")
def status_command(
    progress: ProgressArg,
    workflow: WorkflowMovedOpt = None,
    agents: AgentsDirOpt = [],  # noqa: B006 - typer copies list defaults
    # Status starts no MCP server (docs/spec.md 10.3), so it reads no configuration; the
    # option is still accepted, unlisted, so scripts that pass it keep working.
    mcp_config: Path | None = typer.Option(None, "--mcp-config", metavar="FILE", hidden=True),
    as_json: bool = typer.Option(False, "--json", help="Print the stable JSON status document."),
) -> int:
    """Where a run stands: status, step i of n, what resume would do, usage, edits, last error."""
    from ..api import ResumeRequest, RunOptions, run_status
    from ..front import Target, resume_target

    request = ResumeRequest(workflow_path=workflow)
    if resume_target(progress, request) is Target.BATCH:
        from .commands_batch import batch_status_command

        return batch_status_command(progress, as_json)

    status = run_status(progress, RunOptions(agent_dirs=tuple(agents)), request=request)
    return print_status(status, as_json)
