"""Which MCP servers a run uses, starting them, and the notes about their tools.

A run reads MCP configuration only when its workflow (or a later part of its handoff chain)
names tools nothing else provides, ``--mcp-config`` is given, or its agent defines servers;
the workspace's files and agents are used as the person's trust allows::

    config = load_servers(workflow, workspace, trust=trust)
    servers = start_servers(workflow, workspace, tools, config=config, log_dir=folder, redact=r)
    notes = attempt_notes(previous, servers.fingerprints()) if servers is not None else []

``tools.mcp_wiring`` imports this module only when a run needs it (it loads the MCP client).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..base.errors import WorkflowError
from ..base.truststore import Trust, Verdict
from ..workflow.agentdirs import in_workspace_folder
from ..workflow.records import Workflow
from ..workflow.toolnames import (
    extension_tools_line,
    is_extension_tool,
    mcp_tool_names,
)
from .mcp import McpServers
from .mcp_config import (
    agent_config,
    find_configs,
    load_configs,
    raw_servers,
    trusted_configs,
    untrusted_error,
    with_agent_servers,
)
from .mcp_process import (
    folders_made,
    remove_start_logs,
)
from .mcp_records import McpConfig, named_servers


def mcp_names(workflow: Workflow) -> list[str]:
    """Names in the workflow's ``tools:`` that no built-in or declared command resolves (an
    editor-only name such as ``execute/getTerminalOutput`` is none: it is no MCP tool)."""
    return mcp_tool_names(workflow.tool_map)


def run_mcp_names(workflow: Workflow) -> list[str]:
    """The MCP tool names a run of ``workflow`` needs: its own, then those of each later part
    of a handoff chain (whose agent names its own, docs/spec.md 4.13), without repeats."""
    names = mcp_names(workflow)
    for part in workflow.parts():
        names += [n for n in mcp_names(part) if n not in names]
    return names


def chain_agent_servers(workflow: Workflow) -> list[tuple[Path, dict[str, Any]]]:
    """The ``mcp-servers:`` of the run's agents (the first, then each later part's), one entry
    per agent file, each server once: a server a later agent defines again the same way is
    the earlier one's; defined differently, it is a ``WorkflowError`` (a run has one server
    of each name, as it has one command of each name)."""
    found: list[tuple[Path, dict[str, Any]]] = []
    seen: dict[str, tuple[Path, Any]] = {}
    for agent in (workflow, *workflow.parts()):
        file = agent.mcp_servers_file
        if not agent.mcp_servers or file is None:
            continue
        if any(file.resolve() == f.resolve() for f, _ in found):
            continue
        own: dict[str, Any] = {}
        for name, spec in agent.mcp_servers.items():
            if name in seen:
                where, earlier = seen[name]
                if earlier != spec:
                    raise WorkflowError(
                        f"the agents of the handoff chain define the MCP server `{name}` "
                        f"differently ({where} and {file}); a run has one server of each name.",
                        path=file,
                        field=f"$.mcp-servers.{name}",
                        hint="Give one of them another name, or define it the same way in both.",
                    )
                continue
            seen[name] = (file, spec)
            own[name] = spec
        found.append((file, own))
    return found


def load_servers(
    workflow: Workflow,
    workspace: Path,
    *,
    config_path: str | Path | None = None,
    ask: Callable[[str, str, bool], str] | None = None,
    env: Mapping[str, str] | None = None,
    trust: Trust | None = None,
    named: Path | None = None,
    given: Mapping[str, str] | None = None,
) -> McpConfig | None:
    """The MCP configuration for a run of ``workflow``, or None when it needs none
    (``given``: input values from ``--mcp-input``).

    Read only when the workflow names tools that nothing else provides, when ``config_path``
    is given (``--mcp-config``), or when its agent defines servers (``mcp-servers:``, which
    win over the files' on a name clash). A handoff chain's later parts count with the
    first agent: the tools their agents name, the servers they define. A wrong entry is an
    error only for a server the workflow names; others are skipped (``McpServers.notices``
    says so). With ``trust``, the workspace's files and the agents other than ``named`` (the
    file the person named) are used only as it allows (``untrusted`` lists the others; a
    server the run names from one of them is an ``UntrustedError``).
    """
    names = run_mcp_names(workflow)
    agents = chain_agent_servers(workflow)
    if not names and config_path is None and not agents:
        return None
    paths = find_configs(workspace, config_path)
    untrusted: list[tuple[Path, Verdict]] = []
    if trust is not None and config_path is None:
        paths, untrusted = trusted_configs(paths, trust)
        _refuse_needed(names, paths, untrusted, trust)
        agents, left = _trusted_agents(named, agents, names, trust)
        untrusted += left
    config = (
        load_configs(paths, workspace=workspace, env=env, ask=ask, wanted=names, given=given)
        if paths
        else None
    )
    # The servers the agents define themselves come first: on a name clash they win. The
    # first agent's are laid on last, so its file stays the configuration's own.
    for file, servers in reversed(agents):
        own = agent_config(
            file, servers, workspace=workspace, env=env, ask=ask, wanted=names, given=given
        )
        config = with_agent_servers(own, config)
    if not untrusted or trust is None:
        return config
    if config is None:
        config = McpConfig(path=untrusted[0][0], servers={}, paths=())
    named_left = tuple((trust.relative(p) or str(p), verdict) for p, verdict in untrusted)
    return replace(config, untrusted=named_left)


def _refuse_needed(
    names: list[str],
    trusted: list[Path],
    untrusted: list[tuple[Path, Verdict]],
    trust: Trust,
) -> None:
    """Stop a run whose tools name a server that only an untrusted file defines (a bare
    tool name needs no particular server: it just finds none there)."""
    if not untrusted:
        return
    defined = {name for path in trusted for name in raw_servers(path)}
    for path, verdict in untrusted:
        servers = [s for s in raw_servers(path) if s not in defined]
        named, _ = named_servers(servers, names)
        if named:
            raise untrusted_error(named[0], path, verdict, trust)


def _trusted_agents(
    named: Path | None,
    agents: list[tuple[Path, dict[str, Any]]],
    names: list[str],
    trust: Trust,
) -> tuple[list[tuple[Path, dict[str, Any]]], list[tuple[Path, Verdict]]]:
    """The agents whose servers may start: the file the person named and agents found
    elsewhere than the workspace's agent folders (``--agents DIR``, the user's), and the
    workspace's own (a handoff's, a prompt file's ``agent:``, a subagent) only as trust
    allows."""
    own = named.resolve() if named is not None else None
    kept: list[tuple[Path, dict[str, Any]]] = []
    left: list[tuple[Path, Verdict]] = []
    for file, servers in agents:
        rel = trust.relative(file)
        brought = rel is not None and in_workspace_folder(rel)
        verdict = trust.verdict(file) if brought and file.resolve() != own else Verdict.TRUSTED
        if verdict.allowed or verdict is Verdict.OUTSIDE:
            kept.append((file, servers))
            continue
        needed, _ = named_servers(servers, names)
        if needed:
            raise untrusted_error(needed[0], file, verdict, trust, agent=True)
        left.append((file, verdict))
    return kept, left


def tool_list_note(fingerprints: Mapping[str, str]) -> str:
    """The attempt note that shows people the servers' tool-list hashes (programs read the
    attempt's ``mcp_tools`` field, never this note)."""
    return "mcp tools: " + ", ".join(f"{s}={h}" for s, h in sorted(fingerprints.items()))


