"""What an MCP configuration is made of: one server's record, the configuration's, the error a
wrong file raises, and the defaults and limits they use (``tools.mcp_config`` reads the files
into them)::

    config.servers["notes"].command, config.servers["notes"].timeout
    named_servers(config.servers, ["notes/*", "search"])  # (["notes"], True)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..base.errors import InvalidFileError
from ..base.truststore import Verdict

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
