"""MCP server configuration: the workspace's ``.vscode/mcp.json`` or ``--mcp-config FILE``.

Servers are configured where users already keep them, never in a progress file: a shared
progress file cannot make ``flow`` start a program. Two layouts are read::

    {"inputs": [{"type": "promptString", "id": "token", "password": true}],
     "servers": {"notes": {"command": "python", "args": ["notes.py"],
                           "env": {"TOKEN": "${input:token}"}},
                 "docs":  {"type": "http", "url": "http://127.0.0.1:8000/mcp",
                           "headers": {"Authorization": "Bearer ${input:token}"}}}}

    {"mcpServers": {"notes": {"command": "python", "args": ["notes.py"]}}}

The first is VS Code's (comments and trailing commas allowed, as VS Code allows them); the
second is what other MCP clients write. A stdio server has ``command`` with ``args``, ``env``,
``envFile`` and ``cwd``; an HTTP (streamable HTTP) server has ``url`` and ``headers``.
Values may use ``${input:ID}`` (an entry of ``inputs``; in an agent's ``mcp-servers:``, which
has no ``inputs``, any ID, asked as a password), ``${env:NAME}``, ``${workspaceFolder}`` and
``${userHome}``. An input's value comes from ``--mcp-input ID=VALUE`` (``given``), else the
environment variable ``FLOW_MCP_INPUT_<ID>`` (upper case, other characters as ``_``), else it
is asked on a terminal (hidden when ``password`` is true); input values are secrets and are
redacted from everything ``flow`` writes. GitHub's ``${{ github.workspace }}`` is the
workspace; its ``${{ secrets.NAME }}``, ``${{ vars.NAME }}`` and other expressions are filled
in only by GitHub's cloud agent: flow refuses the server's entry rather than send the text as
it is. flow's own settings for a server sit under ``"flow"``::

    "flow": {"timeout": 30, "idempotent": {"append_note": false, "search": true}}

``timeout`` is the seconds one call may take (``start_timeout``: the seconds the server may
take to start, 30 by default); ``idempotent`` overrides, per tool, what the
server's annotations say (``readOnlyHint``/``idempotentHint``) about re-running a call that
was in flight when a run stopped.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..base.errors import SpecialFileError, UntrustedError
from ..base.safeopen import read_regular
from ..base.truststore import TRUST_FLAG, Trust, Verdict
from ..workflow.mcpfiles import ROOT_CONFIG, WORKSPACE_CONFIG
from .mcp_reader import ConfigReader
from .mcp_records import MAX_CONFIG_BYTES, McpConfig, McpConfigError, McpServerConfig


def find_config(workspace: Path, explicit: str | Path | None = None) -> Path | None:
    """The configuration to use: ``explicit`` (``--mcp-config``), else the workspace's file
    (``.vscode/mcp.json``, else ``.mcp.json``)."""
    found = find_configs(workspace, explicit)
    return found[0] if found else None


def find_configs(workspace: Path, explicit: str | Path | None = None) -> list[Path]:
    """The files to read: ``explicit`` (``--mcp-config``) alone, else those of the workspace
    that exist: ``.vscode/mcp.json`` then ``.mcp.json``."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise McpConfigError(
                f"the MCP configuration {path} does not exist.",
                path=path,
                hint="Pass the path of a JSON file with `servers` or `mcpServers`.",
            )
        return [path]
    return [workspace / p for p in (WORKSPACE_CONFIG, ROOT_CONFIG) if (workspace / p).is_file()]


