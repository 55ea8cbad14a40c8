"""Command tools: declared under ``commands:``, the only programs a workflow can run.

A command is an argv list run without a shell. ``{name}`` in an argv element is a placeholder
for the parameter ``name`` declared under ``parameters:``; the model (or a step's ``run:``
line) supplies the value, and each value stays inside its one argv element, so no value can
become a second argument or a shell command::

    commands:
      grep:
        description: Search the repository
        argv: ["grep", "-rn", "--", "{pattern}", "."]
        idempotent: true
        parameters:
          pattern: {type: string, description: Text to look for}

    fill_argv(cmd, {"pattern": "TODO"})  # ["grep", "-rn", "--", "TODO", "."]
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base.durations import parse_duration
from ..base.errors import InputError, WorkflowError
from ..chat import ToolSpec
from .diagnostics import Collector
from .records import CommandDecl
from .source import YamlPositions, field_path
from .toolnames import BUILTIN_TOOLS
from .values import coerce_value, parse_size, value_text

_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "fish"}

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_OUTPUT = 65536


def build_commands(
    raw: dict[str, Any], pos: YamlPositions, col: Collector
) -> dict[str, CommandDecl]:
    """``CommandDecl`` records from the (schema-valid) ``commands:`` mapping."""
    commands: dict[str, CommandDecl] = {}
    for name, spec in raw.items():
        path = ("commands", name)
        decl = _build_one(name, spec, path, pos, col)
        if decl is not None:
            commands[name] = decl
    return commands


class _Problems:
    """The errors found in one command's declaration, each reported at its field."""

    def __init__(self, path: tuple[str, ...], pos: YamlPositions, col: Collector) -> None:
        self.path, self.pos, self.col = path, pos, col
        #: False once an error was reported: the command is then left out.
        self.ok = True

    def __call__(self, message: str, sub: tuple[str | int, ...], *, at_key: bool = False) -> None:
        """Report ``message`` at the field ``sub`` of the command (its key with ``at_key``)."""
        self.ok = False
        where = (*self.path, *sub)
        line, column = self.pos.key(where) if at_key else self.pos.value(where)
        self.col.error(message, line=line, column=column, field=field_path(where), code="command")


def _build_one(
    name: str, spec: dict[str, Any], path: tuple[str, ...], pos: YamlPositions, col: Collector
) -> CommandDecl | None:
    fail = _Problems(path, pos, col)
    if name in BUILTIN_TOOLS:
        fail(
            f"the command `{name}` has the name of a built-in tool; choose another name.",
            (),
            at_key=True,
        )
    shell = bool(spec.get("shell", False))
    argv = _argv(spec["argv"], shell, fail)
    parameters = spec.get("parameters") or {}
    _check_parameters(name, argv, spec["argv"], parameters, fail)
    timeout = DEFAULT_TIMEOUT
    if "timeout" in spec:
        try:
            timeout = parse_duration(spec["timeout"])
        except ValueError as exc:
            fail(f"must be {exc}.", ("timeout",))
    max_output = DEFAULT_MAX_OUTPUT
    if "max_output" in spec:
        try:
            max_output = parse_size(spec["max_output"])
        except ValueError as exc:
            fail(f"must be {exc}.", ("max_output",))
    cwd = _cwd(spec.get("cwd"), fail)
    if not fail.ok:
        return None
    return CommandDecl(
        name=name,
        argv=argv,
        description=spec.get("description", ""),
        idempotent=bool(spec.get("idempotent", False)),
        timeout=timeout,
        cwd=cwd,
        env=tuple(spec.get("env", ())),
        max_output=max_output,
        shell=shell,
        parameters=parameters_schema(parameters),
    )


def _argv(raw_argv: str | list[str], shell: bool, fail: _Problems) -> tuple[str, ...]:
    """The words a command runs: a string split as a shell would (or run by ``sh -c`` with
    ``shell: true``), a list as written."""
    if isinstance(raw_argv, str):
        if shell:
            return ("sh", "-c", raw_argv)
        try:
            argv = tuple(shlex.split(raw_argv))
        except ValueError as exc:
            fail(f"cannot split argv into words: {exc}; write it as a list.", ("argv",))
            argv = ()
        if not argv:
            fail("argv names no program.", ("argv",))
        return argv
    argv = tuple(raw_argv)
    if shell:
        fail(
            "`shell: true` takes argv as one string (the script run by `sh -c`); "
            "a list is already run as written.",
            ("shell",),
        )
    if argv and not argv[0].strip():
        fail("the first argv element (the program) is empty.", ("argv", 0))
    return argv


def _check_parameters(
    name: str,
    argv: tuple[str, ...],
    raw_argv: str | list[str],
    parameters: dict[str, Any],
    fail: _Problems,
) -> None:
    """Each ``{placeholder}`` in argv against the declared parameters, and back: a placeholder
    declared nowhere or a parameter used nowhere is warned about, one in a shell script
    refused, a default that its type refuses an error."""
    path, pos, col = fail.path, fail.pos, fail.col
    used: set[str] = set()
    for i, arg in enumerate(argv):
        for match in _PLACEHOLDER.finditer(arg):
            if match.group(1) in parameters:
                used.add(match.group(1))
            elif parameters:
                where: tuple[str | int, ...] = (
                    (*path, "argv") if isinstance(raw_argv, str) else (*path, "argv", i)
                )
                line, column = pos.value(where)
                col.warning(
                    f"`{{{match.group(1)}}}` is not a declared parameter of `{name}` and is "
                    f"passed as written; declared: {', '.join(parameters)}.",
                    line=line,
                    column=column,
                    field=field_path((*path, "argv")),
                    code="command",
                )
    if used and _runs_shell_script(argv):
        fail(
            "a parameter placeholder inside a shell script would let a value run as a shell "
            'command; pass it as an argument instead, e.g. ["sh", "-c", "grep -- \\"$1\\" .", '
            '"sh", "{pattern}"].',
            ("argv",),
        )
    for pname, pspec in parameters.items():
        if pname not in used:
            line, column = pos.key((*path, "parameters", pname))
            col.warning(
                f"parameter `{pname}` of `{name}` is declared but argv has no `{{{pname}}}`.",
                line=line,
                column=column,
                field=field_path((*path, "parameters", pname)),
                code="command",
            )
        if "default" in pspec:
            try:
                check_argument(pname, pspec, pspec["default"])
            except InputError as exc:
                fail(exc.message, ("parameters", pname, "default"))


