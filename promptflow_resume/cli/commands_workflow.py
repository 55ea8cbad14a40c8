"""``flow check WORKFLOW... [--json] [-v]``: load workflow files and print their plans.

It calls no model and runs no tool. Exit 0 when every file loads (warnings allowed), 4 when
any file has errors, 5 when a file does not exist or a folder holds no workflow files.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app, err, out, print_json
from .options import AgentsDirOpt, McpConfigOpt

# The workflow and tool modules are imported where they are used: `flow --help` registers
# this command without paying for them.


def _with_mcp(text: str, plan: dict[str, object]) -> str:
    from ..tools.mcp_check import format_mcp

    extra = format_mcp(plan)
    return text if extra is None else f"{text}\n{extra}"


@app.command("check")
def check(
    workflows: list[Path] = typer.Argument(
        ...,
        metavar="WORKFLOW",
        help="Workflow files (*.prompt.md) or folders holding them; hooks files (*.json).",
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Print every file's whole plan, not one line per file."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print the plans as JSON."),
    mcp: bool = typer.Option(
        False, "--mcp", help="Start the MCP servers the workflows name and list their tools."
    ),
    mcp_config: McpConfigOpt = None,
    agents: AgentsDirOpt = [],  # noqa: B006 - typer copies list defaults
) -> None:
    """Check workflow files and print each one's plan: steps, inputs, variables, tools, problems.

    A *.json file is checked as a hooks file (Copilot's format): the hooks it runs, problems.

    One file: its whole plan. Several files or a folder: one line per file and a tally
    (-v prints every plan).
    """
    from ..check import check_workflows
    from ..workflow.plan import format_plan, format_summary, format_tally, format_tool_tally
    from ..workflow.toolnames import BUILTIN_TOOLS

    report = check_workflows(workflows, mcp=mcp, mcp_config=mcp_config, agent_dirs=tuple(agents))
    code, checked = report.exit_code, report.checked
    if json_output:
        print_json(report.to_dict())
        raise typer.Exit(code)
    for message in report.empty_folders:
        err(f"error: {message}")
    one_file = len(checked) == 1 and not any(given.is_dir() for given in workflows)
    if verbose or one_file:
        out("\n\n".join(_with_mcp(format_plan(plan), plan) for plan in checked))
    elif checked:
        lines = [format_summary(plan) for plan in checked]
        out("\n".join([*lines, "", format_tally(checked)]))
    workflows_checked = [plan for plan in checked if "hooks" not in plan]
    if len(workflows_checked) > 1:
        out(format_tool_tally(workflows_checked))
    if report.names_unknown_tools:
        out(f"Built-in tools: {', '.join(BUILTIN_TOOLS)}.")
    trust = report.trust
    if trust is not None and (trust.files or trust.refused):
        out(f"trust: {trust.line()}")
    raise typer.Exit(code)
