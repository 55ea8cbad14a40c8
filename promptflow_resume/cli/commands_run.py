"""``flow run``, ``flow resume`` and ``flow status``."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..base import clock
from ..base.durations import option_seconds
from ..base.paths import display_path
from ..base.wording import count
from ..events import Reporter
from ..progress.model import Run, Usage
from ..providers.base import DEFAULT_IDLE_TIMEOUT, Request
from .app import app, err, event_stream, out, print_json
from .options import (
    AcceptPermissionsOpt,
    AgentsDirOpt,
    AllowCommandsOpt,
    AllowFetchOpt,
    ApproveOpt,
    BaseUrlOpt,
    EventsOpt,
    FileOpt,
    HandoffOpt,
    HandoffsOpt,
    HooksOpt,
    IdleTimeoutOpt,
    InputOpt,
    InputsFileOpt,
    MaxCostOpt,
    MaxHandoffsOpt,
    MaxSuspensionsOpt,
    MaxTokensOpt,
    MaxTurnsOpt,
    McpConfigOpt,
    McpInputOpt,
    ModelOpt,
    NoApproveOpt,
    NoHooksOpt,
    NoInstructionsOpt,
    NoSkillsOpt,
    NoSnapshotsOpt,
    NoStreamOpt,
    OnConsentOpt,
    OtelOpt,
    PriceOpt,
    PricesOpt,
    ProgressArg,
    ProviderOpt,
    RequestTimeoutOpt,
    RunTargetArg,
    SelectionOpt,
    SkillsOpt,
    SummaryJson,
    TaskOpt,
    TimeoutOpt,
    TrustWorkspaceOpt,
    VerboseOpt,
    WorkflowMovedOpt,
)

if TYPE_CHECKING:
    # The API pulls in reconcile and every tool; `flow --help` registers this module without it.
    from ..api import Choices, ResumePlan, RunOptions


def _stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


class _Countdown:
    """A status line that counts down to a moment; rich renders it afresh at each refresh."""

    def __init__(self, template: str, until: float) -> None:
        self.template = template
        self.until = until

    def __rich__(self) -> str:
        left = max(0.0, self.until - clock.monotonic())
        return self.template.format(left=f"{left:.0f}s")


class _Generating:
    """The status line while a reply streams: tokens so far, their rate and the text's tail;
    rich renders it afresh at each refresh, so a token costs a count, not a redraw."""

    def __init__(self, head: str, usage: str) -> None:
        self.head = head
        self.usage = usage
        self.tokens = 0
        self.first: float | None = None
        self.last = 0.0
        self.tail = ""

    def add(self, delta: str) -> None:
        """One piece of reply text arrived."""
        now = time.monotonic()
        if self.first is None:
            self.first = now
        self.last = now
        self.tokens += 1
        self.tail = (self.tail + delta)[-200:]

    def rate(self) -> float | None:
        """Tokens per second since the first one (None until two have come)."""
        if self.first is None or self.tokens < 2 or self.last <= self.first:
            return None
        return (self.tokens - 1) / (self.last - self.first)

    def __rich__(self) -> str:
        if not self.tokens:
            return f"{self.head} · waiting for the first token · {self.usage}"
        rate = self.rate()
        per = f" · {rate:.1f} tokens/s" if rate is not None else ""
        tail = " ".join(self.tail.split())[-48:]
        return f"{self.head} · {count(self.tokens, 'token')}{per} · {self.usage} · …{tail}"


class ConsoleReporter(Reporter):
    """Progress on stderr: on a terminal, a live line (step i of n, a spinner, tokens and
    cost) and a line per step and tool; without one (CI logs), a plain line as each step
    starts and ends, so a log shows where a run is without ``-v``."""

    def __init__(self, *, live: bool, verbose: bool = False, quiet_dry_run: bool = False) -> None:
        self.live = live
        self.verbose = verbose
        #: Print every request in full (the ``echo`` dry run shows what would be sent) unless
        #: ``quiet_dry_run`` (``--json`` keeps stdout and stderr for the document).
        self.show_requests = False
        self._quiet_dry_run = quiet_dry_run
        self._status: Any = None
        self._step = ""
        self._usage = Usage()
        self._step_began = (0.0, Usage())
        #: The reply streaming now (None between replies).
        self._generating: _Generating | None = None
        if live:
            from ..base.printing import console

            self._console = console(stderr=True)

    def _show(self, what: Any) -> None:
        if not self.live:
            return
        if not isinstance(what, str):
            line: Any = what
        else:
            line = f"{self._step} · {what} · {self._usage_text(self._usage)}"
        if self._status is None:
            self._status = self._console.status(line)
            self._status.start()
        else:
            self._status.update(line)

    @staticmethod
    def _usage_text(usage: Usage) -> str:
        # A model with no price costs nothing as counted, which is not $0 (docs/spec.md 5.4).
        cost = f" · ${usage.cost_usd:.4f}" if usage.cost_usd else ""
        return f"{usage.total_tokens:,} tokens{cost}"

    def _print(self, text: str) -> None:
        if self.live:
            self._console.print(text, markup=False, highlight=False)
        else:
            err(text)

    def _fit(self, text: str, indent: int) -> str:
        """``text`` cut at a word boundary to fit the terminal's width (whole in a log)."""
        if not self.live:
            return text
        width = max(20, self._console.width - indent)
        return textwrap.shorten(text, width=width, placeholder=" …") if len(text) > width else text

    def dry_run(self) -> None:
        self.show_requests = not self._quiet_dry_run

    def run_started(self, run_usage: Usage) -> None:
        # A resumed run's totals carry on from its earlier attempts.
        self._usage = run_usage

    def notice(self, text: str) -> None:
        self._print(f"flow: {text}")

    def step_started(
        self, step_id: str, title: str, index: int, total: int, agent: str | None = None
    ) -> None:
        self._step = f"step {index}/{total} {title}"
        self._step_began = (time.monotonic(), dataclasses.replace(self._usage))
        if self.live or self.verbose:
            self._print(f"▶ {self._step}")
        else:
            err(f"flow: {self._step}: started")
        self._show("starting")

    def step_finished(self, step_id: str, status: str) -> None:
        began, usage = self._step_began
        seconds = time.monotonic() - began
        used = Usage(
            input_tokens=self._usage.input_tokens - usage.input_tokens,
            output_tokens=self._usage.output_tokens - usage.output_tokens,
            cost_usd=self._usage.cost_usd - usage.cost_usd,
        )
        line = f"{self._step}: {status} in {seconds:.1f}s · {self._usage_text(used)}"
        if self.live or self.verbose:
            self._print(f"■ {line}")
        else:
            err(f"flow: {line}")

    def model_call(self, step_id: str, turn: int, request: Request) -> None:
        if self.show_requests:
            from ..providers.echo import format_request

            self._print(f"--- request: step {step_id}, turn {turn} ---\n{format_request(request)}")
        self._generating = _Generating(f"{self._step} · turn {turn}", self._usage_text(self._usage))
        self._show(self._generating)

    def text(self, delta: str) -> None:
        shown = self._generating
        if not self.live or shown is None:
            return
        if not shown.tokens:  # after a retry's countdown the line shows the stream again
            self._show(shown)
        shown.add(delta)

    def model_reply(self, step_id: str, usage: Usage, run_usage: Usage) -> None:
        self._usage = run_usage
        done, self._generating = self._generating, None
        if done is not None and self.live and (rate := done.rate()) is not None:
            tokens = usage.output_tokens or done.tokens
            self._print(f"  · reply: {count(tokens, 'token')} at {rate:.1f} tokens/s")
        self._show("reply recorded")

    def tool_started(self, name: str, arguments: str, call_id: str = "") -> None:
        self._show(f"running {name}")
        if self.verbose:
            self._print(self._fit(f"  → {name} {arguments}", 0))

    def tool_finished(self, name: str, is_error: bool, summary: str, call_id: str = "") -> None:
        if self.live or self.verbose:
            mark = "✗" if is_error else "✓"
            self._print(self._fit(f"  {mark} {name}: {summary}", 0))

    def retry(self, attempt: int, delay: float, message: str) -> None:
        if self._generating is not None:  # the reply streams again from its start
            self._generating = _Generating(self._generating.head, self._generating.usage)
        self._print(f"flow: provider error, retry {attempt} in {delay:.1f}s: {message}")
        self._show(
            _Countdown(
                f"{self._step} · retry {attempt} in {{left}} · {message}", clock.monotonic() + delay
            )
        )

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def _report_outcome(run: Run, path: Path, exit_code: int, as_json: bool) -> int:
    from ..api import answer_location, approval_lines, run_summary

    path = Path(display_path(path))
    if as_json:
        data = run_summary(run, path)
        data["exit_code"] = exit_code
        print_json(data)
        return exit_code
    s = run_summary(run, path)
    cost = f", ${run.usage.cost_usd:.4f}" if run.usage.cost_usd else ""
    counts = f"{s['steps_done']}/{s['steps_total']} steps, {run.usage.total_tokens:,} tokens{cost}"
    if run.status == "completed":
        out(f"completed: {counts} — {path}")
    else:
        reason = f" ({run.reason})" if run.reason else ""
        err(f"{run.status}{reason}: {counts}.")
        if run.status == "failed" and run.last_error is not None:
            err(f"Cause: {run.last_error.message}")
        if run.status == "interrupted":
            err("Progress saved.")
        if run.status == "awaiting_input":
            err(f"Write the answer at {answer_location(path)}, then resume.")
            err(f"Or answer with: flow answer {path} --text TEXT")
        if run.status == "awaiting_approval":
            for line in approval_lines(run, path):
                err(line)
        if run.status == "suspended":
            err(f"The provider's window opens at {run.until}.")
            err(f"Continue then with: flow resume --wait {path}")
        else:
            err(f"Resume with: flow resume {path}")
    if run.worktree is not None:
        err(
            f"Worktree: {run.worktree.path} (branch {run.worktree.branch}). "
            f"See the changes with: flow review {path}"
        )
    return exit_code


