"""The flags of ``flow run`` and ``flow resume``, declared once, and the ``RunOptions`` they
make.

The flags come in groups, each a frozen dataclass whose fields are typer options
(``ConnectionFlags``: ``--provider``, ``--model``, ``--base-url``; ``AttemptFlags``: budgets,
timeouts, context, hooks, skills and permissions; ``McpFlags``; ``OutputFlags``; and resume's
own ``ChoiceFlags``, which settle what a resume finds). A command
names a group as one parameter and is decorated with ``spread_flag_groups``, which lists the
group's fields in the command's signature where that parameter stands (so ``--help`` shows
them in that place) and hands the command the group back as one record::

    @app.command("resume")
    @spread_flag_groups
    def resume_command(progress: ProgressArg, *, connection: ConnectionFlags, ...) -> int:
        options = SharedFlags(connection, attempt, mcp, output, agents, record).options(...)
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..base.durations import option_seconds
from ..providers.provider import DEFAULT_IDLE_TIMEOUT
from ..run.events import Reporter
from .options import (
    AcceptPermissionsOpt,
    AllowCommandsOpt,
    AllowFetchOpt,
    ApproveOpt,
    BaseUrlOpt,
    EventsOpt,
    FileOpt,
    HooksOpt,
    IdleTimeoutOpt,
    MaxCostOpt,
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
    ProviderOpt,
    RequestTimeoutOpt,
    SelectionOpt,
    SkillsOpt,
    SummaryJson,
    TimeoutOpt,
    TrustWorkspaceOpt,
    VerboseOpt,
)

if TYPE_CHECKING:
    from ..api import Choices, Permissions, RunOptions


class FlagGroup:
    """A run of options declared once: a frozen dataclass of typer options that
    ``spread_flag_groups`` spreads into a command's signature."""


@dataclasses.dataclass(frozen=True)
class ConnectionFlags(FlagGroup):
    """``--provider``, ``--model``, ``--base-url``: where the model calls go."""

    provider: ProviderOpt = None
    model: ModelOpt = None
    base_url: BaseUrlOpt = None


@dataclasses.dataclass(frozen=True)
class AttemptFlags(FlagGroup):
    """How an attempt runs: budgets, timeouts, the editor variables, instructions, skills,
    hooks, trust, snapshots, permissions and approvals."""

    max_cost: MaxCostOpt = None
    price: PriceOpt = dataclasses.field(default_factory=list)
    prices: PricesOpt = None
    max_tokens: MaxTokensOpt = None
    max_turns: MaxTurnsOpt = None
    timeout: TimeoutOpt = None
    idle_timeout: IdleTimeoutOpt = None
    request_timeout: RequestTimeoutOpt = None
    no_stream: NoStreamOpt = False
    max_suspensions: MaxSuspensionsOpt = None
    file: FileOpt = None
    selection: SelectionOpt = None
    no_instructions: NoInstructionsOpt = False
    skills: SkillsOpt = dataclasses.field(default_factory=list)
    no_skills: NoSkillsOpt = False
    hooks: HooksOpt = dataclasses.field(default_factory=list)
    no_hooks: NoHooksOpt = False
    trust_workspace: TrustWorkspaceOpt = False
    no_snapshots: NoSnapshotsOpt = False
    allow_commands: AllowCommandsOpt = dataclasses.field(default_factory=list)
    allow_fetch: AllowFetchOpt = dataclasses.field(default_factory=list)
    accept_permissions: AcceptPermissionsOpt = False
    approve: ApproveOpt = dataclasses.field(default_factory=list)
    no_approve: NoApproveOpt = False
    on_consent: OnConsentOpt = "refuse"


@dataclasses.dataclass(frozen=True)
class McpFlags(FlagGroup):
    """``--mcp-config`` and ``--mcp-input``: the MCP servers and their inputs."""

    mcp_config: McpConfigOpt = None
    mcp_input: McpInputOpt = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class OutputFlags(FlagGroup):
    """``--events``, ``--otel``, ``--json``, ``--verbose``: who hears about the run."""

    events: EventsOpt = None
    otel: OtelOpt = False
    as_json: SummaryJson = False
    verbose: VerboseOpt = False