def _cwd(cwd: str | None, fail: _Problems) -> str | None:
    """The folder a command runs in, normalised, which must lie inside the workspace."""
    if cwd is None:
        return None
    normal = posixpath.normpath(cwd.replace("\\", "/"))
    if posixpath.isabs(normal) or re.match(r"^[A-Za-z]:", normal):
        fail(
            "cwd must be a folder inside the workspace, relative to it (e.g. `src`), "
            "not an absolute path.",
            ("cwd",),
        )
    elif normal == ".." or normal.startswith("../"):
        fail("cwd leaves the workspace; use a folder inside it.", ("cwd",))
    else:
        return normal
    return cwd


def _runs_shell_script(argv: tuple[str, ...]) -> bool:
    """True when argv is ``sh -c SCRIPT ...`` and a placeholder sits in SCRIPT."""
    if len(argv) < 3 or posixpath.basename(argv[0]) not in _SHELLS:
        return False
    try:
        script_at = argv.index("-c") + 1
    except ValueError:
        return False
    return script_at < len(argv) and bool(_PLACEHOLDER.search(argv[script_at]))


def parameters_schema(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a command's arguments, as the model sees it."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, pspec in parameters.items():
        prop: dict[str, Any] = {"type": pspec.get("type", "string")}
        for key in ("description", "enum", "default"):
            if key in pspec:
                prop[key] = pspec[key]
        properties[pname] = prop
        if "default" not in pspec:
            required.append(pname)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def check_argument(name: str, spec: Mapping[str, Any], value: Any) -> Any:
    """``value`` converted to the parameter's type; InputError if it does not fit."""
    type_ = spec.get("type", "string")
    try:
        typed = coerce_value(value, type_)
    except ValueError as exc:
        raise InputError(f"argument `{name}` must be {exc}.") from None
    if "enum" in spec and typed not in spec["enum"]:
        options = ", ".join(value_text(v) for v in spec["enum"])
        raise InputError(f"argument `{name}` must be one of: {options} (got {typed!r}).")
    return typed


def check_arguments(cmd: CommandDecl, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments typed and completed with defaults; InputError names what is wrong."""
    properties: dict[str, Any] = cmd.parameters.get("properties", {})
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        allowed = ", ".join(properties) or "none"
        raise InputError(
            f"command `{cmd.name}` takes no argument {', '.join(f'`{u}`' for u in unknown)}; "
            f"it takes: {allowed}."
        )
    values: dict[str, Any] = {}
    for name, spec in properties.items():
        if name in arguments:
            values[name] = check_argument(name, spec, arguments[name])
        elif "default" in spec:
            values[name] = spec["default"]
        else:
            raise InputError(f"command `{cmd.name}` needs the argument `{name}`.")
    return values


def fill_argv(cmd: CommandDecl, arguments: Mapping[str, Any]) -> list[str]:
    """The argv to execute: placeholders replaced by the (checked) argument values."""
    values = check_arguments(cmd, arguments)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        return value_text(values[name]) if name in values else match.group(0)

    return [_PLACEHOLDER.sub(replace, arg) for arg in cmd.argv]


def command_tool_spec(cmd: CommandDecl) -> ToolSpec:
    """The tool spec the model sees for a command."""
    description = cmd.description or f"Run the command: {shlex.join(cmd.argv)}"
    return ToolSpec(name=cmd.name, description=description, parameters=cmd.parameters)


def command_definition(cmd: CommandDecl) -> dict[str, Any]:
    """Everything about a command that changes what it does or what the model sees."""
    return {
        "name": cmd.name,
        "argv": list(cmd.argv),
        "description": cmd.description,
        "idempotent": cmd.idempotent,
        "timeout": cmd.timeout,
        "cwd": cmd.cwd,
        "env": list(cmd.env),
        "max_output": cmd.max_output,
        "shell": cmd.shell,
        "parameters": cmd.parameters,
    }


def check_cwd(cmd: CommandDecl, workspace: Path) -> None:
    """WorkflowError if ``cmd``'s ``cwd`` does not stay inside ``workspace`` as written.

    Here rather than in the tool, so ``flow status`` can make the check that building the
    command's tool makes without importing every tool module.
    """
    if cmd.cwd is None:
        return
    normal = posixpath.normpath(cmd.cwd.replace("\\", "/"))
    if posixpath.isabs(normal) or normal == ".." or normal.startswith("../"):
        raise WorkflowError(
            f"command `{cmd.name}`: cwd `{cmd.cwd}` is not a folder inside the "
            f"workspace {workspace}.",
            field=f"$.commands.{cmd.name}.cwd",
            hint="Write cwd relative to the workspace root, e.g. `cwd: src`.",
        )
