"""``flow check WORKFLOW... [--json]``: load workflow files and print their plans.

It calls no model and runs no tool. Exit 0 when every file loads (warnings allowed), 4 when
any file has errors, 5 when a file does not exist.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import EXIT_INVALID_FILE, EXIT_NOT_FOUND, EXIT_OK, FileNotFoundFlowError
from ..tools.mcp import mcp_names
from ..tools.mcp_check import add_mcp_plan, format_mcp
from ..workflow import check_workflow
from ..workflow.model import Diagnostic
from ..workflow.plan import format_plan, plan_dict
from .app import app, out, print_json


def _with_mcp(text: str, plan: dict[str, object]) -> str:
    extra = format_mcp(plan)
    return text if extra is None else f"{text}\n{extra}"


@app.command("check")
def check(
    workflows: list[Path] = typer.Argument(
        ..., metavar="WORKFLOW...", help="Workflow files (*.prompt.md), or folders holding them."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print the plans as JSON."),
    mcp: bool = typer.Option(
        False, "--mcp", help="Start the MCP servers the workflows name and list their tools."
    ),
    mcp_config: Path | None = typer.Option(
        None, "--mcp-config", help="MCP servers (JSON); default: the workspace's .vscode/mcp.json."
    ),
) -> None:
    """Check workflow files and print each one's plan: steps, inputs, variables, tools, problems."""
    plans = []
    code = EXIT_OK
    # A folder stands for the workflow files directly in it.
    paths = [
        found
        for given in workflows
        for found in (sorted(given.glob("*.prompt.md")) or [given] if given.is_dir() else [given])
    ]
    for path in paths:
        try:
            workflow, diagnostics = check_workflow(path)
        except FileNotFoundFlowError as error:
            workflow = None
            diagnostics = [Diagnostic("error", error.message, str(path), code="not-found")]
            code = EXIT_NOT_FOUND
        plan = plan_dict(str(path), workflow, diagnostics)
        if workflow is not None and (mcp or mcp_config or mcp_names(workflow)):
            add_mcp_plan(plan, workflow, Path.cwd(), config_path=mcp_config, start=mcp)
        if not plan["ok"] and code == EXIT_OK:
            code = EXIT_INVALID_FILE
        plans.append(plan)
    if json_output:
        print_json({"ok": code == EXIT_OK, "workflows": plans})
    else:
        out("\n\n".join(_with_mcp(format_plan(plan), plan) for plan in plans))
    if code != EXIT_OK:
        raise typer.Exit(code)