@dataclasses.dataclass(frozen=True)
class ChoiceFlags(FlagGroup):
    """How ``flow resume`` settles what it finds: a changed workflow, a call in flight, calls
    flow did not record, a failed step; or ``--decide``: the run's model chooses."""

    rerun_changed: Annotated[
        bool,
        typer.Option(
            "--rerun-changed", help="Workflow changed: re-run from the first changed step."
        ),
    ] = False
    keep_completed: Annotated[
        bool,
        typer.Option(
            "--keep-completed",
            help="Workflow changed: keep recorded results, new text for the rest.",
        ),
    ] = False
    rerun_unsafe: Annotated[
        bool,
        typer.Option(
            "--rerun-unsafe", help="Run again a non-idempotent tool call that was in flight."
        ),
    ] = False
    trust_calls: Annotated[
        bool,
        typer.Option(
            "--trust-calls",
            help="Run the tool calls without a result that flow on this machine did not record "
            "(added or changed by hand, or the file came from elsewhere), as they are written. "
            "Check them first: flow status lists them.",
        ),
    ] = False
    deny_calls: Annotated[
        bool,
        typer.Option(
            "--deny-calls",
            help="Give those calls a refusal as their result instead of running them.",
        ),
    ] = False
    retry_step: Annotated[
        str | None,
        typer.Option(
            "--retry-step",
            metavar="STEP",
            help="Run STEP again from its start (its entries are archived, later steps run again).",
        ),
    ] = None
    skip_step: Annotated[
        str | None,
        typer.Option(
            "--skip-step",
            metavar="STEP",
            help="Mark STEP skipped and go on with the next one (${step:STEP} then reads a note).",
        ),
    ] = None
    decide: Annotated[
        bool,
        typer.Option(
            "--decide",
            help="Let the run's model choose continue / retry / skip / ask when the state is "
            "ambiguous (a call in flight, a failed step, a changed workflow); recorded as a "
            "decision entry. With --plan: show the decision, apply nothing.",
        ),
    ] = False

    def choices(self) -> Choices:
        """The choices as the API takes them (``--decide`` is the request's, not a choice)."""
        from ..api import Choices

        return Choices(
            self.rerun_changed,
            self.keep_completed,
            self.rerun_unsafe,
            retry_step=self.retry_step,
            skip_step=self.skip_step,
            trust_calls=self.trust_calls,
            deny_calls=self.deny_calls,
        )


def _fields(group: type[Any]) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(group)


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def spread_flag_groups(command: Callable[..., int]) -> Callable[..., int]:
    """``command`` with each parameter typed by a ``FlagGroup`` replaced, in its signature, by
    the group's options; called, it gets the group back as one record."""
    signature = inspect.signature(command, eval_str=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, type[Any]] = {}
    for param in signature.parameters.values():
        group = param.annotation
        if not (isinstance(group, type) and issubclass(group, FlagGroup)):
            # Keyword-only: an option without a default may follow one with a default.
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        groups[param.name] = group
        hints = typing.get_type_hints(group, include_extras=True)
        params.extend(
            inspect.Parameter(
                field.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=hints[field.name],
                default=_default(field),
            )
            for field in _fields(group)
        )

    @functools.wraps(command)
    def spread(**values: Any) -> int:
        for name, group in groups.items():
            names = [field.name for field in _fields(group)]
            values[name] = group(**{each: values.pop(each) for each in names})
        return command(**values)

    spread.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    spread.__annotations__ = {p.name: p.annotation for p in params}
    return spread


