"""Hooks files: the Copilot hooks format (``version: 1``) and VS Code's, loaded and checked.

A repository's hooks live in ``.github/hooks/*.json`` and ``.github/hooks/*/hooks.json``
(``find_hook_files``); ``--hooks FILE`` names others. Each file maps an event to a list of
command entries, run in order. Two formats are read, told apart by ``version``::

    {"version": 1,
     "hooks": {"preToolUse": [{"type": "command", "bash": "./guard.sh", "cwd": ".",
                               "env": {"MODE": "block"}, "timeoutSec": 10}]}}

    {"hooks": {"PreToolUse": [{"type": "command", "command": "./guard.sh", "timeout": 10}]}}

The second is VS Code's (PascalCase events; ``command`` with ``linux``/``osx``/``windows``
overrides, ``timeout`` in seconds; entries may also sit in matcher groups,
``{"matcher": "Bash", "hooks": [...]}``, as Claude Code writes them). Its events map onto
flow's moments (``VSCODE_EVENTS``), and its hooks get VS Code's input (``tool_name``,
``tool_input`` …; ``HookCommand.dialect``).

``check_hooks`` collects every problem with its position (``path:line:col``, the field path),
as ``flow check`` prints them; ``load_hooks`` raises ``WorkflowError`` at the first error.
flow runs the events ``EVENTS``; the other events of the Copilot CLI and of VS Code,
``type: prompt`` entries and entries with only a ``powershell`` (or ``windows``) command load
with a warning and are not run.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..base import yamlio
from ..base.errors import FileNotFoundFlowError, FlowError, SpecialFileError, WorkflowError
from ..base.safeopen import read_regular
from .diagnostics import Collector, did_you_mean
from .records import HOOK_TIMEOUT, Diagnostic, HookCommand
from .source import YamlPositions

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVENTS",
    "VSCODE_EVENTS",
    "HookCommand",
    "HooksFile",
    "agent_hooks",
    "check_hooks",
    "find_hook_files",
    "hooks_plan",
    "load_hooks",
]

#: The events flow runs hooks for, in the order a run meets them.
EVENTS = (
    "sessionStart",
    "userPromptSubmitted",
    "preToolUse",
    "postToolUse",
    "errorOccurred",
    "sessionEnd",
)
#: Events of the Copilot CLI that flow has no moment for: loaded, reported, never run.
OTHER_EVENTS = frozenset(
    {
        "agentStop",
        "subagentStart",
        "subagentStop",
        "preCompact",
        "permissionRequest",
        "notification",
        "postToolUseFailure",
    }
)
#: VS Code's events that flow runs, and the moment of flow's each stands for.
VSCODE_EVENTS = {
    "SessionStart": "sessionStart",
    "UserPromptSubmit": "userPromptSubmitted",
    "PreToolUse": "preToolUse",
    "PostToolUse": "postToolUse",
    "Stop": "sessionEnd",
}
#: Keys of a command entry; ``comment`` is documentation for people.
ENTRY_KEYS = frozenset(
    {"type", "bash", "command", "powershell", "cwd", "env", "timeoutSec", "matcher", "comment"}
)
#: Keys of a VS Code command entry.
VSCODE_ENTRY_KEYS = frozenset(
    {"type", "command", "windows", "linux", "osx", "cwd", "env", "timeout", "matcher"}
)
#: The Copilot CLI's default time limit of a hook, in seconds.
DEFAULT_TIMEOUT = HOOK_TIMEOUT
#: The longest time limit a hook may ask for (an hour).
MAX_TIMEOUT = 3600.0
#: Largest hooks file read.
MAX_HOOKS_BYTES = 1024 * 1024


@dataclass(frozen=True)
class HooksFile:
    """A loaded hooks file: its runnable commands, its hash and every problem found."""

    path: Path
    #: The name records use: relative to the workspace when inside it, else absolute.
    source: str
    #: ``sha256:<16 hex>`` of the file's bytes.
    digest: str
    hooks: tuple[HookCommand, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the file has no errors (warnings allowed)."""
        return not any(d.severity == "error" for d in self.diagnostics)


