"""``flow agents [--agents DIR]... [--json]``: list the custom agents flow finds by name.

The folders are searched in ``workflow.agentfind``'s order (each ``--agents DIR``, the
workspace's ``.github/agents`` and ``.claude/agents``, the user's ``~/.copilot/agents`` and
``~/.claude/agents``); an agent hides a later one of the same name. Exit 0 (also when none is
found), 4 when a found agent has errors, 5 when an ``--agents`` folder does not exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from .app import app, err, out, print_json
from .options import AgentsDirOpt

#: The exit code of an agent with errors (as ``flow check``'s workflow errors).
_EXIT_ERRORS = 4
#: How much of a description the table shows (--json has all of it).
_ABOUT = 80


@app.command("agents")
def agents_command(
    agents: AgentsDirOpt = [],  # noqa: B006 - typer copies list defaults
    as_json: bool = typer.Option(False, "--json", help="Print the agents as JSON."),
) -> None:
    """List the custom agents found: name, where, model, tools, who may invoke them,
    handoffs, the duplicates each hides, and their problems.

    These are the names a prompt file's `agent: NAME` and `flow run NAME` resolve.
    Exit 0 (also when none is found), 4 when an agent has errors, 5 when an --agents folder
    does not exist.
    """
    from ..base.errors import FileNotFoundFlowError
    from ..base.paths import display_path
    from ..check import checked_agents
    from ..workflow.agentfind import agent_folders

    for folder in agents:
        if not folder.is_dir():
            raise FileNotFoundFlowError(
                f"--agents {folder}: no such folder.",
                hint="Name a folder that holds *.agent.md files.",
            )
    workspace = Path.cwd()
    found = checked_agents(workspace, tuple(agents))
    records = [agent.to_dict() for agent in found]
    errors = sum(r["errors"] for r in records)
    code = _EXIT_ERRORS if errors else 0
    if as_json:
        searched = [
            {"path": str(folder), "source": source, "exists": folder.is_dir()}
            for folder, source in agent_folders(workspace, tuple(agents))
        ]
        print_json({"agents": records, "searched": searched, "errors": errors})
        raise typer.Exit(code)
    if not records:
        places = ", ".join(display_path(f) for f, _ in agent_folders(workspace, tuple(agents)))
        out(f"No custom agents found (searched {places}).")
        raise typer.Exit(0)
    out(_table(records, display_path))
    if errors:
        err(f"{errors} error{'s' if errors != 1 else ''} in the agents above.")
    raise typer.Exit(code)


def _model(record: dict[str, Any]) -> str:
    if record["model"] is None:
        return "(the run's)"
    return f"{record['provider']}/{record['model']}" if record["provider"] else record["model"]


def _invoked_by(record: dict[str, Any]) -> str:
    who = [
        name
        for name, flag in (
            ("people", record["user_invocable"]),
            ("agents", record["model_invocable"]),
        )
        if flag
    ]
    return ", ".join(who) or "nobody"


def _table(records: list[dict[str, Any]], show: Any) -> str:
    """One row per agent, then its path, description, tools, models, handoffs, the files it
    hides and its problems, indented below the row."""
    header = ("NAME", "WHERE", "MODEL", "INVOKED BY", "HANDOFFS")
    rows = [
        (
            r["name"],
            r["source"],
            _model(r),
            _invoked_by(r),
            ", ".join(h["label"] for h in r["handoffs"]) or "-",
        )
        for r in records
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    lines = [line(header)]
    for record, row in zip(records, rows, strict=True):
        lines.append(line(row))
        path = show(Path(record["path"]))
        about = record["description"] or ""
        if len(about) > _ABOUT:
            about = about[: _ABOUT - 1].rstrip() + "…"
        lines.append(f"    {path}" + (f" — {about}" if about else ""))
        if record["tools"]:
            lines.append(f"    tools: {', '.join(record['tools'])}")
        if len(record["models"]) > 1:
            lines.append(f"    models: {', '.join(record['models'])}")
        if record["mcp_servers"]:
            lines.append(f"    MCP servers: {', '.join(record['mcp_servers'])}")
        lines.extend(f"    hides {show(Path(p))}" for p in record["shadows"])
        for d in record["diagnostics"]:
            if d["severity"] == "error":
                where = f"line {d['line']}: " if d["line"] is not None else ""
                lines.append(f"    error: {where}{d['message']}")
        if record["warnings"]:
            many = "s" if record["warnings"] != 1 else ""
            lines.append(f"    {record['warnings']} warning{many} (flow check {path} lists them)")
    return "\n".join(lines)
