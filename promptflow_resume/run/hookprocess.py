"""Running one hook: its command under ``bash -c``, the event's JSON on its standard input.

A hook runs the way a command tool runs (``tools.commands.run_process``): in its own session
under the supervisor, so its whole process tree ends with flow however flow ends; its time
limit (``timeoutSec``) ends the group with SIGTERM, then SIGKILL. Its environment is
``PATH`` and ``HOME`` plus the variables its entry names in ``env`` (``$NAME`` / ``${NAME}``
in a value are taken from flow's environment); nothing else of flow's environment reaches
it. Its folder is its ``cwd`` relative to the workspace (the workspace when none is given),
which must stay inside the workspace. What it printed is redacted before anything keeps it::

    outcome = run_hook(hook, {"timestamp": 1, "cwd": "/repo", ...}, workspace, redactor)
    outcome.failed, outcome.decision, outcome.preview
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..base.confine import PathEscapeError, confine
from ..base.redact import Redactor
from ..tools.declared import run_process
from ..workflow.hookfiles import HookCommand

#: Characters of a hook's output kept in records and messages.
PREVIEW_CHARS = 300
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclass(frozen=True)
class HookOutcome:
    """How one hook run ended, its output already redacted."""

    hook: HookCommand
    #: The exit code (negative: killed by that signal); None when it could not start.
    exit: int | None
    ms: int
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    #: Why it could not start (no such folder, no bash).
    error: str | None = None
    #: A ``preToolUse`` hook's ``permissionDecision`` (``allow``, ``deny``, ``ask``), if any.
    decision: str | None = None
    reason: str | None = None
    #: A ``preToolUse`` hook's new arguments for the call (VS Code's and Claude Code's
    #: ``updatedInput``, the Copilot SDK's ``modifiedArgs``), read before redaction: the tool
    #: gets them as the hook wrote them; what is recorded is redacted.
    arguments: dict[str, Any] | None = None
    #: A ``preToolUse`` hook's ``additionalContext``: text for the model.
    context: str | None = None

    @property
    def failed(self) -> bool:
        """True when the hook did not run to a zero exit in time."""
        return self.error is not None or self.timed_out or self.exit != 0

    @property
    def preview(self) -> str:
        """The start of what it printed (stderr for a failure), on one line."""
        text = (self.stderr or self.stdout) if self.failed else (self.stdout or self.stderr)
        flat = " ".join(text.split())
        return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"

    def describe(self) -> str:
        """One line for people: which hook, how it ended, what it said."""
        if self.error is not None:
            how = f"could not start: {self.error}"
        elif self.timed_out:
            how = f"timed out after {self.hook.timeout:g} s and was stopped"
        elif self.exit is not None and self.exit < 0:
            how = f"was killed by signal {-self.exit}"
        else:
            how = f"exited with {self.exit}"
        said = f": {self.preview}" if self.preview else ""
        return f"hook {self.hook.ref} {how} after {self.ms} ms{said}"


def hook_environment(hook: HookCommand, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``PATH``, ``HOME`` and the hook's own variables, ``$NAME`` in their values expanded
    from ``env`` (flow's environment by default)."""
    source = os.environ if env is None else env

    def expand(value: str) -> str:
        return _VARIABLE.sub(lambda m: source.get(m.group(1) or m.group(2), ""), value)

    out = {"PATH": source.get("PATH", os.defpath)}
    # Hooks are scripts written for Copilot, many of which keep logs under ``~``.
    if "HOME" in source:
        out["HOME"] = source["HOME"]
    out.update({name: expand(value) for name, value in hook.env.items()})
    return out