def hooks_plan(loaded: HooksFile) -> dict[str, Any]:
    """What ``flow check`` adds for a hooks file: ``kind``, ``hash`` and each hook it runs
    (the values of its ``env`` are left out: they may hold secrets)."""
    return {
        "kind": "hooks",
        "hash": loaded.digest,
        "hooks": [
            {
                "event": h.event,
                "ref": h.ref,
                "dialect": h.dialect,
                "index": h.index,
                "bash": h.bash,
                "cwd": h.cwd,
                "env": sorted(h.env),
                "timeout": h.timeout,
                "matcher": h.matcher,
            }
            for h in loaded.hooks
        ],
    }


#: Claude Code's settings files, whose ``hooks`` VS Code runs too (the rest is Claude's).
CLAUDE_SETTINGS = (Path(".claude") / "settings.json", Path(".claude") / "settings.local.json")


def find_hook_files(workspace: Path) -> list[Path]:
    """The workspace's hooks files: ``.github/hooks/*.json`` then ``.github/hooks/*/hooks.json``,
    each group sorted by name, then Claude Code's ``.claude/settings.json`` and
    ``.claude/settings.local.json`` (their ``hooks``, as VS Code reads them)."""
    folder = workspace / ".github" / "hooks"
    direct = sorted(p for p in folder.glob("*.json") if p.is_file()) if folder.is_dir() else []
    nested = (
        sorted(p for p in folder.glob("*/hooks.json") if p.is_file()) if folder.is_dir() else []
    )
    claude = [workspace / rel for rel in CLAUDE_SETTINGS if (workspace / rel).is_file()]
    return [*direct, *nested, *claude]


def is_claude_settings(path: Path) -> bool:
    """True for a Claude Code settings file (only its ``hooks`` are hooks)."""
    return path.parent.name == ".claude" and path.name in {p.name for p in CLAUDE_SETTINGS}


def source_name(path: Path, workspace: Path) -> str:
    """``path`` relative to ``workspace`` when inside it (POSIX form), else absolute."""
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def file_digest(data: bytes) -> str:
    """``sha256:<16 hex>`` of a hooks file's bytes, as runs record it."""
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


def load_hooks(path: Path, workspace: Path) -> HooksFile:
    """Load one hooks file; ``WorkflowError`` (exit 4) at its first error, ``FlowError``
    (exit 5) when it does not exist."""
    loaded = check_hooks(path, workspace)
    for problem in loaded.diagnostics:
        if problem.severity == "error":
            raise WorkflowError(
                problem.message,
                path=problem.path,
                line=problem.line,
                column=problem.column,
                field=problem.field,
                hint="Fix the hooks file, or run without it (--no-hooks).",
            )
    return loaded


def check_hooks(path: Path, workspace: Path) -> HooksFile:
    """Load one hooks file collecting every problem (``flow check``); a file that does not
    exist raises ``FileNotFoundFlowError``."""
    source = source_name(path, workspace)
    out = Collector(str(path))
    try:
        data = read_regular(path, MAX_HOOKS_BYTES, what="hooks file", follow=True)
    except SpecialFileError as exc:
        out.error(exc.message, code="hooks")
        return HooksFile(path, source, "", diagnostics=out.sorted())
    if data is None:
        raise FileNotFoundFlowError(f"hooks file not found: {path}", path=path)
    digest = file_digest(data)
    if len(data) > MAX_HOOKS_BYTES:
        out.error(f"the file is larger than {MAX_HOOKS_BYTES:,} bytes", code="hooks")
        return HooksFile(path, source, digest, diagnostics=out.sorted())
    try:
        text = data.decode("utf-8-sig")
        raw = json.loads(text)
    except UnicodeDecodeError:
        out.error("the file is not UTF-8 text", code="hooks")
        return HooksFile(path, source, digest, diagnostics=out.sorted())
    except (json.JSONDecodeError, RecursionError) as exc:
        line, col = (exc.lineno, exc.colno) if isinstance(exc, json.JSONDecodeError) else (1, 1)
        out.error(f"not valid JSON: {getattr(exc, 'msg', exc)}", line=line, column=col)
        return HooksFile(path, source, digest, diagnostics=out.sorted())
    reader = _Reader(out, _positions(text, str(path)), source)
    if is_claude_settings(path) and isinstance(raw, dict):
        # Claude Code's settings: its `hooks` are VS Code's format; the rest is not flow's.
        events = raw.get("hooks")
        hooks = reader.vscode_file({"hooks": events}) if isinstance(events, dict) else []
    else:
        hooks = reader.file(raw)
    return HooksFile(path, source, digest, tuple(hooks), out.sorted())


