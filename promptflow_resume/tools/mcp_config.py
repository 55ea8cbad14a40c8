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
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..base.confine import leads_inside
from ..base.errors import InputError, InvalidFileError, SpecialFileError, UntrustedError
from ..base.safeopen import read_inside, read_regular
from ..base.truststore import TRUST_FLAG, Trust, Verdict
from ..workflow.mcpfiles import ROOT_CONFIG, WORKSPACE_CONFIG
from ..workflow.values import parse_size

#: Bytes of text one call's result may put into the conversation (the rest goes to a sidecar),
#: unless the server's ``flow.max_output`` says otherwise; the built-in read_file's limit.
DEFAULT_MAX_OUTPUT = 100_000
#: Variables of flow's environment a stdio server does not inherit: the model providers'
#: credentials (flow's own secrets) and the values of other servers' inputs. A server that
#: needs one names it in its ``env`` (``"GITHUB_TOKEN": "${env:GITHUB_TOKEN}"``).
WITHHELD_ENV = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "GITHUB_TOKEN",
)
WITHHELD_ENV_PREFIX = "FLOW_MCP_INPUT_"
#: Seconds one tool call may take unless the server's ``flow.timeout`` says otherwise.
DEFAULT_CALL_TIMEOUT = 60.0
#: Seconds a server has to start and answer ``initialize`` and ``tools/list``.
START_TIMEOUT = 30.0
#: The largest configuration file read (a config is a few KiB; anything larger is a mistake).
MAX_CONFIG_BYTES = 1024 * 1024

_VARIABLE = re.compile(r"\$\{([A-Za-z]+)(?::([^}]*))?\}")
#: GitHub Actions' expressions (``${{ secrets.X }}``), which GitHub's cloud agent fills in.
_GITHUB_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
#: GitHub's other way for an agent's server to name a variable: ``$NAME`` or ``${NAME}``.
_GITHUB_VARIABLE = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}|\$([A-Z_][A-Z0-9_]*)")


class McpConfigError(InvalidFileError):
    """An MCP configuration file cannot be read or is not what it should be."""


@dataclass(frozen=True)
class McpServerConfig:
    """One configured server, its variables already substituted."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    #: The file it was configured in (for messages), and the field path of its entry.
    source: Path
    entry: str
    #: The line of its entry in ``source`` (for messages).
    line: int | None = None
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_CALL_TIMEOUT
    #: Seconds the server may take to start and answer the handshake.
    start_timeout: float = START_TIMEOUT
    #: Per tool: True/False overrides the annotations' verdict on re-running it.
    idempotent: dict[str, bool] = field(default_factory=dict)
    #: Bytes of a result's text that go into the conversation; the whole goes to a sidecar.
    max_output: int = DEFAULT_MAX_OUTPUT

    @property
    def identity(self) -> str:
        """A hash of how the server is reached (transport, command, arguments, folder, URL and
        the names of its variables and headers; never their values, which may be secrets)."""
        how = {
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "cwd": str(self.cwd) if self.cwd is not None else None,
            "url": self.url,
            "env": sorted(self.env),
            "headers": sorted(self.headers),
        }
        blob = json.dumps(how, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]

    @property
    def where(self) -> str:
        """``file ($.servers.name)``: how messages name this server's configuration."""
        return f"{self.source} ({self.entry})"

    def process_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a stdio server starts with: flow's own (``base``), as VS Code gives
        its servers the editor's, without ``WITHHELD_ENV``, then the configured ``env``."""
        base = os.environ if base is None else base
        env = {
            name: value
            for name, value in base.items()
            if name not in WITHHELD_ENV and not name.startswith(WITHHELD_ENV_PREFIX)
        }
        env.update(self.env)
        return env


