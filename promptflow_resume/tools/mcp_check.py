"""What ``flow check`` says about MCP tools: which servers a workflow's tool names reach and,
with ``--mcp``, the tools those servers offer (the servers are started only then)::

    add_mcp_plan(plan, workflow, Path.cwd(), config_path=None, start=True)
    print(format_mcp(plan))
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..base.errors import FlowError
from ..base.truststore import Trust
from ..workflow.records import Diagnostic, Workflow
from .mcp import McpServers
from .mcp_config import (
    agent_config,
    find_configs,
    load_configs,
    trusted_configs,
    with_agent_servers,
)
from .mcp_listing import task_only_line
from .mcp_records import McpConfig
from .mcp_setup import mcp_names


def agent_server_problems(workflow: Workflow, workspace: Path) -> list[Diagnostic]:
    """Every problem of the servers an agent defines itself (``mcp-servers:``), each an
    error at its place in the agent file, without starting anything or asking for a secret:
    ``flow check`` and ``flow agents`` report the same ones, and a run that starts the agent
    refuses the first."""
    file = workflow.mcp_servers_file
    if not workflow.mcp_servers or file is None or file != workflow.path:
        return []  # another file's servers (the agent a prompt file uses) are that file's
    try:
        # No tool name is wanted: every entry is read, and a broken one lands in `problems`.
        # The file is the agent itself, so its problems are placed in it.
        config = agent_config(
            file, workflow.mcp_servers, workspace=workspace, resolve_inputs=False, wanted=[]
        )
    except FlowError as error:
        return [error_diagnostic(error, workflow)]
    return [error_diagnostic(problem, workflow) for problem in config.problems.values()]


def error_diagnostic(error: FlowError, workflow: Workflow | None = None) -> Diagnostic:
    """``error`` as a ``flow check`` error; a field of an agent's ``mcp-servers:`` (read as a
    file's ``servers``) is named and placed as the agent file has it."""
    field = error.field
    line, column = error.line, error.column
    message = error.message.rstrip(".") + "." + (f" {error.hint}" if error.hint else "")
    own = workflow is not None and error.path is not None and Path(error.path) == workflow.path
    if own and field and field.startswith("$.servers.") and workflow is not None:
        field = "$.mcp-servers." + field.removeprefix("$.servers.")
        line, column = _position(workflow, field)
    elif error.path is not None:
        # Another file's problem (.vscode/mcp.json): the record is the workflow's, so the
        # message names where the problem is.
        where = error.location or error.path
        message = f"{where}" + (f" {field}" if field else "") + f": {message}"
        line = column = None
    return Diagnostic(
        "error",
        message,
        str(workflow.path if workflow is not None else error.path or ""),
        line=line,
        column=column,
        field=field,
        code="mcp-config",
    )


def _position(workflow: Workflow, field: str) -> tuple[int | None, int | None]:
    """Where ``field`` ($.mcp-servers.NAME.headers.KEY) is in the agent file's front matter."""
    from ..workflow.diagnostics import Collector
    from ..workflow.header import read_front_matter
    from ..workflow.source import split_source

    try:
        text = workflow.path.read_text(encoding="utf-8")
        parsed = read_front_matter(split_source(text, path=str(workflow.path)), Collector(""))
    except (OSError, UnicodeDecodeError, FlowError):
        return None, None
    if parsed is None:
        return None, None
    parts: list[str | int] = []
    for key, index in re.findall(r"\.([^.\[\]]+)|\[(\d+)\]", field.removeprefix("$")):
        parts.append(int(index) if index else key)
    return parsed[1].value(tuple(parts))


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
    config, held = _plan_config(workflow, workspace, names, config_path, start)
    if config is None:
        return
    servers = McpServers(config, wanted=names, reserved=_reserved(plan))
    offered: list[dict[str, Any]] = []
    notices = [*held, *config.warnings, *config.skipped(names)]
    try:
        if start:
            servers.offer()
            notices.extend(task_only_line(s, t) for s, t in servers.task_only().items())
            offered = _offered(servers)
    finally:
        servers.close()
    covered, lacking = _mark_mcp_tools(plan, names, servers, config, start)
    for step, step_record in zip(workflow.steps, plan.get("steps", []), strict=False):
        # Steps without their own tools list are offered the MCP tools too (engine).
        if step.kind == "prompt" and step.tools is None:
            step_record["tools"] = [*step_record["tools"], *(n for n in names if n in covered)]
    _replace_diagnostics(plan, covered, lacking, notices)
    plan["mcp"] = {
        "config": config.where,
        "servers": list(config.servers),
        "started": start,
        "tools": offered,
    }