def agent_hooks(
    raw: Any, path: Path, positions: YamlPositions, col: Collector
) -> tuple[HookCommand, ...]:
    """The hooks an agent file defines in ``hooks:`` (VS Code's agent-scoped hooks: VS Code's
    events and entries, or the Copilot CLI's camelCase events), each problem reported at its
    place in the agent file. Their ``source`` is the agent file (a run names it as it names
    hooks files)."""
    where: dict[tuple[Any, ...], tuple[int, int]] = dict(positions.values)
    for parts, at in positions.keys.items():
        if parts:
            where[tuple([*parts[:-1], "@key", parts[-1]])] = at
    reader = _Reader(col, where, str(path))
    if not isinstance(raw, dict):
        reader.problem("error", ("hooks",), "`hooks` must map event names to lists of hooks")
        return ()
    if raw and _vscode_events(raw):
        return tuple(reader.vscode_file({"hooks": raw}))
    return tuple(reader.file({"version": 1, "hooks": raw}))


def _positions(text: str, where: str) -> dict[tuple[Any, ...], tuple[int, int]]:
    """Field path -> (line, column) of its value, from the YAML node graph of the JSON text
    (JSON is YAML's flow style); empty when the text does not compose."""
    try:
        root = yamlio.compose(text.replace("\t", " "), path=where)
    except FlowError:
        return {}
    found: dict[tuple[Any, ...], tuple[int, int]] = {}
    stack: list[tuple[yaml.Node, tuple[Any, ...]]] = [(root, ())] if root is not None else []
    while stack:
        node, parts = stack.pop()
        found.setdefault(parts, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                found[tuple([*parts, "@key", key.value])] = (
                    key.start_mark.line + 1,
                    key.start_mark.column + 1,
                )
                stack.append((value, (*parts, key.value)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*parts, i)) for i, item in enumerate(node.value))
    return found


def _field(parts: tuple[Any, ...]) -> str:
    text = "$"
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


