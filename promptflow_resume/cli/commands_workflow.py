"""``flow check WORKFLOW... [--json] [-v]``: load workflow files and print their plans.

It calls no model and runs no tool. Exit 0 when every file loads (warnings allowed), 4 when
any file has errors, 5 when a file does not exist or a folder holds no workflow files.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import EXIT_INVALID_FILE, EXIT_NOT_FOUND, EXIT_OK, FileNotFoundFlowError
from .app import app, err, out, print_json
from .options import McpConfigOpt

# The workflow and tool modules are imported where they are used: `flow --help` registers
# this command without paying for them.


def _workflow_files(given: Path) -> list[Path]:
    """A folder stands for the workflow files directly in it; a file stands for itself."""
    return sorted(given.glob("*.prompt.md")) if given.is_dir() else [given]


def _check_one(path: Path, mcp: bool, mcp_config: Path | None) -> tuple[dict[str, object], int]:
    from ..tools.mcp import mcp_names
    from ..tools.mcp_check import add_mcp_plan
    from ..workflow import check_workflow
    from ..workflow.model import Diagnostic
    from ..workflow.plan import plan_dict

    try:
        workflow, diagnostics = check_workflow(path)
    except FileNotFoundFlowError as error:
        diagnostic = Diagnostic("error", error.message, str(path), code="not-found")
        return plan_dict(str(path), None, [diagnostic]), EXIT_NOT_FOUND
    plan = plan_dict(str(path), workflow, diagnostics)
    if workflow is not None and (mcp or mcp_config or mcp_names(workflow)):
        add_mcp_plan(plan, workflow, Path.cwd(), config_path=mcp_config, start=mcp)
    return plan, EXIT_OK if plan["ok"] else EXIT_INVALID_FILE


def _with_mcp(text: str, plan: dict[str, object]) -> str:
    from ..tools.mcp_check import format_mcp

    extra = format_mcp(plan)
    return text if extra is None else f"{text}\n{extra}"


@app.command("check")
def check(
    workflows: list[Path] = typer.Argument(
        ..., metavar="WORKFLOW", help="Workflow files (*.prompt.md), or folders holding them."
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Print every file's whole plan, not one line per file."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print the plans as JSON."),
    mcp: bool = typer.Option(
        False, "--mcp", help="Start the MCP servers the workflows name and list their tools."
    ),
    mcp_config: McpConfigOpt = None,
) -> None:
    """Check workflow files and print each one's plan: steps, inputs, variables, tools, problems.

    One file: its whole plan. Several files or a folder: one line per file and a tally
    (-v prints every plan).
    """
    from ..workflow.model import Diagnostic
    from ..workflow.plan import (
        format_plan,
        format_summary,
        format_tally,
        format_tool_tally,
        plan_dict,
        tool_tally,
    )
    from ..workflow.toolnames import BUILTIN_TOOLS

    plans: list[dict[str, object]] = []  # every file checked, and every empty folder
    checked: list[dict[str, object]] = []  # the files alone
    codes: set[int] = set()
    empty: list[str] = []
    for given in workflows:
        files = _workflow_files(given)
        if not files:
            message = f"no *.prompt.md files in the folder {given}."
            diagnostic = Diagnostic("error", message, str(given), code="not-found")
            plans.append(plan_dict(str(given), None, [diagnostic]))
            empty.append(message)
            codes.add(EXIT_NOT_FOUND)
        for path in files:
            plan, file_code = _check_one(path, mcp, mcp_config)
            plans.append(plan)
            checked.append(plan)
            codes.add(file_code)
    # A missing file outranks an invalid one: nothing could be checked there at all.
    code = next((c for c in (EXIT_NOT_FOUND, EXIT_INVALID_FILE) if c in codes), EXIT_OK)
    if json_output:
        print_json({"ok": code == EXIT_OK, "workflows": plans, "tools": tool_tally(checked)})
        raise typer.Exit(code)
    for message in empty:
        err(f"error: {message}")
    one_file = len(checked) == 1 and not any(given.is_dir() for given in workflows)
    if verbose or one_file:
        out("\n\n".join(_with_mcp(format_plan(plan), plan) for plan in checked))
    elif checked:
        lines = [format_summary(plan) for plan in checked]
        out("\n".join([*lines, "", format_tally(checked)]))
    if len(checked) > 1:
        out(format_tool_tally(checked))
    if _names_unknown_tools(checked):
        out(f"Built-in tools: {', '.join(BUILTIN_TOOLS)}.")
    raise typer.Exit(code)


def _names_unknown_tools(plans: list[dict[str, object]]) -> bool:
    return any(
        d.get("code") == "unknown-tool"
        for plan in plans
        for d in plan["diagnostics"]  # type: ignore[attr-defined]
    )