def _watchers(console: Reporter, stream: Reporter | None, otel: bool = False) -> Reporter:
    """The terminal display, and beside it the event stream and the span sender (``--otel``
    or an OTLP endpoint variable) when there are."""
    from ..events import Tee
    from ..front import tracer

    others = [r for r in (stream, tracer(otel, console)) if r is not None]
    return Tee(console, *others) if others else console


@dataclasses.dataclass(frozen=True)
class _SharedFlags:
    """The flags ``flow run`` and ``flow resume`` share, as typer gave them: one place turns
    them into the run's options, so the two commands cannot drift apart. Each field is named
    as the commands' parameter, which is how ``of`` finds it."""

    provider: str | None
    model: str | None
    base_url: str | None
    record: bool
    max_cost: float | None
    price: list[str]
    prices: Path | None
    max_tokens: int | None
    max_turns: int | None
    timeout: str | None
    idle_timeout: str | None
    request_timeout: str | None
    no_stream: bool
    max_suspensions: int | None
    file: Path | None
    no_instructions: bool
    skills: list[Path]
    no_skills: bool
    hooks: list[Path]
    no_hooks: bool
    trust_workspace: bool
    allow_commands: list[str]
    allow_fetch: list[str]
    accept_permissions: bool
    approve: list[str]
    no_approve: bool
    on_consent: str
    mcp_config: Path | None
    mcp_input: list[str]
    agents: list[Path]
    otel: bool
    no_snapshots: bool

    @classmethod
    def of(cls, values: dict[str, Any]) -> _SharedFlags:
        """The shared flags out of a command's parameters (its ``locals()``)."""
        return cls(**{field.name: values[field.name] for field in dataclasses.fields(cls)})

    def options(
        self,
        interactive: bool,
        reporter: ConsoleReporter,
        stream: Reporter | None,
        selection: str | None = None,
    ) -> RunOptions:
        """The run's options: budgets, permissions, tools and where to report."""
        from ..api import Limits, RunOptions
        from ..base.truststore import TRUST_FLAG, Trust
        from ..front import given_prices, mcp_input_values

        limits = Limits(
            self.max_cost,
            self.max_tokens,
            self.max_turns,
            option_seconds("--timeout", self.timeout),
            max_suspensions=self.max_suspensions,
            prices=given_prices(self.price, self.prices),
        )
        permissions = _permissions(
            self.allow_commands,
            self.allow_fetch,
            interactive,
            reporter,
            accept=self.accept_permissions,
        )
        return RunOptions(
            provider=self.provider,
            model=self.model,
            base_url=self.base_url,
            record=self.record,
            stream=not self.no_stream,
            idle_timeout=option_seconds("--idle-timeout", self.idle_timeout)
            or DEFAULT_IDLE_TIMEOUT,
            request_timeout=option_seconds("--request-timeout", self.request_timeout),
            limits=limits,
            file=self.file,
            selection=selection,
            instructions=not self.no_instructions,
            skills=not self.no_skills,
            skill_dirs=tuple(self.skills),
            hooks=not self.no_hooks,
            hook_files=tuple(self.hooks),
            snapshots=not self.no_snapshots,
            permissions=permissions,
            mcp_config=self.mcp_config,
            mcp_ask=_ask_mcp_input if interactive else None,
            mcp_inputs=mcp_input_values(self.mcp_input),
            reporter=_watchers(reporter, stream, self.otel),
            agent_dirs=tuple(self.agents),
            approve=tuple(self.approve),
            approval=not self.no_approve,
            consent_stop=_on_consent(self.on_consent),
            trust=Trust.entire(Path.cwd(), TRUST_FLAG) if self.trust_workspace else None,
        )