class _Reader:
    """Turns the parsed JSON into hook commands, recording each problem where it is."""

    def __init__(
        self, out: Collector, where: dict[tuple[Any, ...], tuple[int, int]], source: str
    ) -> None:
        self.out = out
        self.where = where
        self.source = source

    def problem(
        self, severity: str, parts: tuple[Any, ...], message: str, *, key: bool = False
    ) -> None:
        at = self.where.get(tuple([*parts[:-1], "@key", parts[-1]]) if key and parts else parts)
        up = parts
        while at is None and up:  # a missing key: the object that lacks it
            up = up[:-1]
            at = self.where.get(up)
        line, column = at if at else (None, None)
        self.out.add(
            "error" if severity == "error" else "warning",
            message,
            line=line,
            column=column,
            field=_field(parts),
            code="hooks",
        )

    def file(self, raw: Any) -> list[HookCommand]:
        if not isinstance(raw, dict):
            self.problem("error", (), "a hooks file is a JSON object with `version` and `hooks`")
            return []
        if "version" not in raw and _vscode_events(raw.get("hooks")):
            return self.vscode_file(raw)
        if raw.get("version") != 1:
            version = json.dumps(raw.get("version")) if "version" in raw else "nothing"
            self.problem("error", ("version",), f"`version` must be 1 (found {version})")
        for key in raw:
            if key not in ("version", "hooks"):
                self.problem("warning", (key,), f"unknown key `{key}` (ignored)", key=True)
        events = raw.get("hooks")
        if not isinstance(events, dict):
            self.problem("error", ("hooks",), "`hooks` must be an object: event name -> list")
            return []
        found: list[HookCommand] = []
        for event, entries in events.items():
            found += self.event(str(event), entries)
        return found

    def event(self, event: str, entries: Any) -> list[HookCommand]:
        parts: tuple[Any, ...] = ("hooks", event)
        if event not in EVENTS:
            if event in OTHER_EVENTS or event[:1].isupper():
                self.problem(
                    "warning", parts, f"flow runs no `{event}` hooks (they are skipped)", key=True
                )
            else:
                hint = did_you_mean(event, [*EVENTS, *OTHER_EVENTS])
                self.problem("error", parts, f"unknown hook event `{event}`{hint}", key=True)
            return []
        if not isinstance(entries, list):
            self.problem("error", parts, "an event's hooks are a list of entries")
            return []
        found = []
        for index, entry in enumerate(entries):
            hook = self.entry(event, index, entry)
            if hook is not None:
                found.append(hook)
        return found

    def vscode_file(self, raw: dict[str, Any]) -> list[HookCommand]:
        for key in raw:
            if key != "hooks":
                self.problem("warning", (key,), f"unknown key `{key}` (ignored)", key=True)
        found: list[HookCommand] = []
        for written, entries in raw["hooks"].items():
            parts: tuple[Any, ...] = ("hooks", written)
            event = VSCODE_EVENTS.get(str(written))
            if event is None:
                self.problem(
                    "warning", parts, f"flow runs no `{written}` hooks (they are skipped)", key=True
                )
                continue
            if not isinstance(entries, list):
                self.problem("error", parts, "an event's hooks are a list of entries")
                continue
            index = 0
            for position, entry in enumerate(entries):
                group = entry.get("hooks") if isinstance(entry, dict) else None
                if isinstance(group, list):  # a matcher group: {"matcher": …, "hooks": […]}
                    matcher = entry.get("matcher")
                    for inner, item in enumerate(group):
                        at = (*parts, position, "hooks", inner)
                        label = f"{written}[{position}].hooks[{inner}]"
                        hook = self.vscode_entry(event, index, at, label, item, matcher)
                        index += 1
                        found += [hook] if hook is not None else []
                    continue
                at = (*parts, position)
                hook = self.vscode_entry(event, index, at, f"{written}[{position}]", entry, None)
                index += 1
                found += [hook] if hook is not None else []
        return found

    def vscode_entry(
        self,
        event: str,
        index: int,
        parts: tuple[Any, ...],
        label: str,
        entry: Any,
        group_matcher: Any,
    ) -> HookCommand | None:
        if not isinstance(entry, dict):
            self.problem("error", parts, "a hook entry is an object with `type` and `command`")
            return None
        for key in entry:
            if key not in VSCODE_ENTRY_KEYS:
                hint = did_you_mean(str(key), VSCODE_ENTRY_KEYS)
                self.problem(
                    "warning", (*parts, key), f"unknown key `{key}` (ignored){hint}", key=True
                )
        if entry.get("type", "command") != "command":
            self.problem("warning", (*parts, "type"), "flow runs `command` hooks only")
            return None
        own = "osx" if sys.platform == "darwin" else "linux"
        command = entry.get(own) or entry.get("command")
        if not isinstance(command, str) or not command.strip() or "\x00" in command:
            if command is None and entry.get("windows") is not None:
                self.problem(
                    "warning", parts, "this hook has only a `windows` command (add `command`)"
                )
            else:
                self.problem("error", (*parts, "command"), "`command` must be a non-empty string")
            return None
        settings = {**entry, "matcher": entry.get("matcher", group_matcher)}
        where = (event, index, parts)
        return self.built(where, settings, command, timeout_key="timeout", label=label)

    def entry(self, event: str, index: int, entry: Any) -> HookCommand | None:
        parts: tuple[Any, ...] = ("hooks", event, index)
        if not isinstance(entry, dict):
            self.problem("error", parts, "a hook entry is an object with `type` and `bash`")
            return None
        for key in entry:
            if key not in ENTRY_KEYS:
                hint = did_you_mean(str(key), ENTRY_KEYS)
                self.problem(
                    "warning", (*parts, key), f"unknown key `{key}` (ignored){hint}", key=True
                )
        kind = entry.get("type")
        if kind == "prompt":
            self.problem("warning", (*parts, "type"), "flow does not run `prompt` hooks")
            return None
        if kind != "command":
            self.problem("error", (*parts, "type"), '`type` must be "command"')
            return None
        command = self.command(parts, entry)
        return self.built((event, index, parts), entry, command, timeout_key="timeoutSec")

    def built(
        self,
        where: tuple[str, int, tuple[Any, ...]],
        entry: dict[str, Any],
        command: str | None,
        *,
        timeout_key: str,
        label: str = "",
    ) -> HookCommand | None:
        """The hook an entry of either format describes, its ``cwd``, ``env``, time limit and
        ``matcher`` checked, every problem recorded (None when there is one, or no
        ``command``)."""
        event, index, parts = where
        cwd = entry.get("cwd")
        cwd_ok = cwd is None or isinstance(cwd, str)
        if not cwd_ok:
            self.problem("error", (*parts, "cwd"), "`cwd` must be a string (a folder)")
        env = self.env(parts, entry.get("env"))
        timeout = self.timeout(parts, entry.get(timeout_key, DEFAULT_TIMEOUT), key=timeout_key)
        matcher = self.matcher(parts, event, entry.get("matcher"))
        if command is None or not cwd_ok or env is None or timeout is None or matcher is False:
            return None
        return HookCommand(
            event=event,
            index=index,
            source=self.source,
            bash=command,
            cwd=cwd,
            env=env,
            timeout=timeout,
            # ``*`` and an empty matcher (VS Code's and Claude Code's way) match every tool.
            matcher=matcher if isinstance(matcher, str) and matcher not in ("", "*") else None,
            dialect="vscode" if label else "copilot",
            label=label,
        )

    def command(self, parts: tuple[Any, ...], entry: dict[str, Any]) -> str | None:
        for key in ("bash", "command", "powershell"):
            value = entry.get(key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                self.problem("error", (*parts, key), f"`{key}` must be a non-empty string")
                return None
        command = entry.get("bash") or entry.get("command")
        if command is None:
            if entry.get("powershell") is not None:
                self.problem(
                    "warning",
                    parts,
                    "this hook has only a `powershell` command, which flow does not run here "
                    "(add `bash`)",
                )
            else:
                self.problem("error", parts, "a command hook needs `bash` (or `powershell`)")
            return None
        if "\x00" in command:
            self.problem("error", (*parts, "bash"), "the command contains a NUL character")
            return None
        return str(command)

    def env(self, parts: tuple[Any, ...], value: Any) -> dict[str, str] | None:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem("error", (*parts, "env"), "`env` must be an object of names to strings")
            return None
        out: dict[str, str] = {}
        for name, text in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name)) or not isinstance(
                text, str | int | float | bool
            ):
                self.problem(
                    "error",
                    (*parts, "env", name),
                    'each `env` entry is NAME: "value" (a variable name and a string)',
                )
                return None
            out[str(name)] = json.dumps(text) if isinstance(text, bool) else str(text)
        return out

    def timeout(self, parts: tuple[Any, ...], value: Any, key: str = "timeoutSec") -> float | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problem("error", (*parts, key), f"`{key}` must be a number")
            return None
        if not 0 < value <= MAX_TIMEOUT:
            self.problem(
                "error",
                (*parts, key),
                f"`{key}` must be more than 0 and at most {MAX_TIMEOUT:.0f} seconds",
            )
            return None
        return float(value)

    def matcher(self, parts: tuple[Any, ...], event: str, value: Any) -> str | bool | None:
        if value is None:
            return None
        if event not in ("preToolUse", "postToolUse"):
            self.problem("warning", (*parts, "matcher"), "`matcher` applies to tool events only")
            return None
        if not isinstance(value, str):
            self.problem("error", (*parts, "matcher"), "`matcher` must be a regular expression")
            return False
        try:
            re.compile(value)
        except re.error as exc:
            self.problem("error", (*parts, "matcher"), f"`matcher` is not a valid regex: {exc}")
            return False
        return value


def _vscode_events(events: Any) -> bool:
    """True when ``hooks`` names its events as VS Code does (PascalCase)."""
    return isinstance(events, dict) and bool(events) and all(str(k)[:1].isupper() for k in events)