@dataclass(frozen=True)
class McpConfig:
    """The servers of one configuration (one file, or ``.vscode/mcp.json`` and ``.mcp.json``
    together), in the files' order, and their secret values.

    A server whose entry is wrong is not in ``servers`` but in ``problems``: it is an error
    only for a run that names it (``require``), and a warning otherwise.
    """

    path: Path
    servers: dict[str, McpServerConfig]
    #: Values of ``inputs`` and of variables with secret-looking names, for the redactor.
    secrets: tuple[str, ...] = ()
    #: Every file read, ``path`` first.
    paths: tuple[Path, ...] = ()
    #: Servers whose entries could not be used, by name, with the error each would raise.
    problems: dict[str, McpConfigError] = field(default_factory=dict)
    #: Lines for the user about the files (a server defined twice, one skipped).
    warnings: tuple[str, ...] = ()
    #: Files the workspace brings that its trust leaves out (relative path, verdict): their
    #: servers are not started (docs/spec.md 10.9).
    untrusted: tuple[tuple[str, Verdict], ...] = ()

    @property
    def where(self) -> str:
        """The file, or the files, as messages name them."""
        return " and ".join(str(p) for p in (self.paths or (self.path,)))

    def require(self, wanted: Iterable[str]) -> None:
        """Raise the problem of the first broken server that a tool name in ``wanted`` names."""
        named, _ = named_servers([*self.servers, *self.problems], wanted)
        for name in named:
            if name in self.problems:
                raise self.problems[name]

    def skipped(self, wanted: Iterable[str]) -> list[str]:
        """One line per broken server that ``wanted`` does not name (it is left out)."""
        named, _ = named_servers([*self.servers, *self.problems], wanted)
        return [
            f"the MCP server `{name}` is skipped: {problem.message.rstrip('.')} "
            f"({problem.path}{':' + str(problem.line) if problem.line else ''})."
            for name, problem in self.problems.items()
            if name not in named
        ]


def named_servers(servers: Iterable[str], wanted: Iterable[str]) -> tuple[list[str], bool]:
    """The servers that tool names (``server/*``, ``server``, ``server/tool``) name, and
    whether some name is bare (a tool of whichever server has it: every server is asked)."""
    known = list(servers)
    named: list[str] = []
    bare = False
    for name in wanted:
        head = name.split("/", 1)[0]
        server = name if name in known else head if head in known else None
        if server is None:
            bare = True
        elif server not in named:
            named.append(server)
    return named, bare


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
    reader = _Reader(path, "", workspace, os.environ if env is None else env, ask, given)
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
    reader = _Reader(path, text, workspace, env, ask, given)
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


def input_variable(input_id: str) -> str:
    """The environment variable that gives the input ``input_id`` its value."""
    return "FLOW_MCP_INPUT_" + re.sub(r"[^A-Za-z0-9]", "_", input_id).upper()


