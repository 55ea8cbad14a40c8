"""What ``flow check`` says about MCP tools: which servers a workflow's tool names reach and,
with ``--mcp``, the tools those servers offer (the servers are started only then)::

    add_mcp_plan(plan, workflow, Path.cwd(), config_path=None, start=True)
    print(format_mcp(plan))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..workflow.model import Workflow
from .mcp import McpServers, mcp_names, task_only_line
from .mcp_config import find_configs, load_configs


def add_mcp_plan(
    plan: dict[str, Any],
    workflow: Workflow,
    workspace: Path,
    *,
    config_path: str | Path | None = None,
    start: bool = False,
) -> None:
    """Add ``plan["mcp"]`` and mark the plan's tool names that MCP servers provide.

    A name a configured server provides is no longer "unknown" (its warning is dropped);
    without ``start`` it resolves to its server, with ``start`` to the tools offered.
    """
    names = mcp_names(workflow)
    paths = find_configs(workspace, config_path) if names or config_path else []
    if not paths:
        return
    config = load_configs(paths, workspace=workspace, resolve_inputs=start, wanted=names)
    servers = McpServers(config, wanted=names, reserved=_reserved(plan))
    offered: list[dict[str, Any]] = []
    notices = list(config.warnings) + config.skipped(names)
    try:
        if start:
            servers.offer()
            notices.extend(task_only_line(s, t) for s, t in servers.task_only().items())
            for model_name, tool in servers.tools.items():
                if any(model_name in targets for targets in servers.resolved.values()):
                    offered.append(
                        {
                            "name": model_name,
                            "server": tool.info.server,
                            "tool": tool.info.name,
                            "read_only": tool.info.read_only,
                            "idempotent": tool.idempotent,
                        }
                    )
    finally:
        servers.close()
    covered: set[str] = set()
    for record in plan.get("tools", []):
        name = record["name"]
        if record["kind"] != "unknown" or name not in names:
            continue
        if start:
            targets = list(servers.resolved.get(name, ()))
        else:
            head = name.split("/", 1)[0]
            targets = [f"MCP server {head}"] if head in config.servers else []
            if not targets and "/" not in name and config.servers:
                targets = [f"a tool of {', '.join(config.servers)} (if one has it)"]
        if targets:
            record["kind"] = "mcp"
            record["resolves_to"] = targets
            covered.add(name)
    kept = [
        d
        for d in plan["diagnostics"]
        if not (d["code"] == "unknown-tool" and any(f"`{n}`" in d["message"] for n in covered))
    ]
    plan["warnings"] -= len(plan["diagnostics"]) - len(kept)
    kept.extend(
        {
            "severity": "warning",
            "line": None,
            "column": None,
            "field": None,
            "code": "mcp-config",
            "message": notice,
        }
        for notice in notices
    )
    plan["warnings"] += len(notices)
    plan["diagnostics"] = kept
    plan["mcp"] = {
        "config": config.where,
        "servers": list(config.servers),
        "started": start,
        "tools": offered,
    }


def _reserved(plan: dict[str, Any]) -> set[str]:
    """Names already taken by the workflow's built-ins and commands."""
    taken: set[str] = set()
    for record in plan.get("tools", []):
        if record["kind"] != "unknown":
            taken.update(record.get("resolves_to") or [record["name"]])
    return taken


def format_mcp(plan: dict[str, Any]) -> str | None:
    """The lines ``flow check`` prints about MCP tools, or None when there is nothing to say."""
    mcp = plan.get("mcp")
    if not mcp:
        return None
    servers = ", ".join(mcp["servers"]) or "none"
    lines = [f"  mcp       {mcp['config']} (servers: {servers})"]
    if not mcp["started"]:
        lines.append("            run `flow check --mcp` to start them and list their tools")
        return "\n".join(lines)
    lines.append(f"  mcp tools ({len(mcp['tools'])})")
    width = max((len(t["name"]) for t in mcp["tools"]), default=0)
    origin = max((len(t["server"]) + len(t["tool"]) + 1 for t in mcp["tools"]), default=0)
    for tool in mcp["tools"]:
        if not tool["idempotent"]:
            safety = "not idempotent: a call cut short is reviewed, not re-run"
        else:
            safety = "read-only" if tool["read_only"] else "idempotent"

        where = f"{tool['server']}/{tool['tool']}"
        lines.append(f"    {tool['name']:<{width}}  {where:<{origin}}  {safety}")
    return "\n".join(lines)