def load_configs(
    paths: Iterable[str | Path],
    *,
    workspace: Path,
    env: Mapping[str, str] | None = None,
    ask: Callable[[str, str, bool], str] | None = None,
    resolve_inputs: bool = True,
    wanted: Iterable[str] | None = None,
    given: Mapping[str, str] | None = None,
) -> McpConfig:
    """Read several files as one configuration: for a server name defined in more than one,
    the first file's entry wins (a warning says so when the entries differ)."""
    names = None if wanted is None else list(wanted)
    configs = [_load_one(Path(p), workspace, env, ask, resolve_inputs, names, given) for p in paths]
    if len(configs) == 1:
        if names is not None:
            configs[0].require(names)
        return configs[0]
    first = configs[0]
    servers: dict[str, McpServerConfig] = {}
    problems: dict[str, McpConfigError] = {}
    warnings: list[str] = []
    origin: dict[str, tuple[Path, Any]] = {}
    for config in configs:
        warnings.extend(config.warnings)
        raw = raw_servers(config.path)
        for name in [*config.servers, *config.problems]:
            if name in origin:
                kept_path, kept_raw = origin[name]
                if kept_raw != raw.get(name):
                    warnings.append(
                        f"the MCP server `{name}` is defined differently in {kept_path} and "
                        f"{config.path}; the one in {kept_path} is used."
                    )
                continue
            origin[name] = (config.path, raw.get(name))
            if name in config.servers:
                servers[name] = config.servers[name]
            else:
                problems[name] = config.problems[name]
    merged = McpConfig(
        path=first.path,
        servers=servers,
        secrets=tuple(s for c in configs for s in c.secrets),
        paths=tuple(c.path for c in configs),
        problems=problems,
        warnings=tuple(warnings),
    )
    if names is not None:
        merged.require(names)
    return merged


def agent_config(
    path: Path,
    servers: Mapping[str, Any],
    *,
    workspace: Path,
    env: Mapping[str, str] | None = None,
    ask: Callable[[str, str, bool], str] | None = None,
    resolve_inputs: bool = True,
    wanted: Iterable[str] | None = None,
    given: Mapping[str, str] | None = None,
) -> McpConfig:
    """The servers an agent file defines in ``mcp-servers:`` (``path`` is the agent), read
    as a configuration file's entries: GitHub's ``type: local`` is ``stdio``, and a server's
    ``tools`` (which of its tools the agent uses) is the agent loader's to read. An agent has
    no ``inputs`` list, so any ``${input:ID}`` is an input (asked as a password, as VS Code
    asks for it)."""
    entries = {name: _agent_entry(spec) for name, spec in servers.items()}
    reader = ConfigReader(path, "", workspace, os.environ if env is None else env, ask, given)
    reader.resolve_inputs = resolve_inputs
    reader.declared_only = False
    names = None if wanted is None else list(wanted)
    config = reader.config({"servers": entries}, names)
    if names is not None:
        config.require(names)
    return config


