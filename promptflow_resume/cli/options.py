"""Arguments and options that several commands share, declared once.

Every argument and every option that takes a value has an upper-case placeholder
(``WORKFLOW``, ``PROGRESS``, ``NAME=VALUE``, ``USD``), so ``--help`` reads the same in every
command; a test checks that none is left without one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..base.wording import either
from ..providers import REGISTRY as PROVIDERS

#: The WORKFLOW argument of ``run`` and ``detect``.
WorkflowArg = Annotated[
    Path, typer.Argument(metavar="WORKFLOW", help="The workflow file (*.prompt.md).")
]
RunTargetArg = Annotated[
    Path,
    typer.Argument(
        metavar="WORKFLOW",
        help="A prompt file, an agent (*.agent.md) or a SKILL.md, or the name of an agent or "
        "a skill (as flow agents and flow skills list them).",
    ),
]


def _progress_file(path: Path) -> Path:
    """A run's folder stands for its progress.md (``progress.location``)."""
    from ..progress.location import progress_file

    return progress_file(path)


def _progress_files(paths: list[Path]) -> list[Path]:
    return [_progress_file(p) for p in paths]


#: The PROGRESS argument of every command that works on one run: the file or its folder.
ProgressArg = Annotated[
    Path,
    typer.Argument(
        metavar="PROGRESS",
        help="The run's progress.md, or the run's folder.",
        callback=_progress_file,
    ),
]
#: Several PROGRESS arguments (``flow validate``), each a file or a run's folder.
ProgressArgs = Annotated[
    list[Path],
    typer.Argument(
        metavar="PROGRESS",
        help="Progress files (progress.md), or runs' folders.",
        callback=_progress_files,
    ),
]

