"""One MCP configuration's server entries checked and built into records: variables filled in,
inputs asked for (or taken from ``--mcp-input`` and the environment), env files read, and
every secret value collected for the redactor. Errors name the file, line and field::

    reader = ConfigReader(path, text, workspace, os.environ, ask=None)
    config = reader.config(json.loads(strip_jsonc(text)), wanted=None)
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..base.confine import leads_inside
from ..base.errors import InputError, SpecialFileError
from ..base.safeopen import read_inside, read_regular
from ..workflow.values import parse_size
from .mcp_records import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_OUTPUT,
    MAX_CONFIG_BYTES,
    START_TIMEOUT,
    WITHHELD_ENV,
    WITHHELD_ENV_PREFIX,
    McpConfig,
    McpConfigError,
    McpServerConfig,
    named_servers,
)

_VARIABLE = re.compile(r"\$\{([A-Za-z]+)(?::([^}]*))?\}")
#: GitHub Actions' expressions (``${{ secrets.X }}``), which GitHub's cloud agent fills in.
_GITHUB_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
#: GitHub's other way for an agent's server to name a variable: ``$NAME`` or ``${NAME}``.
_GITHUB_VARIABLE = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}|\$([A-Z_][A-Z0-9_]*)")


def input_variable(input_id: str) -> str:
    """The environment variable that gives the input ``input_id`` its value."""
    return "FLOW_MCP_INPUT_" + re.sub(r"[^A-Za-z0-9]", "_", input_id).upper()


class ConfigReader:
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
        """The error ``message`` about the field ``field_path`` (``$.servers.NAME.url``), at
        its line in the file."""
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
        """The configuration of the parsed file ``raw``, every server entry checked and built;
        with ``wanted`` (a run's tool names) a broken entry lands in ``problems``."""
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
        """One server entry checked and built, its variables filled in."""
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
        common = self._common(name, spec, where)
        if kind in ("http", "sse"):
            return self._http_server(name, kind, spec, where, common)
        return self._stdio_server(name, spec, where, common)

    def _common(self, name: str, spec: dict[str, Any], where: str) -> dict[str, Any]:
        """The fields of every server's record: its name and place, and flow's own settings
        for it (``flow``: timeouts, idempotent tools, output limit)."""
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
        return common

    def _http_server(
        self, name: str, kind: str, spec: dict[str, Any], where: str, common: dict[str, Any]
    ) -> McpServerConfig:
        """An HTTP (or SSE) server's record: its URL and headers."""
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

    def _stdio_server(
        self, name: str, spec: dict[str, Any], where: str, common: dict[str, Any]
    ) -> McpServerConfig:
        """A stdio server's record: the program, its arguments, environment and folder."""
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