def _agent_entry(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    entry = {key: value for key, value in spec.items() if key != "tools"}
    if entry.get("type") == "local":
        entry["type"] = "stdio"
    return entry


def with_agent_servers(agent: McpConfig, files: McpConfig | None) -> McpConfig:
    """An agent's servers and the workspace's (or ``--mcp-config``'s) as one configuration:
    on a name both define, the agent's server is used and a warning says so."""
    if files is None:
        return agent
    clash = [name for name in [*files.servers, *files.problems] if name in agent.servers]
    clash += [name for name in files.servers if name in agent.problems]
    warnings = [
        f"the MCP server `{name}` is defined by the agent {agent.path} and in {files.where}; "
        "the agent's is used."
        for name in clash
    ]
    servers = dict(agent.servers)
    servers.update((n, c) for n, c in files.servers.items() if n not in agent.servers)
    problems = {**files.problems, **agent.problems}
    for name in servers:
        problems.pop(name, None)
    return McpConfig(
        path=agent.path,
        servers={n: c for n, c in servers.items() if n not in agent.problems},
        secrets=(*agent.secrets, *files.secrets),
        paths=(agent.path, *(files.paths or (files.path,))),
        problems=problems,
        warnings=(*files.warnings, *warnings),
    )


def raw_servers(path: Path) -> dict[str, Any]:
    """The server entries of a file, as written: to compare them, or to name the servers of a
    file that is read as data only (one its folder does not trust); {} for a file that is
    not a readable configuration."""
    try:
        data = read_regular(path, MAX_CONFIG_BYTES, what="MCP configuration", follow=True)
        raw = json.loads(strip_jsonc((data or b"").decode("utf-8-sig")))
    except (OSError, ValueError, SpecialFileError):
        return {}
    servers = raw.get("servers", raw.get("mcpServers", {})) if isinstance(raw, dict) else {}
    return servers if isinstance(servers, dict) else {}


def trusted_configs(
    paths: Iterable[Path], trust: Trust
) -> tuple[list[Path], list[tuple[Path, Verdict]]]:
    """``paths`` (the workspace's configuration files) split into those ``trust`` lets run
    and the others, each with its verdict (docs/spec.md 10.9)."""
    kept: list[Path] = []
    left: list[tuple[Path, Verdict]] = []
    for path in paths:
        verdict = trust.verdict(path)
        if verdict.allowed or verdict is Verdict.OUTSIDE:
            kept.append(path)
        else:
            left.append((path, verdict))
    return kept, left


def untrusted_error(
    server: str, source: Path, verdict: Verdict, trust: Trust, *, agent: bool = False
) -> UntrustedError:
    """The refusal of a run that needs ``server`` from a file its folder does not trust."""
    what = "the agent" if agent else "the MCP configuration"
    return UntrustedError(
        f"the run needs the MCP server `{server}` of {what} {source}, which the folder "
        f"{trust.root} brings ({verdict.value}); flow starts what a folder brings only once "
        "you trust it. Nothing was started.",
        path=source,
        field=f"$.mcp-servers.{server}" if agent else f"$.servers.{server}",
        hint=f"Read the file, then `flow trust {trust.root}` (it trusts the folder as it is "
        f"now), or {TRUST_FLAG} for this run only, or pass your own --mcp-config FILE.",
    )


def load_config(
    path: str | Path,
    *,
    workspace: Path,
    env: Mapping[str, str] | None = None,
    ask: Callable[[str, str, bool], str] | None = None,
    resolve_inputs: bool = True,
    wanted: Iterable[str] | None = None,
    given: Mapping[str, str] | None = None,
) -> McpConfig:
    """Read and check one configuration file; McpConfigError names the file, line and field.

    ``ask(id, description, password)`` is called for an input that has no value in the
    environment (on a terminal); without it such an input is an InputError saying which
    variable to set. With ``resolve_inputs`` False, ``${input:ID}`` is checked but left as
    written (``flow check`` without starting servers needs no secrets).

    ``wanted`` are the tool names of the run: a wrong server entry is then an error only when
    one of them names that server (it is kept in ``problems`` otherwise), and inputs are
    resolved only for the servers the run may start. Without ``wanted``, every entry counts.
    """
    names = None if wanted is None else list(wanted)
    config = _load_one(Path(path), workspace, env, ask, resolve_inputs, names, given)
    if names is not None:
        config.require(names)
    return config


def _load_one(
    path: Path,
    workspace: Path,
    env: Mapping[str, str] | None,
    ask: Callable[[str, str, bool], str] | None,
    resolve_inputs: bool,
    wanted: list[str] | None,
    given: Mapping[str, str] | None = None,
) -> McpConfig:
    """One file read and checked; broken server entries in ``problems`` when ``wanted``."""
    env = os.environ if env is None else env
    try:
        # A pipe or a device is refused, and the read stops past the limit (docs/spec.md 10.4).
        data = read_regular(path, MAX_CONFIG_BYTES, what="MCP configuration", follow=True)
        if data is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory")
    except OSError as exc:
        raise McpConfigError(
            f"cannot read the MCP configuration: {exc.strerror or exc}.", path=path
        ) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise McpConfigError(
            f"the file is over {MAX_CONFIG_BYTES:,} bytes; an MCP configuration is limited to "
            f"{MAX_CONFIG_BYTES:,} bytes.",
            path=path,
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise McpConfigError(
            f"the file is not UTF-8 text (byte {exc.start}); save it as UTF-8.", path=path
        ) from None
    try:
        raw = json.loads(strip_jsonc(text))
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            f"not valid JSON: {exc.msg}.", path=path, line=exc.lineno, column=exc.colno
        ) from None
    reader = ConfigReader(path, text, workspace, env, ask, given)
    reader.resolve_inputs = resolve_inputs
    return reader.config(raw, wanted)


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas as plain JSON, every line and column kept.

    Comments become spaces (newlines stay), and a comma followed only by blanks and
    comments before ``}`` or ``]`` becomes a space, so JSON errors keep their positions.
    """
    out = list(text)
    i, n = 0, len(text)
    last_comma: int | None = None
    while i < n:
        ch = text[i]
        if ch == '"':
            last_comma = None
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            for j in range(i, end):
                out[j] = " "
            i = end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for j in range(i, end):
                if out[j] != "\n":
                    out[j] = " "
            i = end
            continue
        if ch == ",":
            last_comma = i
        elif ch in "}]":
            if last_comma is not None:
                out[last_comma] = " "
            last_comma = None
        elif not ch.isspace():
            last_comma = None
        i += 1
    return "".join(out)