def changed_servers(
    previous: Mapping[str, str] | None, fingerprints: Mapping[str, str]
) -> list[str]:
    """Servers whose tool-list hash differs from the one recorded in ``previous`` (an earlier
    attempt's ``mcp_tools``); a server not recorded there is new, not changed."""
    if not previous:
        return []
    return sorted(s for s, h in fingerprints.items() if s in previous and previous[s] != h)


def start_servers(
    workflow: Workflow,
    workspace: Path,
    tools: dict[str, Any],
    *,
    config: McpConfig | None,
    log_dir: Path,
    redact: Callable[[str], str],
) -> McpServers | None:
    """Start the servers ``workflow`` names and add their tools to ``tools`` (in place).

    Returns the servers (close them when the run ends), or None without a configuration.
    A server that cannot start raises ``ToolServerError`` and nothing is left running.
    """
    if config is None or not config.servers:
        return None
    # A folder made here holds nothing but the servers' logs until the run's first event:
    # when the start fails, it goes (with them), so a failed start leaves no empty run behind.
    made = folders_made(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    servers = McpServers(
        config, wanted=run_mcp_names(workflow), reserved=tools, log_dir=log_dir, redact=redact
    )
    servers.logs_discarded = bool(made)
    try:
        servers.offer()
    except BaseException:
        servers.close()
        logs = [servers._log_path(name) for name in config.servers]
        remove_start_logs(made, [log for log in logs if log is not None])
        raise
    servers.logs_discarded = False
    tools.update(servers.tools)
    return servers


def missing_tools_notice(workflow: Workflow, servers: McpServers | None) -> str | None:
    """One line about tool names in ``tools:`` that nothing provides, or None: the tools of
    VS Code extensions first (``publisher.ext/tool``), then the others."""
    names = mcp_names(workflow)
    if servers is not None:
        names = [n for n in names if not servers.resolved.get(n)]
    extensions = [n for n in names if is_extension_tool(n)]
    names = [n for n in names if n not in extensions]
    said = extension_tools_line(extensions) if extensions else ""
    if not names:
        return said or None
    said = said[:-1] + "; " if said else ""
    listed = ", ".join(f"`{n}`" for n in names)
    if servers is None:
        return said + (
            f"the workflow names {listed}, which no built-in, command or MCP server provides "
            "(no .vscode/mcp.json or .mcp.json here; pass --mcp-config FILE); they are not "
            "offered."
        )
    return said + (
        f"no MCP server in {servers.config.where} provides {listed}; they are not offered "
        "(`flow check --mcp` lists what the servers offer)."
    )


def attempt_notes(previous: Mapping[str, str] | None, fingerprints: Mapping[str, str]) -> list[str]:
    """Attempt notes about the MCP tools whose tool-list hashes are ``fingerprints`` now, of a
    run whose last attempt with MCP servers recorded ``previous``: the hashes, then which
    servers' lists changed since."""
    result = [tool_list_note(fingerprints)]
    changed = changed_servers(previous, fingerprints)
    if changed:
        result.append(
            "the tool list of MCP server(s) "
            + ", ".join(changed)
            + " changed since the last attempt (names, schemas or annotations); the recorded "
            "results are kept and the tools are offered as they are now"
        )
    return result