@app.command("run")
def run_command(
    workflow: RunTargetArg,
    task: TaskOpt = None,
    agents: AgentsDirOpt = [],  # noqa: B006 - typer copies list defaults
    handoff: HandoffOpt = [],  # noqa: B006 - typer copies list defaults
    handoffs: HandoffsOpt = None,
    max_handoffs: MaxHandoffsOpt = None,
    input_: InputOpt = [],  # noqa: B006 - typer copies list defaults
    inputs_file: InputsFileOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    recording: Path | None = typer.Option(
        None,
        "--recording",
        metavar="FILE",
        help="With --provider replay: the recorded session to replay.",
    ),
    record: bool = typer.Option(
        False, "--record", help="Record this session beside the progress file, for replay."
    ),
    progress: Path | None = typer.Option(
        None,
        "--progress",
        metavar="FILE",
        help="Where to write progress.md (default .flow/runs/<run-id>/).",
    ),
    max_cost: MaxCostOpt = None,
    price: PriceOpt = [],  # noqa: B006 - typer copies list defaults
    prices: PricesOpt = None,
    max_tokens: MaxTokensOpt = None,
    max_turns: MaxTurnsOpt = None,
    timeout: TimeoutOpt = None,
    idle_timeout: IdleTimeoutOpt = None,
    request_timeout: RequestTimeoutOpt = None,
    no_stream: NoStreamOpt = False,
    max_suspensions: MaxSuspensionsOpt = None,
    file: FileOpt = None,
    selection: SelectionOpt = None,
    no_instructions: NoInstructionsOpt = False,
    skills: SkillsOpt = [],  # noqa: B006 - typer copies list defaults
    no_skills: NoSkillsOpt = False,
    hooks: HooksOpt = [],  # noqa: B006 - typer copies list defaults
    no_hooks: NoHooksOpt = False,
    trust_workspace: TrustWorkspaceOpt = False,
    no_snapshots: NoSnapshotsOpt = False,
    allow_commands: AllowCommandsOpt = [],  # noqa: B006 - typer copies list defaults
    allow_fetch: AllowFetchOpt = [],  # noqa: B006 - typer copies list defaults
    accept_permissions: AcceptPermissionsOpt = False,
    approve: ApproveOpt = [],  # noqa: B006 - typer copies list defaults
    no_approve: NoApproveOpt = False,
    on_consent: OnConsentOpt = "refuse",
    new: bool = typer.Option(
        False, "--new", "-N", help="Start fresh without looking for similar incomplete runs."
    ),
    single_prompt: bool = typer.Option(
        False, "--single-prompt", help="Send the whole file as one prompt (no steps)."
    ),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Accept the best similar run without asking."
    ),
    mcp_config: McpConfigOpt = None,
    mcp_input: McpInputOpt = [],  # noqa: B006 - typer copies list defaults
    worktree: bool = typer.Option(
        False,
        "--worktree",
        help="Work in a new git worktree on branch flow/<run-id> made from HEAD (needs a "
        "clean checkout); the progress file stays here. Then: flow review, flow merge, "
        "flow discard. Always starts a new run.",
    ),
    events: EventsOpt = None,
    otel: OtelOpt = False,
    as_json: SummaryJson = False,
    verbose: VerboseOpt = False,
) -> int:
    """Start a run of WORKFLOW (a prompt file, or a custom agent given --task); first offer
    to resume a similar incomplete run.

    The run is checkpointed after every model reply, tool call and step into its progress.md.
    Exit codes: 0 completed, 1 failed/budget/timeout, 8 needs review, 14 git problem
    (--worktree), 16 suspended at a provider's quota window (continue with flow resume
    --wait), 130 interrupted (see docs/spec.md for all).
    """
    from ..front import (
        RunCommand,
        handoffs_to_follow,
        read_selection,
        run_workflow,
    )

    follow = handoffs_to_follow(handoff, handoffs, max_handoffs)
    # The task read from stdin leaves no stdin for questions: nobody is there to answer them.
    task_text = sys.stdin.read() if task == "-" else read_selection(task, "--task")
    interactive = _stdin_is_terminal() and not as_json and task != "-"
    live = sys.stderr.isatty() and not as_json
    reporter = ConsoleReporter(live=live, verbose=verbose, quiet_dry_run=as_json)
    stream = event_stream(events)
    command = RunCommand(
        workflow,
        input_items=tuple(input_),
        inputs_file=inputs_file,
        task=task_text,
        handoffs=follow,
        ask=_ask_input if interactive else None,
        selection=selection,
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
    options = _SharedFlags.of(locals()).options(interactive, reporter, stream)
    try:
        outcome = run_workflow(command, options)
    finally:
        if stream is not None:
            stream.close_target()
    return _report_outcome(outcome.run, outcome.path, outcome.exit_code, as_json)


def _on_consent(value: str) -> bool:
    """``--on-consent``: True for ``stop``."""
    if value not in ("refuse", "stop"):
        raise typer.BadParameter(
            f"expected refuse or stop; got {value!r}.", param_hint="--on-consent"
        )
    return value == "stop"


def _permissions(
    allow_commands: list[str],
    allow_fetch: list[str],
    interactive: bool,
    reporter: Any,
    *,
    accept: bool = False,
) -> Any:
    """What the flags allow, and a question on the terminal (when there is one) for the rest."""
    from ..api import Permissions
    from ..tools.consent import terminal_asker

    ask = None
    if interactive:
        asker = terminal_asker(read=input)

        def ask(question: str) -> Any:
            reporter.close()  # the live status line would draw over the question
            return asker(question)

    return Permissions(
        commands=tuple(allow_commands), hosts=tuple(allow_fetch), ask=ask, accept=accept
    )


def _ask_mcp_input(input_id: str, description: str, password: bool) -> str:
    """Ask on the terminal for an input of the MCP configuration (hidden when a password)."""
    label = f"MCP input {input_id}" + (f" ({description})" if description else "")
    return str(typer.prompt(label, hide_input=password))


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
            _Countdown("waiting for the provider's window · {left} left", end)
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
def resume_command(
    progress: ProgressArg,
    agents: AgentsDirOpt = [],  # noqa: B006 - typer copies list defaults
    set_: list[str] = typer.Option(
        [],
        "--set",
        metavar="NAME=VALUE",
        help="Override an input for the rest of the run (repeatable).",
    ),
    plan_only: bool = typer.Option(
        False,
        "--plan",
        help="Show what would be reused and re-run, then exit without a model call "
        "(with --decide: only the decision's) and without writing anything.",
    ),
    rerun_changed: bool = typer.Option(
        False, "--rerun-changed", help="Workflow changed: re-run from the first changed step."
    ),
    keep_completed: bool = typer.Option(
        False,
        "--keep-completed",
        help="Workflow changed: keep recorded results, new text for the rest.",
    ),
    rerun_unsafe: bool = typer.Option(
        False, "--rerun-unsafe", help="Run again a non-idempotent tool call that was in flight."
    ),
    trust_calls: bool = typer.Option(
        False,
        "--trust-calls",
        help="Run the tool calls without a result that flow on this machine did not record "
        "(added or changed by hand, or the file came from elsewhere), as they are written. "
        "Check them first: flow status lists them.",
    ),
    deny_calls: bool = typer.Option(
        False,
        "--deny-calls",
        help="Give those calls a refusal as their result instead of running them.",
    ),
    retry_step: str | None = typer.Option(
        None,
        "--retry-step",
        metavar="STEP",
        help="Run STEP again from its start (its entries are archived, later steps run again).",
    ),
    skip_step: str | None = typer.Option(
        None,
        "--skip-step",
        metavar="STEP",
        help="Mark STEP skipped and go on with the next one (${step:STEP} then reads a note).",
    ),
    decide: bool = typer.Option(
        False,
        "--decide",
        help="Let the run's model choose continue / retry / skip / ask when the state is "
        "ambiguous (a call in flight, a failed step, a changed workflow); recorded as a "
        "decision entry. With --plan: show the decision, apply nothing.",
    ),
    record: bool = typer.Option(
        False,
        "--record",
        help="Record this attempt's model calls (a --decide decision's too) into "
        "session.recording.jsonl beside the progress file, for replay.",
    ),
    workflow: WorkflowMovedOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    max_cost: MaxCostOpt = None,
    price: PriceOpt = [],  # noqa: B006 - typer copies list defaults
    prices: PricesOpt = None,
    max_tokens: MaxTokensOpt = None,
    max_turns: MaxTurnsOpt = None,
    timeout: TimeoutOpt = None,
    idle_timeout: IdleTimeoutOpt = None,
    request_timeout: RequestTimeoutOpt = None,
    no_stream: NoStreamOpt = False,
    max_suspensions: MaxSuspensionsOpt = None,
    file: FileOpt = None,
    selection: SelectionOpt = None,
    no_instructions: NoInstructionsOpt = False,
    skills: SkillsOpt = [],  # noqa: B006 - typer copies list defaults
    no_skills: NoSkillsOpt = False,
    hooks: HooksOpt = [],  # noqa: B006 - typer copies list defaults
    no_hooks: NoHooksOpt = False,
    trust_workspace: TrustWorkspaceOpt = False,
    no_snapshots: NoSnapshotsOpt = False,
    allow_commands: AllowCommandsOpt = [],  # noqa: B006 - typer copies list defaults
    allow_fetch: AllowFetchOpt = [],  # noqa: B006 - typer copies list defaults
    accept_permissions: AcceptPermissionsOpt = False,
    approve: ApproveOpt = [],  # noqa: B006 - typer copies list defaults
    no_approve: NoApproveOpt = False,
    on_consent: OnConsentOpt = "refuse",
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask questions on a terminal."),
    wait: bool = typer.Option(
        False,
        "--wait",
        help="A run suspended at a provider's quota window: wait until the window opens "
        "(a countdown on a terminal; Ctrl-C stops waiting and leaves the file as it was), "
        "then continue. Without it, resuming before the window exits 16 and sends nothing.",
    ),
    mcp_config: McpConfigOpt = None,
    mcp_input: McpInputOpt = [],  # noqa: B006 - typer copies list defaults
    events: EventsOpt = None,
    otel: OtelOpt = False,
    as_json: SummaryJson = False,
    verbose: VerboseOpt = False,
) -> int:
    """Continue a stopped run exactly where it stopped.

    Completed steps and tool calls are reused, never re-run. If the workflow changed in steps
    that already ran, choose --rerun-changed or --keep-completed (on a terminal you are asked).
    After a failure or a call left in flight, --retry-step or --skip-step chooses for one
    step, or --decide lets the run's model choose (recorded in the file with its reason).
    A run suspended at a provider's quota window goes on once the window opens: --wait
    sleeps until then; before it, resume sends nothing and exits 16.
    """
    from ..api import Choices, ResumeRequest, RunOptions, resume_run, run_status
    from ..front import Target, given_prices, parse_assignments, read_selection, resume_target

    choices = Choices(
        rerun_changed,
        keep_completed,
        rerun_unsafe,
        retry_step=retry_step,
        skip_step=skip_step,
        trust_calls=trust_calls,
        deny_calls=deny_calls,
    )
    request = ResumeRequest(choices=choices, workflow_path=workflow, decide=decide)
    if resume_target(progress, request) is Target.BATCH:
        from .commands_batch import batch_status_command, resume_batch_command

        if plan_only:
            return batch_status_command(progress, as_json)
        return resume_batch_command(
            progress,
            workflow=workflow,
            provider=provider,
            model=model,
            base_url=base_url,
            max_cost=max_cost,
            prices=given_prices(price, prices),
            rerun_changed=rerun_changed,
            keep_completed=keep_completed,
            as_json=as_json,
            events=events,
        )
    if plan_only:
        connection = RunOptions(provider=provider, model=model, base_url=base_url)
        return _print_status(run_status(progress, connection, request), as_json, plan=True)
    interactive = _stdin_is_terminal() and not as_json and not yes
    live = sys.stderr.isatty() and not as_json
    if wait:
        _wait_for_window(progress, live)
    reporter = ConsoleReporter(live=live, verbose=verbose)
    stream = event_stream(events)
    request = dataclasses.replace(
        request,
        set_values=parse_assignments(set_, "--set"),
        confirm_change=_confirm_change if interactive else None,
    )
    flags = _SharedFlags.of(locals())
    options = flags.options(interactive, reporter, stream, read_selection(selection))
    try:
        outcome = resume_run(progress, options, request)
    finally:
        if stream is not None:
            stream.close_target()
    if outcome.already_completed and not as_json:
        out(f"already completed: nothing to resume — {outcome.path}")
        return 0
    return _report_outcome(outcome.run, outcome.path, outcome.exit_code, as_json)


def _print_tree(data: dict[str, Any]) -> None:
    """The sub-workflow runs under a run, indented, and the usage they add (spec 4.10)."""
    parent = data.get("parent")
    if parent:
        out(
            f"parent   step {parent.get('step')} of run {parent.get('run_id')} "
            f"({parent.get('path')}); resume that run"
        )

    def lines(children: list[dict[str, Any]], indent: str) -> None:
        for child in children:
            usage = child["usage"]
            # An invalid child says why (a broken file, a link back to a run above it).
            why = child["reason"] or child.get("error")
            reason = f" — {why}" if why else ""
            # A subagent's child is named by its agent within the step that called it.
            who = (
                f"{child['step']} › agent {child['agent']}" if child.get("agent") else child["step"]
            )
            out(
                f"{indent}{who}: {child['status']}{reason} · "
                f"{child['steps_done']}/{child['steps_total']} steps · "
                f"{count(usage['turns'], 'turn')}, ${usage['cost_usd']:.4f} · {child['path']}"
            )
            lines(child["children"], indent + "  ")

    if data.get("children"):
        out("children")
        lines(data["children"], "  ")
        total = data["usage_total"]
        if total != data["usage"]:
            out(
                f"total    {total['input_tokens']:,} in / {total['output_tokens']:,} out tokens, "
                f"{count(total['turns'], 'turn')}, ${total['cost_usd']:.4f} with the children"
            )


def _print_status(status: Any, as_json: bool, *, plan: bool = False) -> int:
    data = status.to_dict()
    if as_json:
        print_json(data)
        return 0
    from ..detect.prompt import progress_bar

    run = status.run
    bar = progress_bar(data["steps_done"], data["steps_total"], width=20)
    out(f"run      {data['run_id']}")
    out(f"status   {data['state']}")
    out(
        f"progress {bar} {data['percent']}% "
        f"({data['steps_done']}/{data['steps_total']} steps; at step {data['step_index']}"
        f"{' ' + data['step'] if data['step'] else ''})"
    )
    usage = data["usage"]
    # A run of models without a price shows tokens only: its $0 is unknown, not free.
    cost = f"${usage['cost_usd']:.4f}, " if data["priced"] or usage["cost_usd"] else ""
    out(
        f"usage    {usage['input_tokens']:,} in / {usage['output_tokens']:,} out tokens, "
        f"{count(usage['turns'], 'turn')}, {cost}{count(data['attempts'], 'attempt')}"
    )
    for reply in data["incomplete_replies"]:
        out(f"reply    step {reply['step']}: its reply (entry {reply['entry']}) {reply['why']}")
    for held in data["approvals"]:
        by = f" by {held['by']}" if held.get("by") else ""
        out(f"approval {held['call_id']} {held['tool']} ({held['why']}): {held['decision']}{by}")
    if data["until"]:
        out(
            f"until    {data['until']}: the provider's quota window opens then "
            f"(suspension {data['suspensions']}); `flow resume --wait` waits and continues"
        )
    _print_tree(data)
    chain = status.chain_text()
    if chain:
        out(f"handoffs {chain}")
    if data["workflow_error"]:
        out(f"workflow {data['workflow_error']}")
    elif data["workflow_changed"]:
        changed = (
            ", ".join(
                f"{c['step']} ({c['kind']}{', started' if c['started'] else ''})"
                for c in data["changed_steps"]
            )
            or "no step changed (shared parts only)"
        )
        out(f"workflow changed since the checkpoint: {changed}")
    else:
        out("workflow unchanged since the checkpoint")
    finished = run.status == "completed"
    if status.context is not None and (status.context.count or not finished):
        # A completed run sends no next request: only its compactions are worth a line.
        out(f"context  {status.context.text(run.config.model, next_request=not finished)}")
    tree = data.get("worktree")
    if tree:
        missing = "" if tree["exists"] or tree["state"] == "discarded" else ", folder missing"
        out(
            f"worktree {tree['path']} on branch {tree['branch']} from {tree['base'][:12]} "
            f"({tree['state']}{missing})"
        )
    if data["edited_entries"]:
        out(f"edited   {status.edited_entries_text()}")
    for change in data["edited_inputs"]:
        out(f"edited   input edited by hand: {change} (used by every prompt not answered yet)")
    for warning in data["warnings"]:
        out(f"warning  {warning}")
    decision = data.get("decision")
    if decision:
        refused = f" (refused: {decision['refused']})" if decision["refused"] else ""
        out(f"decision {decision['choice']}{refused} — {decision['reason']}")
        out(f"         situation: {decision['description']}")
        if decision["choice"] == "ask":
            out("         not applied (--plan); resuming with --decide stops for review")
        else:
            out("         not applied (--plan); `flow resume --decide` asks again and applies")
    if data.get("skip_steps"):
        out(f"skip     steps skipped: {', '.join(data['skip_steps'])}")
    trust = status.trust
    if trust is not None and (trust.files or trust.refused):
        out(f"trust    {trust.line()}")
    perms = data.get("permissions_change")
    if perms:
        needs = "; resume asks, or takes --accept-permissions" if perms["widened"] else ""
        out(f"perms    {perms['change']}{needs}")
    if status.nothing_to_do:
        out("resume   nothing to do: the run is completed")
    elif data["can_resume"]:
        out(f"resume   can resume from step {data['resume_from']}")
        if data["reset_steps"]:
            out(f"         steps that run again: {', '.join(data['reset_steps'])}")
        agents = data.get("resume_agents") or []
        again = [c for c in data["retry_tools"] if c not in agents]
        if again:
            out(f"         tool calls run again (idempotent): {', '.join(again)}")
        if agents:
            out(f"         subagent calls resumed inside their runs: {', '.join(agents)}")
        if plan and status.plan is not None:
            p = status.plan
            reused, to_run = ", ".join(p.reuse) or "nothing", ", ".join(p.rerun) or "nothing"
            out(f"         reused: {reused}; to run: {to_run}")
            out(f"         next request ≈ {data['estimated_input_tokens']:,} input tokens")
    else:
        out(f"resume   blocked: {data['blocked']}")
    if data["last_error"]:
        out(f"error    {data['last_error']['type']}: {data['last_error']['message']}")
    return 0


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
    return _print_status(status, as_json)
