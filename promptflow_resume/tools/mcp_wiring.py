"""How a run sets up its MCP servers: which configuration it reads, starting the servers,
and the notes and notices about their tools.

The MCP client (``tools.mcp``, which loads asyncio) is imported only when the workflow names a
tool that no built-in or command provides, or ``--mcp-config`` is given: a run without MCP
tools never loads it::

    config = find_mcp_config(workflow, workspace, config_path=None, ask=None, trust=trust)
    servers = start_mcp(workflow, workspace, tools, config, progress_path, redactor)
    try:
        notes = mcp_attempt_notes(run.attempts, servers) if servers is not None else []
        notice_missing_tools(workflow, servers, print)
    finally:
        if servers is not None:
            servers.close()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..base.redact import Redactor
from ..base.truststore import Trust
from ..workflow.records import Workflow

if TYPE_CHECKING:
    from .mcp import McpServers
    from .mcp_records import McpConfig
    from .tool import Tool


def find_mcp_config(
    workflow: Workflow,
    workspace: Path,
    config_path: str | Path | None,
    ask: Callable[[str, str, bool], str] | None,
    trust: Trust | None = None,
    *,
    named: bool = True,
    given: Mapping[str, str] | None = None,
) -> McpConfig | None:
    """The MCP configuration a run of ``workflow`` uses (never one from a progress file);
    with ``trust``, what the workspace brings only as far as it allows (docs/spec.md 10.9).
    ``named``: the person named ``workflow`` (a run's own file, not a subagent's), so its own
    ``mcp-servers:`` need no trust. ``given``: the inputs' values from ``--mcp-input``."""
    agents = (workflow, *workflow.parts())  # a handoff chain's parts name their own
    if config_path is None and not any(_names_unresolved_tools(a) or a.mcp_servers for a in agents):
        return None  # what load_servers answers, without importing the MCP client (asyncio)
    from .mcp_setup import load_servers

    own = workflow.path if named else None
    return load_servers(
        workflow, workspace, config_path=config_path, ask=ask, trust=trust, named=own, given=given
    )


def start_mcp(
    workflow: Workflow,
    workspace: Path,
    tools: dict[str, Tool],
    config: McpConfig | None,
    progress_path: Path,
    redactor: Redactor,
) -> McpServers | None:
    """Start the MCP servers the workflow names; their stderr logs go beside the run."""
    if config is None:
        return None
    from .mcp_setup import start_servers

    return start_servers(
        workflow,
        workspace,
        tools,  # type: ignore[arg-type]
        config=config,
        log_dir=progress_path.parent,
        redact=lambda text: redactor.redact(text)[0],
    )


def notice_missing_tools(
    wf: Workflow, servers: McpServers | None, notice: Callable[[str], None]
) -> None:
    """Say once, at the start, in one line, which names in ``tools:`` are not offered: those
    only the editor has and those nothing provides; and what the MCP configuration leaves out
    (broken entries the workflow does not name, task-only tools). A handoff chain's later
    parts are looked at with the first agent."""
    from ..workflow.toolnames import editor_only_line, is_editor_only

    parts = (wf, *wf.parts())
    editor = list(dict.fromkeys(n for a in parts for n in a.tool_map if is_editor_only(n)))
    said: list[str] = [editor_only_line(editor)] if editor else []
    agents = [a for a in parts if _names_unresolved_tools(a)]
    if agents:
        from .mcp_setup import missing_tools_notice

        for line in servers.notices() if servers is not None else []:
            notice(line)
        for agent in agents:
            missing = missing_tools_notice(agent, servers)
            if missing is not None and missing not in said:
                said.append(missing)
    if said:
        notice("; ".join(line.rstrip(".") for line in said) + ".")


def _names_unresolved_tools(wf: Workflow) -> bool:
    """True when ``tools:`` names a tool that no built-in or command provides (an MCP tool);
    ``tools.mcp_setup.mcp_names`` lists them."""
    from ..workflow.toolnames import is_editor_only

    return any(not targets and not is_editor_only(n) for n, targets in wf.tool_map.items())


def offer_mcp(servers: McpServers, workflow: Workflow) -> dict[str, tuple[str, ...]]:
    """The MCP tools a run offers, started if need be: per step id of a handoff chain's later
    part, the tools its agent names; under ``""``, those of the workflow's own ``tools:``
    (offered in steps without their own list)."""
    from .mcp_setup import mcp_names

    offered = {"": servers.tools_for(mcp_names(workflow))}
    for step in workflow.steps:
        if step.part is not None:
            offered[step.id] = servers.tools_for(mcp_names(step.part))
    return offered


class RecordsMcpTools(Protocol):
    """What an attempt of a run (``progress.model.Attempt``) holds of MCP servers: their
    tool-list hashes, by server name. The tools know the record by this shape only: the engine,
    not a tool, keeps the progress file."""

    mcp_tools: dict[str, str]


def mcp_attempt_notes(attempts: Sequence[RecordsMcpTools], servers: McpServers) -> list[str]:
    """Record the servers' tool-list hashes in the attempt the engine has just begun (the
    last of a run's ``attempts``, its ``mcp_tools``) and return the notes about them: the
    hashes (for people), then which servers' lists changed since the last attempt that
    recorded any (news: say it)."""
    from .mcp_setup import attempt_notes

    previous = next((a.mcp_tools for a in reversed(attempts) if a.mcp_tools), None)
    fingerprints = servers.fingerprints()
    if attempts:
        attempts[-1].mcp_tools = dict(fingerprints)
    return attempt_notes(previous, fingerprints)