def _plan_config(
    workflow: Workflow,
    workspace: Path,
    names: list[str],
    config_path: str | Path | None,
    start: bool,
) -> tuple[McpConfig | None, list[str]]:
    """The configuration the plan shows (None without one), and a line for each file whose
    servers are not started because the folder is not trusted."""
    paths = find_configs(workspace, config_path) if names or config_path else []
    held: list[str] = []
    if start and config_path is None:
        # Starting a server of the workspace's own configuration takes the folder's trust,
        # as a run does; without it the file is read for the plan and nothing starts.
        trust = Trust.for_folder(workspace)
        paths, left = trusted_configs(paths, trust)
        held = [
            f"not started: {trust.relative(p) or p} ({verdict.value}); `flow trust "
            f"{trust.root}` trusts the folder's servers as they are now."
            for p, verdict in left
        ]
    own = workflow.mcp_servers if workflow.mcp_servers_file is not None else {}
    if not paths and not own:
        return None, held
    files = (
        load_configs(paths, workspace=workspace, resolve_inputs=start, wanted=names)
        if paths
        else None
    )
    config = files
    if own and workflow.mcp_servers_file is not None:
        agent = agent_config(
            workflow.mcp_servers_file,
            own,
            workspace=workspace,
            resolve_inputs=start,
            wanted=names,
        )
        config = with_agent_servers(agent, files)
    return config, held


def _offered(servers: McpServers) -> list[dict[str, Any]]:
    """The tools the started servers offer the workflow, as the plan lists them."""
    return [
        {
            "name": model_name,
            "server": tool.info.server,
            "tool": tool.info.name,
            "read_only": tool.info.read_only,
            "idempotent": tool.idempotent,
        }
        for model_name, tool in servers.tools.items()
        if any(model_name in targets for targets in servers.resolved.values())
    ]


def _mark_mcp_tools(
    plan: dict[str, Any],
    names: list[str],
    servers: McpServers,
    config: McpConfig,
    start: bool,
) -> tuple[set[str], dict[str, str]]:
    """Mark the plan's unknown tool names that a server provides as ``mcp``; returns them,
    and each written ``server/tool`` whose started server lacks the tool -> what it has."""
    covered: set[str] = set()
    lacking: dict[str, str] = {}
    for record in plan.get("tools", []):
        name = record["name"]
        if record["kind"] != "unknown" or name not in names:
            continue
        head, _, tail = name.partition("/")
        if start:
            targets = list(servers.resolved.get(name, ()))
            if not targets and head in config.servers and tail:
                has = sorted(t.info.name for t in servers.tools.values() if t.info.server == head)
                lacking[name] = f"server `{head}` has no tool `{tail}`" + (
                    f" (it has: {', '.join(has)})" if has else " (it lists no tools)"
                )
                record["problem"] = lacking[name]
        else:
            targets = [f"MCP server {head}"] if head in config.servers else []
            if not targets and "/" not in name and config.servers:
                targets = [f"a tool of {', '.join(config.servers)} (if one has it)"]
        if targets:
            record["kind"] = "mcp"
            record["resolves_to"] = targets
            covered.add(name)
    return covered, lacking


def _replace_diagnostics(
    plan: dict[str, Any], covered: set[str], lacking: dict[str, str], notices: list[str]
) -> None:
    """Drop the warnings about tool names a server provides, say which tool a server lacks,
    and add the servers' ``notices``; the plan's warning count follows."""
    kept = []
    for d in plan["diagnostics"]:
        if d["code"] == "extension-tools":
            # Kept while a name of it is still unprovided (an MCP server may provide them).
            if any(n not in covered for n in re.findall(r"`([^`]+)`", d["message"])):
                kept.append(d)
        elif d["code"] != "unknown-tool":
            kept.append(d)
        elif not any(f"`{n}`" in d["message"] for n in covered):
            # "neither a declared command nor a built-in" is not the news for server/tool.
            missing = next((n for n in lacking if f"`{n}`" in d["message"]), None)
            if missing is not None:
                message = f"{lacking[missing]}, so `{missing}` is not offered."
                d = {**d, "message": message, "code": "mcp-missing-tool"}
            kept.append(d)
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