@dataclasses.dataclass(frozen=True)
class SharedFlags:
    """The flags ``flow run`` and ``flow resume`` share, as typer gave them: one place turns
    them into the run's options, so the two commands cannot drift apart."""

    connection: ConnectionFlags
    attempt: AttemptFlags
    mcp: McpFlags
    output: OutputFlags
    agents: list[Path]
    record: bool

    def options(
        self,
        interactive: bool,
        reporter: Reporter | None,
        stream: Reporter | None,
        selection: str | None = None,
    ) -> RunOptions:
        """The run's options: budgets, permissions, tools and where to report (``reporter``
        None: nowhere, as for a batch's rows, which have their own)."""
        from ..api import Limits, RunOptions
        from ..base.truststore import TRUST_FLAG, Trust
        from ..front import given_prices, mcp_input_values

        a = self.attempt
        limits = Limits(
            a.max_cost,
            a.max_tokens,
            a.max_turns,
            option_seconds("--timeout", a.timeout),
            max_suspensions=a.max_suspensions,
            prices=given_prices(a.price, a.prices),
        )
        return RunOptions(
            provider=self.connection.provider,
            model=self.connection.model,
            base_url=self.connection.base_url,
            record=self.record,
            stream=not a.no_stream,
            idle_timeout=option_seconds("--idle-timeout", a.idle_timeout) or DEFAULT_IDLE_TIMEOUT,
            request_timeout=option_seconds("--request-timeout", a.request_timeout),
            limits=limits,
            file=a.file,
            selection=selection,
            instructions=not a.no_instructions,
            skills=not a.no_skills,
            skill_dirs=tuple(a.skills),
            hooks=not a.no_hooks,
            hook_files=tuple(a.hooks),
            snapshots=not a.no_snapshots,
            permissions=permissions(a, interactive, reporter),
            mcp_config=self.mcp.mcp_config,
            mcp_ask=_ask_mcp_input if interactive else None,
            mcp_inputs=mcp_input_values(self.mcp.mcp_input),
            reporter=None if reporter is None else _watchers(reporter, stream, self.output.otel),
            agent_dirs=tuple(self.agents),
            approve=tuple(a.approve),
            approval=not a.no_approve,
            consent_stop=on_consent(a.on_consent),
            trust=Trust.entire(Path.cwd(), TRUST_FLAG) if a.trust_workspace else None,
        )


def given_options(ctx: typer.Context) -> list[str]:
    """The options given on the command line (or by their environment variable), as
    ``--help`` names them: what a command must use or refuse, whatever their value."""
    given = []
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        named = bool(param.opts) and param.opts[0].startswith("-")
        if named and source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            given.append(param.opts[0])
    return given


def on_consent(value: str) -> bool:
    """``--on-consent``: True for ``stop``."""
    if value not in ("refuse", "stop"):
        raise typer.BadParameter(
            f"expected refuse or stop; got {value!r}.", param_hint="--on-consent"
        )
    return value == "stop"


def permissions(attempt: AttemptFlags, interactive: bool, reporter: Reporter | None) -> Permissions:
    """What the flags allow, and a question on the terminal (when there is one) for the rest."""
    from ..api import Permissions
    from ..tools.consent import terminal_asker

    ask = None
    if interactive:
        asker = terminal_asker(read=input)

        def ask(question: str) -> Any:
            if reporter is not None:
                reporter.close()  # the live status line would draw over the question
            return asker(question)

    return Permissions(
        commands=tuple(attempt.allow_commands),
        hosts=tuple(attempt.allow_fetch),
        ask=ask,
        accept=attempt.accept_permissions,
    )


def _ask_mcp_input(input_id: str, description: str, password: bool) -> str:
    """Ask on the terminal for an input of the MCP configuration (hidden when a password)."""
    label = f"MCP input {input_id}" + (f" ({description})" if description else "")
    return str(typer.prompt(label, hide_input=password))


def _watchers(console: Reporter, stream: Reporter | None, otel: bool = False) -> Reporter:
    """The terminal display, and beside it the event stream and the span sender (``--otel``
    or an OTLP endpoint variable) when there are."""
    from ..front import tracer
    from ..run.events import Tee

    others = [r for r in (stream, tracer(otel, console)) if r is not None]
    return Tee(console, *others) if others else console