class _Reader:
    """Checks one parsed file and builds its records, with positioned errors."""

    def __init__(
        self,
        path: Path,
        text: str,
        workspace: Path,
        env: Mapping[str, str],
        ask: Callable[[str, str, bool], str] | None,
        given: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        self.text = text
        self.workspace = workspace
        self.env = env
        self.ask = ask
        #: ``--mcp-input ID=VALUE``: values given on the command line, used first.
        self.given = dict(given or {})
        self.inputs: dict[str, dict[str, Any]] = {}
        self.values: dict[str, str] = {}
        self.secrets: list[str] = []
        self.resolve_inputs = True
        #: False for an agent's ``mcp-servers:``: an ``${input:ID}`` needs no ``inputs`` entry.
        self.declared_only = True

    # --- errors --------------------------------------------------------------------------

    def fail(self, field_path: str, message: str, hint: str | None = None) -> McpConfigError:
        line = self._line_of(field_path)
        return McpConfigError(message, path=self.path, line=line, field=field_path, hint=hint)

    def _line_of(self, field_path: str) -> int | None:
        """The line of the last key of ``field_path`` (the first one found after its parents)."""
        keys = [k for k in re.findall(r"\.([^.\[\]]+)", field_path)]
        offset = 0
        found: int | None = None
        for key in keys:
            at = self.text.find(json.dumps(key), offset)
            if at < 0:
                break
            offset = at
            found = at
        return None if found is None else self.text.count("\n", 0, found) + 1

    # --- the file ------------------------------------------------------------------------

    def config(self, raw: Any, wanted: list[str] | None) -> McpConfig:
        if not isinstance(raw, dict):
            raise self.fail("$", "an MCP configuration must be a JSON object.")
        if "servers" in raw:
            key = "servers"
        elif "mcpServers" in raw:
            key = "mcpServers"
        else:
            raise self.fail(
                "$",
                "the file has neither `servers` (VS Code's layout) nor `mcpServers`.",
                hint='Write {"servers": {"NAME": {"command": ..., "args": [...]}}}.',
            )
        self._read_inputs(raw.get("inputs", []))
        servers_raw = raw[key]
        if not isinstance(servers_raw, dict):
            raise self.fail(f"$.{key}", f"`{key}` must be an object of servers by name.")
        servers: dict[str, McpServerConfig] = {}
        problems: dict[str, McpConfigError] = {}
        named, bare = named_servers(servers_raw, wanted or [])
        resolve = self.resolve_inputs
        for name, spec in servers_raw.items():
            used = wanted is None or bare or name in named
            # Secrets are asked for only for the servers this run may start.
            self.resolve_inputs = resolve and used
            try:
                servers[name] = self._server(name, spec, f"$.{key}.{name}")
            except McpConfigError as problem:
                if wanted is None:
                    raise
                problems[name] = problem
        self.resolve_inputs = resolve
        return McpConfig(
            path=self.path,
            servers=servers,
            secrets=tuple(self.secrets),
            paths=(self.path,),
            problems=problems,
        )

    def _read_inputs(self, inputs: Any) -> None:
        if not isinstance(inputs, list):
            raise self.fail("$.inputs", "`inputs` must be a list of input definitions.")
        for i, item in enumerate(inputs):
            where = f"$.inputs[{i}]"
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                raise self.fail(where, "each input needs an `id` (a string).")
            self.inputs[item["id"]] = item

    def _input_value(self, input_id: str, where: str) -> str:
        if input_id in self.values:
            return self.values[input_id]
        decl = self.inputs.get(input_id)
        if decl is None and self.declared_only:
            known = ", ".join(self.inputs) or "none"
            raise self.fail(
                where,
                f"`${{input:{input_id}}}` names no entry of `inputs` (defined: {known}).",
            )
        if decl is None:
            # An agent's input, described nowhere: a secret until shown otherwise.
            decl = {"password": True}
        if not self.resolve_inputs:
            return f"${{input:{input_id}}}"
        variable = input_variable(input_id)
        value = self.given.get(input_id, self.env.get(variable))
        if value is None and self.ask is not None:
            value = self.ask(
                input_id, str(decl.get("description") or ""), bool(decl.get("password"))
            )
        if value is None:
            raise InputError(
                f"the MCP configuration {self.path} needs the input `{input_id}`"
                f" ({decl.get('description') or 'no description'}), and there is no terminal to "
                "ask on.",
                path=self.path,
                field=where,
                hint=f"Give it with --mcp-input {input_id}=VALUE, or set the environment "
                f"variable {variable}.",
            )
        self.values[input_id] = value
        self.secrets.append(value)
        return value

    def _substitute(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(where, f"must be a string, not {type(value).__name__}.")
        # GitHub's cloud agent fills in `${{ github.workspace }}`: the checkout, here the
        # workspace. Its secrets and variables exist only there.
        value = _GITHUB_EXPRESSION.sub(
            lambda m: str(self.workspace) if m.group(1) == "github.workspace" else m.group(0),
            value,
        )
        if not self.declared_only:
            value = _GITHUB_VARIABLE.sub(lambda m: self._github_variable(m, where), value)
        github = _GITHUB_EXPRESSION.search(value)
        if github is not None:
            name = github.group(1).rpartition(".")[2] or "NAME"
            raise self.fail(
                where,
                f"`{github.group(0)}` is a GitHub Actions expression, which only GitHub's cloud "
                "agent fills in; flow does not support it outside GitHub, and does not send "
                "the text as it is.",
                hint=f"Take the value from your environment with ${{env:{name}}}, or ask for "
                f"it with ${{input:{name.lower()}}} (--mcp-input {name.lower()}=VALUE).",
            )

        def replace(match: re.Match[str]) -> str:
            kind, arg = match.group(1), match.group(2)
            if kind == "input" and arg:
                return self._input_value(arg, where)
            if kind == "env" and arg:
                return self.env.get(arg, "")
            if kind == "workspaceFolder" and arg is None:
                return str(self.workspace)
            if kind == "userHome" and arg is None:
                return str(Path.home())
            raise self.fail(
                where,
                f"`{match.group(0)}` is not a variable flow knows; use ${{input:ID}}, "
                "${env:NAME}, ${workspaceFolder} or ${userHome}.",
            )

        return _VARIABLE.sub(replace, value)

    def _github_variable(self, match: re.Match[str], where: str) -> str:
        """``$NAME`` / ``${NAME}`` in an agent's server (GitHub's form for the copilot
        environment's secrets and variables): the variable of that name in flow's
        environment; refused when it is not set, rather than sent as written."""
        name = match.group(1) or match.group(2)
        if not self.resolve_inputs:
            return match.group(0)
        value = self.env.get(name)
        if value is None:
            raise InputError(
                f"the agent {self.path} gives its MCP server the variable `{match.group(0)}` "
                f"({where}), and {name} is not set in the environment.",
                path=self.path,
                field=where,
                hint=f"Set {name} (GitHub's cloud agent takes it from the copilot "
                "environment's secrets; here it comes from yours).",
            )
        if len(value) >= 8:  # a secret of the copilot environment, most likely: never kept
            self.secrets.append(value)
        return value

    def _strings(self, value: Any, where: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(where, "must be a list of strings.")
        return tuple(self._substitute(item, f"{where}[{i}]") for i, item in enumerate(value))

    def _mapping(self, value: Any, where: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.fail(where, "must be an object of names to strings.")
        return {str(k): self._substitute(v, f"{where}.{k}") for k, v in value.items()}

    def _server(self, name: str, spec: Any, where: str) -> McpServerConfig:
        if not isinstance(spec, dict):
            raise self.fail(where, f"the server `{name}` must be an object.")
        kind = spec.get("type")
        if kind is None:
            kind = "http" if "url" in spec and "command" not in spec else "stdio"
        if kind == "streamableHttp":
            kind = "http"
        if kind not in ("stdio", "http", "sse"):
            raise self.fail(
                f"{where}.type", f'`type` is "{kind}"; flow knows "stdio", "http" and "sse".'
            )
        flow_opts = spec.get("flow", {})
        if not isinstance(flow_opts, dict):
            raise self.fail(f"{where}.flow", "`flow` must be an object.")
        timeout = flow_opts.get("timeout", DEFAULT_CALL_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise self.fail(f"{where}.flow.timeout", "must be a number of seconds above 0.")
        start_timeout = flow_opts.get("start_timeout", START_TIMEOUT)
        if (
            isinstance(start_timeout, bool)
            or not isinstance(start_timeout, (int, float))
            or start_timeout <= 0
        ):
            raise self.fail(f"{where}.flow.start_timeout", "must be a number of seconds above 0.")
        overrides = flow_opts.get("idempotent", {})
        if not isinstance(overrides, dict) or not all(
            isinstance(v, bool) for v in overrides.values()
        ):
            raise self.fail(
                f"{where}.flow.idempotent",
                "must map tool names to true or false.",
            )
        try:
            max_output = parse_size(flow_opts.get("max_output", DEFAULT_MAX_OUTPUT))
        except ValueError as exc:
            raise self.fail(f"{where}.flow.max_output", f"must be {exc}.") from None
        common: dict[str, Any] = {
            "name": name,
            "source": self.path,
            "entry": where,
            "line": self._line_of(where),
            "timeout": float(timeout),
            "start_timeout": float(start_timeout),
            "idempotent": dict(overrides),
            "max_output": max_output,
        }
        if kind in ("http", "sse"):
            url = spec.get("url")
            if not isinstance(url, str) or not re.match(r"https?://", url):
                raise self.fail(
                    f"{where}.url",
                    f"the HTTP server `{name}` needs a `url` starting with http:// or https://.",
                )
            headers = self._mapping(spec.get("headers", {}), f"{where}.headers")
            self._secret_values(headers)
            self._no_keys_in(url, f"{where}.url", "the URL (logs and proxies keep URLs)")
            return McpServerConfig(
                transport="sse" if kind == "sse" else "http",
                url=self._substitute(url, f"{where}.url"),
                headers=headers,
                **common,
            )
        command = spec.get("command")
        if not isinstance(command, str) or not command.strip():
            raise self.fail(
                f"{where}.command",
                f"the stdio server `{name}` needs a `command` (the program to start).",
            )
        env: dict[str, str] = {}
        if "envFile" in spec:
            env.update(self._env_file(spec["envFile"], f"{where}.envFile"))
        env.update(self._mapping(spec.get("env", {}), f"{where}.env"))
        self._secret_values(env)
        cwd = None
        if "cwd" in spec:
            cwd = Path(self._substitute(spec["cwd"], f"{where}.cwd"))
            cwd = cwd if cwd.is_absolute() else self.workspace / cwd
            if not cwd.is_dir():
                raise self.fail(f"{where}.cwd", f"the folder {cwd} does not exist.")
        for i, arg in enumerate(spec.get("args", []) or []):
            self._no_keys_in(arg, f"{where}.args[{i}]", "the arguments (`ps` shows them)")
        return McpServerConfig(
            transport="stdio",
            command=self._substitute(command, f"{where}.command"),
            args=self._strings(spec.get("args", []), f"{where}.args"),
            env=env,
            cwd=cwd,
            **common,
        )

    def _no_keys_in(self, value: Any, where: str, place: str) -> None:
        """Refuse ``${env:NAME}`` of a model key or token (``WITHHELD_ENV``) where everyone
        on the machine can read it: a key goes to a server only in its ``env`` or
        ``headers``."""
        if not isinstance(value, str):
            return
        for match in _VARIABLE.finditer(value):
            name = match.group(2) or ""
            if match.group(1) == "env" and (
                name in WITHHELD_ENV or name.startswith(WITHHELD_ENV_PREFIX)
            ):
                raise self.fail(
                    where,
                    f"`{match.group(0)}` would put a key into {place}; flow passes model keys "
                    "and tokens to a server only through its `env` (or an HTTP server's "
                    "`headers`).",
                    hint=f'Move it to the server\'s "env": {{"{name}": "${{env:{name}}}"}}.',
                )

    def _env_file(self, value: Any, where: str) -> dict[str, str]:
        path = Path(self._substitute(value, where))
        path = path if path.is_absolute() else self.workspace / path
        try:
            # A repository's configuration reads env files inside the repository only; any
            # env file must be a regular file of bounded size (not /dev/zero, not a FIFO).
            if leads_inside(self.workspace, self.path):
                data = read_inside(self.workspace, path, MAX_CONFIG_BYTES, what="env file")
            else:
                data = read_regular(path, MAX_CONFIG_BYTES, what="env file", follow=True)
            if data is None:
                raise FileNotFoundError(errno.ENOENT, "No such file or directory")
            if len(data) > MAX_CONFIG_BYTES:
                raise self.fail(where, f"the env file {path} is over {MAX_CONFIG_BYTES:,} bytes.")
            lines = data.decode("utf-8").splitlines()
        except SpecialFileError as exc:
            raise self.fail(where, exc.message) from None
        except UnicodeDecodeError as exc:
            raise self.fail(
                where, f"the env file {path} is not UTF-8 (byte {exc.start})."
            ) from None
        except OSError as exc:
            reason = exc.strerror or exc
            raise self.fail(where, f"cannot read the env file {path}: {reason}.") from None
        values: dict[str, str] = {}
        for number, line in enumerate(lines, start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            name, sep, value_text = stripped.removeprefix("export ").partition("=")
            if not sep or not name.strip():
                raise McpConfigError("expected NAME=value.", path=path, line=number, field=where)
            value_text = value_text.strip()
            if len(value_text) >= 2 and value_text[0] == value_text[-1] and value_text[0] in "\"'":
                value_text = value_text[1:-1]
            values[name.strip()] = value_text
        return values

    def _secret_values(self, values: Mapping[str, str]) -> None:
        """Values of secret-looking names (``TOKEN``, ``Authorization``) become secrets."""
        from ..base.redact import is_secret_name

        if not self.resolve_inputs:  # not started: its values are neither needed nor secret
            return
        for name, value in values.items():
            if value and (is_secret_name(name) or name.lower() == "authorization"):
                self.secrets.append(value)
                if name.lower() == "authorization" and " " in value:
                    self.secrets.append(value.split(" ", 1)[1])