def run_hook(
    hook: HookCommand,
    payload: Mapping[str, Any],
    workspace: Path,
    redactor: Redactor,
    *,
    env: Mapping[str, str] | None = None,
) -> HookOutcome:
    """Run ``hook`` once with ``payload`` on its stdin; every failure is an outcome."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        cwd = confine(workspace, hook.cwd or ".")
    except PathEscapeError as exc:
        return _not_started(hook, elapsed(), f"cwd {exc}")
    if not cwd.is_dir():
        return _not_started(hook, elapsed(), f"its folder {hook.cwd!r} does not exist")
    data = json.dumps(dict(payload), ensure_ascii=False).encode("utf-8")
    try:
        outcome = run_process(
            ["bash", "-c", hook.bash],
            cwd=cwd,
            env=hook_environment(hook, env),
            timeout=hook.timeout,
            stdin=data,
        )
    except OSError as exc:
        return _not_started(hook, elapsed(), exc.strerror or str(exc))
    stdout, _ = redactor.redact(outcome.stdout.decode("utf-8", "replace"))
    stderr, _ = redactor.redact(outcome.stderr.decode("utf-8", "replace"))
    ended = HookOutcome(
        hook,
        outcome.returncode,
        elapsed(),
        timed_out=outcome.timed_out,
        stdout=stdout,
        stderr=stderr,
    )
    if hook.event != "preToolUse":
        return ended
    if ended.failed:
        return replace(ended, decision="deny", reason=failed_guard_reason(ended))
    said = hook_output(outcome.stdout.decode("utf-8", "replace"))
    reason, _ = redactor.redact(said.reason) if said.reason else (None, 0)
    return replace(
        ended,
        decision=said.decision,
        reason=reason,
        arguments=said.arguments,
        context=said.context,
    )


#: The exit code by which a hook blocks what it guards (VS Code's and Claude Code's
#: "blocking error"): its standard error is the reason.
BLOCKING_EXIT = 2


def failed_guard_reason(outcome: HookOutcome) -> str:
    """Why a ``preToolUse`` hook that did not exit 0 denies its call: a guard that fails,
    times out or blocks with exit 2 fails closed (docs/spec.md 4.15)."""
    said = outcome.preview or "it gave no reason"
    if outcome.exit == BLOCKING_EXIT and not outcome.timed_out:
        return said
    if outcome.error is not None:
        return f"the hook could not start ({outcome.error}), so the call is denied"
    if outcome.timed_out:
        return f"the hook timed out after {outcome.hook.timeout:g} s, so the call is denied"
    return f"the hook exited with {outcome.exit}, so the call is denied: {said}"


def _not_started(hook: HookCommand, ms: int, why: str) -> HookOutcome:
    """A hook that could not start; a guard (``preToolUse``) then denies its call."""
    outcome = HookOutcome(hook, None, ms, error=why)
    if hook.event == "preToolUse":
        return replace(outcome, decision="deny", reason=failed_guard_reason(outcome))
    return outcome


@dataclass(frozen=True)
class HookOutput:
    """What a ``preToolUse`` hook's JSON output says: its decision and reason, new arguments
    for the call, and context for the model (each None when it says nothing of it)."""

    decision: str | None = None
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    context: str | None = None


#: Where each field may be, first found winning: under ``hookSpecificOutput`` (VS Code's and
#: Claude Code's form) or at the top (the Copilot CLI's and SDK's).
_ARGUMENT_KEYS = ("updatedInput", "modifiedArgs")


def hook_output(stdout: str) -> HookOutput:
    """A ``preToolUse`` hook's output read: the whole output as one JSON object, else its
    last line that is one; each field under ``hookSpecificOutput`` or at the top."""
    candidates = [stdout.strip(), *reversed(stdout.strip().splitlines())]
    for text in candidates:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if not isinstance(value, dict):
            continue
        inner = value.get("hookSpecificOutput")
        holders = [inner if isinstance(inner, dict) else {}, value]
        decision = _first(holders, ("permissionDecision",), str)
        reason = _first(holders, ("permissionDecisionReason",), str)
        arguments = _first(holders, _ARGUMENT_KEYS, dict)
        context = _first(holders, ("additionalContext",), str)
        return HookOutput(decision, reason, arguments, context or None)
    return HookOutput()


def _first(holders: list[dict[str, Any]], keys: tuple[str, ...], kind: type) -> Any:
    for holder in holders:
        for key in keys:
            if isinstance(holder.get(key), kind):
                return holder[key]
    return None