InputOpt = Annotated[
    list[str],
    typer.Option(
        "--input",
        "-i",
        metavar="NAME=VALUE",
        help="An input value (repeatable); it wins over --inputs.",
    ),
]
InputsFileOpt = Annotated[
    Path | None,
    typer.Option("--inputs", metavar="FILE", help="A YAML or JSON file of input values."),
]
WorkflowMovedOpt = Annotated[
    Path | None,
    typer.Option(
        "--workflow", metavar="WORKFLOW", help="The workflow file, when it moved since the run."
    ),
]
ProviderOpt = Annotated[
    str | None,
    typer.Option(
        "--provider",
        "-p",
        metavar="PROVIDER",
        help=f"Model provider: {either(PROVIDERS)}.",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", "-m", metavar="MODEL", help="Model id (overrides the workflow's)."),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        metavar="URL",
        help="Where the openai provider sends requests: a preset (openai, github, ollama, "
        "azure) or the URL of an OpenAI-compatible server (vLLM, LM Studio, ...).",
    ),
]


def _usd(value: float | None) -> float | None:
    # click's float accepts "nan" and "inf"; a NaN limit would compare false with every cost.
    if value is not None and not 0 <= value < float("inf"):
        raise typer.BadParameter("give a finite amount of US dollars, 0 or more.")
    return value


MaxCostOpt = Annotated[
    float | None,
    typer.Option("--max-cost", metavar="USD", help="Stop before spending more USD.", callback=_usd),
]
PriceOpt = Annotated[
    list[str],
    typer.Option(
        "--price",
        metavar="MODEL=IN/OUT[/CACHED]",
        help="USD per million input/output (and cached input) tokens for MODEL, before flow's "
        "table; repeatable. A local model that costs nothing: --price llama3=0/0. Recorded in "
        "the run.",
    ),
]
PricesOpt = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        metavar="FILE",
        help="A YAML or JSON file: model -> {input, output, cached_input} in USD per million "
        "tokens (--price wins for the same model).",
    ),
]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", metavar="N", help="Stop after this many tokens.")
]
MaxTurnsOpt = Annotated[
    int | None,
    typer.Option("--max-turns", metavar="N", help="Stop after this many model turns."),
]
TimeoutOpt = Annotated[
    str | None,
    typer.Option(
        "--timeout",
        metavar="DURATION",
        help="Wall-clock limit for this attempt: 90 (seconds), 10m, 1h30m, 2d.",
    ),
]
IdleTimeoutOpt = Annotated[
    str | None,
    typer.Option(
        "--idle-timeout",
        metavar="DURATION",
        help="End a model request after this long without a token (default 120s); the "
        "request is retried. A request that is not streamed must be answered whole within it.",
    ),
]
RequestTimeoutOpt = Annotated[
    str | None,
    typer.Option(
        "--request-timeout",
        metavar="DURATION",
        help="Also limit each model request as a whole (default: no limit); one that passes "
        "it is not sent again.",
    ),
]
NoStreamOpt = Annotated[
    bool,
    typer.Option(
        "--no-stream",
        help="Do not stream replies (for a server that cannot): the idle timeout then covers "
        "the whole answer.",
    ),
]
MaxSuspensionsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-suspensions",
        metavar="N",
        min=0,
        help="Quota windows the run may be suspended at, counted over all its attempts "
        "(default 3; 0: never suspend, fail instead). Beyond it the run fails.",
    ),
]
FileOpt = Annotated[
    Path | None, typer.Option("--file", metavar="FILE", help="The file ${file} stands for.")
]
AgentsDirOpt = Annotated[
    list[Path],
    typer.Option(
        "--agents",
        metavar="DIR",
        help="A folder of custom agents, searched by name before .github/agents, "
        ".claude/agents and the user's folders (repeatable).",
    ),
]
HandoffOpt = Annotated[
    list[str],
    typer.Option(
        "--handoff",
        metavar="LABEL",
        help="Follow the agent's handoff LABEL after its answer, then the next agent's, in "
        "the order given (repeatable): one run, one step per agent.",
    ),
]
HandoffsOpt = Annotated[
    str | None,
    typer.Option(
        "--handoffs",
        metavar="MODE",
        help="MODE is auto: follow each handoff marked send: true, agent after agent (at most "
        "--max-handoffs).",
    ),
]
MaxHandoffsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-handoffs",
        metavar="N",
        min=0,
        help="With --handoffs auto: follow at most N handoffs (default 5).",
    ),
]
TaskOpt = Annotated[
    str | None,
    typer.Option(
        "--task",
        metavar="TEXT|@FILE|-",
        help="An agent's task (*.agent.md): TEXT, @FILE for a file's text, or - to read it "
        "from stdin. Without it, flow asks on a terminal and refuses without one.",
    ),
]
SelectionOpt = Annotated[
    str | None,
    typer.Option(
        "--selection",
        metavar="TEXT|@FILE",
        help="What ${selection} stands for: TEXT, or @FILE for a file's text.",
    ),
]
NoInstructionsOpt = Annotated[
    bool,
    typer.Option("--no-instructions", help="Leave out the workspace's custom instructions."),
]
SkillsOpt = Annotated[
    list[Path],
    typer.Option(
        "--skills",
        metavar="DIR",
        help="Also offer the skills in DIR (a folder of skill folders, or one skill's "
        "folder), before the workspace's and your own; repeatable.",
    ),
]
NoSkillsOpt = Annotated[
    bool,
    typer.Option("--no-skills", help="Offer no skills (no list, no load_skill tool)."),
]
HooksOpt = Annotated[
    list[Path],
    typer.Option(
        "--hooks",
        metavar="FILE",
        help="Also run the hooks of this hooks.json (Copilot format; repeatable).",
    ),
]
NoHooksOpt = Annotated[
    bool,
    typer.Option(
        "--no-hooks",
        help="Do not run the workspace's hooks (.github/hooks/); --hooks files still run.",
    ),
]
TrustWorkspaceOpt = Annotated[
    bool,
    typer.Option(
        "--trust-workspace",
        envvar="FLOW_TRUST_WORKSPACE",
        help="Trust the workspace's hooks, MCP configuration and agents for this run only, as "
        "they are now (for CI; on your machine, `flow trust DIR` records it once).",
    ),
]
NoSnapshotsOpt = Annotated[
    bool,
    typer.Option(
        "--no-snapshots",
        help="Do not snapshot the working tree after each tool call that can change files "
        "(in a git repository; rewind and fork then move the conversation only).",
    ),
]
AllowCommandsOpt = Annotated[
    list[str],
    typer.Option(
        "--allow-commands",
        metavar="PATTERN",
        help="Let the model run shell commands matching this glob ('*' = all; repeatable).",
    ),
]
AllowFetchOpt = Annotated[
    list[str],
    typer.Option(
        "--allow-fetch",
        metavar="HOST",
        help="Let the model fetch pages from this host ('*.example.org', '*'; repeatable).",
    ),
]
ApproveOpt = Annotated[
    list[str],
    typer.Option(
        "--approve",
        metavar="PATTERN",
        help="Hold calls of tools matching this pattern for a person's yes, besides the "
        "workflow's approve: list (run_in_terminal, edit, 'github/*'; repeatable).",
    ),
]
NoApproveOpt = Annotated[
    bool,
    typer.Option(
        "--no-approve",
        help="Turn the approval policy off for this run or resume: held calls run without "
        "asking (decisions already written still apply).",
    ),
]
OnConsentOpt = Annotated[
    str,
    typer.Option(
        "--on-consent",
        metavar="MODE",
        help="refuse or stop. Without a terminal, a command or fetch that needs consent is "
        "refused (the model is told; the default) or, with stop, held: the run stops "
        "awaiting_approval until flow approve grants that call.",
    ),
]
AcceptPermissionsOpt = Annotated[
    bool,
    typer.Option(
        "--accept-permissions",
        help="Go on although the workflow's allow-commands or allow-fetch allow more than when "
        "the run last went on (without a terminal a resume stops otherwise).",
    ),
]
McpConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--mcp-config",
        metavar="FILE",
        help="MCP servers (JSON); default: the workspace's .vscode/mcp.json.",
    ),
]
McpInputOpt = Annotated[
    list[str],
    typer.Option(
        "--mcp-input",
        metavar="ID=VALUE",
        help="The value of an MCP configuration's ${input:ID} (repeatable); before "
        "FLOW_MCP_INPUT_<ID> and the terminal. Never recorded.",
    ),
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Say more about what happens.")]
#: ``--json`` of the commands that print a summary of what they did.
SummaryJson = Annotated[bool, typer.Option("--json", help="Print a machine-readable summary.")]
#: ``--otel`` of the commands that run workflows (docs/spec.md 13).
OtelOpt = Annotated[
    bool,
    typer.Option(
        "--otel",
        help="Send the run's OpenTelemetry spans to the OTLP/HTTP endpoint of "
        "OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318); on without this flag when "
        "that variable is set. Needs the [otel] extra.",
    ),
]
#: ``--events FILE`` of the commands that run workflows (docs/spec.md 4.16).
EventsOpt = Annotated[
    str | None,
    typer.Option(
        "--events",
        metavar="FILE",
        help="Append the run's events to FILE as JSON Lines (`-`: stdout, and everything "
        "else flow prints goes to stderr); schema: flow schema events. Default: $FLOW_EVENTS.",
    ),
]
