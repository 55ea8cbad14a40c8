"""A run's hooks: which files it runs, and each hook run as an event of the run's journal.

Hooks come from the repository being run, like the workflow's own commands, and from the
person running flow: the workspace's ``.github/hooks/*.json`` and ``.github/hooks/*/hooks.json``
(unless ``--no-hooks``) and every ``--hooks FILE``. Never from a progress file: the run
records which files it ran with and what each hook did, and nothing it records names a
command (docs/spec.md 10.8).

The engine tells ``RunHooks`` about its moments; each hook run is one durable save of the
run, recorded in ``run.hooks.open`` (``HookLedger``) under its event and what the event is
about:

- ``sessionStart`` (``attempt:N``) when an attempt begins and ``sessionEnd`` when it ends:
  once per attempt, so a resumed run runs them again (``source: "resume"``);
- ``userPromptSubmitted`` (``entry:N#HASH``, the step's prompt and its text) and
  ``postToolUse`` (``entry:N``, the tool's result): opened by the same save that records their
  entry and run right after; a crash in between leaves them open and the next attempt runs
  the hooks not yet recorded. A tool's event closes with its last hook's record; a prompt's
  when the model answers it, so the same prompt written again by a resume is not sent to the
  hooks again;
- ``preToolUse`` (``call:ID``): run before the tool's start record; the record stays until the
  call's result is saved, so a resume reuses its decision instead of asking again;
- ``errorOccurred`` (``error:N``): when an error stops the attempt.

A hook recorded as run is never run again for the same event. One that was running when flow
died (its record not yet written) runs again on resume: the record follows the run.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base import faults
from ..base.redact import Redactor
from ..base.truststore import Verdict
from ..progress.hookledger import HookEvent, HookRun
from ..progress.model import Entry, Run
from ..progress.seal import Key
from ..workflow.hookfiles import (
    HookCommand,
    HooksFile,
    file_digest,
    find_hook_files,
    load_hooks,
    source_name,
)
from ..workflow.records import Workflow
from .runoptions import RunOptions

#: ``sessionEnd``'s ``reason`` for each way an attempt ends (Copilot's five reasons).
_END_REASONS = {
    "completed": "complete",
    "failed": "error",
    "timeout": "timeout",
    "interrupted": "abort",
    "budget_exhausted": "abort",
}
#: The text a denied call's result starts with.
DENIED = "denied by a preToolUse hook"


@dataclass(frozen=True)
class PreToolUse:
    """What a call's ``preToolUse`` hooks decided: a denial's text (the call does not run),
    or the arguments it runs with (None: the model's) and what the model is told beside its
    result (``additionalContext``, and that the arguments were changed)."""

    denied: str | None = None
    arguments: dict[str, Any] | None = None
    #: Lines added after the call's result, each naming the hook it comes from.
    notes: tuple[str, ...] = ()

    def result_text(self, content: str) -> str:
        """``content`` (the tool's result) with the hooks' notes after it."""
        if not self.notes:
            return content
        return content.rstrip("\n") + "\n\n" + "\n".join(self.notes)


@dataclass(frozen=True)
class RunHookSet:
    """The hooks files one attempt runs with, and their commands in run order."""

    files: tuple[HooksFile, ...] = ()
    #: The workspace's hooks files left out because its folder does not trust them as they
    #: are (relative path, verdict): they run nothing (docs/spec.md 10.9).
    untrusted: tuple[tuple[str, Verdict], ...] = ()

    @property
    def commands(self) -> tuple[HookCommand, ...]:
        """Every runnable command, file by file, in each file's order."""
        return tuple(hook for f in self.files for hook in f.hooks)

    def digests(self) -> dict[str, str]:
        """File -> ``sha256:<16 hex>``, as the attempt records them."""
        return {f.source: f.digest for f in self.files}


def hook_files(root: Path, options: RunOptions) -> tuple[list[Path], list[tuple[str, Verdict]]]:
    """The hooks files a run in ``root`` uses: the workspace's (unless ``--no-hooks``) that
    its trust allows, then each ``--hooks FILE`` (relative to the working directory; the
    person's own, so no trust is asked); and the workspace's files left out, with why."""
    trust = options.trust_in(root)
    found: list[Path] = []
    untrusted: list[tuple[str, Verdict]] = []
    for path in find_hook_files(root) if options.hooks else []:
        verdict = trust.verdict(path)
        if verdict.allowed or verdict is Verdict.OUTSIDE:
            found.append(path)
        else:
            untrusted.append((trust.relative(path) or str(path), verdict))
    for extra in options.hook_files:
        path = Path(extra)
        if path.resolve() not in {p.resolve() for p in found}:
            found.append(path)
    return found, untrusted


def load_run_hooks(root: Path, options: RunOptions, workflow: Workflow | None = None) -> RunHookSet:
    """Load the run's hooks files; a file with an error stops the run before it starts
    (``WorkflowError``, exit 4; a missing ``--hooks`` file exit 5). Files the workspace's
    trust leaves out are not read as hooks, only listed in ``untrusted``. With ``workflow``,
    its agent's own ``hooks:`` come after the files' (unless ``--no-hooks``), under the same
    trust as the agent file: a workspace's agent runs hooks only once the folder is trusted
    (docs/spec.md 10.9)."""
    paths, untrusted = hook_files(root, options)
    files = [load_hooks(path, root) for path in paths]
    agent = agent_hooks_file(root, workflow, options) if workflow is not None else None
    if isinstance(agent, HooksFile):
        files.append(agent)
    elif agent is not None:
        untrusted.append(agent)
    return RunHookSet(tuple(files), tuple(untrusted))


def agent_hooks_file(
    root: Path, workflow: Workflow, options: RunOptions
) -> HooksFile | tuple[str, Verdict] | None:
    """The hooks of ``workflow``'s agent as one more hooks file, or why its folder's trust
    leaves them out (relative path, verdict); None without any (or with ``--no-hooks``)."""
    loaded = agent_hooks(root, workflow) if options.hooks else None
    if loaded is None:
        return None
    trust = options.trust_in(root)
    verdict = trust.verdict(loaded.path)
    if not verdict.allowed and verdict is not Verdict.OUTSIDE:
        return trust.relative(loaded.path) or str(loaded.path), verdict
    return loaded


def agent_hooks(root: Path, workflow: Workflow) -> HooksFile | None:
    """``workflow``'s agent's ``hooks:`` as a hooks file named as the agent file, its digest
    that of the hooks it defines (a changed body is not news about hooks)."""
    path = workflow.agent_hooks_file
    if not workflow.agent_hooks or path is None:
        return None
    source = source_name(path, root)
    hooks = tuple(replace(h, source=source) for h in workflow.agent_hooks)
    text = repr(
        [(h.ref, h.bash, h.cwd, sorted(h.env.items()), h.timeout, h.matcher) for h in hooks]
    )
    return HooksFile(path, source, file_digest(text.encode("utf-8")), hooks)


def hooks_listing(
    root: Path, options: RunOptions, workflow: Workflow | None = None
) -> dict[str, Any]:
    """What ``flow hooks`` shows: every hooks file a run in ``root`` would read (the
    workspace's, ``--hooks FILE``, the agent's ``hooks:`` of ``workflow``), where each comes
    from, whether its folder's trust lets it run, its problems and each hook it runs (read
    as data: nothing is run)."""
    trust = options.trust_in(root)
    files: list[dict[str, Any]] = []

    def add(path: Path, origin: str, loaded: HooksFile, verdict: Verdict | None) -> None:
        runs = loaded.ok and (verdict is None or verdict.allowed or verdict is Verdict.OUTSIDE)
        files.append(
            {
                "path": loaded.source,
                "origin": origin,
                "trust": None if verdict is None else verdict.value,
                "runs": runs,
                "hash": loaded.digest,
                "hooks": [
                    {
                        "event": h.event,
                        "written": h.label.partition("[")[0] or h.event,
                        "ref": h.ref,
                        "command": h.bash,
                        "matcher": h.matcher,
                        "timeout": h.timeout,
                        "dialect": h.dialect,
                    }
                    for h in loaded.hooks
                ],
                "diagnostics": [{"path": d.path, **d.to_dict()} for d in loaded.diagnostics],
            }
        )

    from ..workflow.hookfiles import check_hooks, is_claude_settings

    for path in find_hook_files(root) if options.hooks else []:
        origin = "claude-settings" if is_claude_settings(path) else "workspace"
        add(path, origin, check_hooks(path, root), trust.verdict(path))
    for extra in options.hook_files:
        add(Path(extra), "--hooks", check_hooks(Path(extra), root), None)
    agent = agent_hooks(root, workflow) if workflow is not None and options.hooks else None
    if agent is not None:
        add(agent.path, "agent", agent, trust.verdict(agent.path))
    return {"workspace": str(root), "files": files, "hooks": options.hooks}


def hooks_changed(run: Run, now: RunHookSet) -> list[str]:
    """A note when the hooks files differ from those the run's last attempt ran with."""
    last = next((a.hooks for a in reversed(run.attempts) if a.hooks), None)
    if last is None and not now.files:
        return []
    current = now.digests()
    # A file left out for want of trust is said so by the trust notice, not as gone.
    last = {k: v for k, v in (last or {}).items() if k not in dict(now.untrusted)}
    changes = [
        f"{name} (changed)" for name in current if name in last and last[name] != current[name]
    ]
    changes += [f"{name} (new)" for name in current if name not in last]
    changes += [f"{name} (gone)" for name in last if name not in current]
    if not changes or not run.attempts:
        return []
    return [
        "hooks files changed since the run last went on: "
        + ", ".join(changes)
        + "; this attempt runs the hooks as they are now"
    ]


@dataclass
class RunHooks:
    """Runs a run's hooks at the engine's moments, recording each run before going on."""

    hooks: Sequence[HookCommand]
    run: Run
    #: One durable save of the run (the engine's ``_save``).
    save: Callable[[], None]
    workspace: Path
    redactor: Redactor
    #: Tells the person (a failing hook); ``note`` records a line in the attempt's history.
    notice: Callable[[str], None] = print
    note: Callable[[str], None] = lambda text: None
    #: Told of each hook run: the hook, its event, how it ended and its time (an event stream).
    ran: Callable[[str, str, str, int], None] = lambda hook, event, status, ms: None
    attempt: int = 1
    #: This machine's key: it seals each record, and a record it did not seal is dropped.
    key: Key | None = None
    _errors: int = field(default=0, init=False)
    #: New arguments hooks gave this attempt, as they wrote them (the record has them
    #: redacted): (event key, hook) -> arguments, taken by ``pre_tool``.
    _live_arguments: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, init=False)

    # --- the engine's moments -----------------------------------------------------------

    def begin(self, *, initial_prompt: str | None) -> None:
        """A new attempt: forget what is settled or belongs to an older attempt, run the
        ``sessionStart`` hooks, then whatever a crash left open."""
        self._tidy()
        source = "new" if self.attempt == 1 and len(self.run.transcript) <= 1 else "resume"
        payload: dict[str, Any] = {"source": source}
        if initial_prompt:
            payload["initialPrompt"] = initial_prompt
        self._event("sessionStart", f"attempt:{self.attempt}", payload, close=True)
        self.settle()

    def expect_prompt(self, entries: Iterable[Entry], first_id: int) -> None:
        """A step's prompt is about to be saved: its ``userPromptSubmitted`` event opens in
        the same save (no save here). A prompt written again as it was (a resume rewrites the
        unanswered prompt of the step it stopped in) is the same event."""
        if not self._for("userPromptSubmitted"):
            return
        for offset, entry in enumerate(entries):
            key = _prompt_key(first_id + offset, entry.content)
            if entry.role == "user" and self.run.hooks.find("userPromptSubmitted", key) is None:
                self.run.hooks.open.append(self._sealed(HookEvent("userPromptSubmitted", key)))

    def replied(self) -> None:
        """The model answered: the prompts' events are done with (closed by the next save)."""
        self.run.hooks.open = [e for e in self.run.hooks.open if e.event != "userPromptSubmitted"]

    def pre_tool(self, call: Entry) -> PreToolUse:
        """Run the ``preToolUse`` hooks of ``call`` not yet recorded: a denial (the call then
        does not run), else the arguments a hook gave it (``updatedInput``/``modifiedArgs``;
        the last hook that gave some wins) and the context they add for the model. A resumed
        call takes them from the record, so the hooks are not asked again."""
        tool = call.tool or ""
        if not self._for("preToolUse", tool):
            return PreToolUse()
        key = f"call:{call.call_id}"
        record = self._event("preToolUse", key, self._tool_payload(call), tool=tool, close=False)
        denials = [r for r in record.ran if r.decision == "deny"]
        if denials:
            reason = denials[0].reason or "no reason given"
            return PreToolUse(denied=f"{DENIED} ({denials[0].hook}): {reason}")
        notes: list[str] = []
        arguments: dict[str, Any] | None = None
        for ran in record.ran:
            given = self._live_arguments.pop((key, ran.hook), None)
            if given is None and ran.args is not None:
                given = _json_object(ran.args)  # recorded before a crash: redacted
            if given is not None:
                arguments = given
                notes.append(
                    f"[the preToolUse hook {ran.hook} changed the arguments to {ran.args}]"
                )
            if ran.context:
                notes.append(f"[context from the preToolUse hook {ran.hook}: {ran.context}]")
        return PreToolUse(arguments=arguments, notes=tuple(notes))

    def tool_done(self, call: Entry, result_id: int) -> None:
        """``call``'s result is about to be saved (as entry ``result_id``): its ``preToolUse``
        record closes and its ``postToolUse`` event opens in that save (no save here)."""
        self.run.hooks.close("preToolUse", f"call:{call.call_id}")
        if self._for("postToolUse", call.tool or ""):
            self.run.hooks.open.append(self._sealed(HookEvent("postToolUse", f"entry:{result_id}")))

    def settle(self) -> None:
        """Run the hooks of the prompt and tool events still open, in the order opened."""
        for record in [e for e in self.run.hooks.open if e.event in _SETTLED]:
            number = record.key.removeprefix("entry:").partition("#")[0]
            entry = self.run.entry(int(number)) if number.isdigit() else None
            payload = self._settled_payload(record.event, entry)
            if payload is None:
                # A result set aside (a rewind) is done with; an unanswered prompt is taken
                # out by a resume and written again, and its record must then still be here.
                if record.event == "postToolUse":
                    self.run.hooks.close(record.event, record.key)
                continue
            tool = str(payload.get("toolName", ""))
            # A prompt's record stays until the model answers it (see ``expect_prompt``).
            close = record.event == "postToolUse"
            self._event(record.event, record.key, payload, tool=tool, close=close)

    def error(self, error: BaseException, context: str) -> None:
        """Run the ``errorOccurred`` hooks for an error that stops the attempt."""
        if not self._for("errorOccurred"):
            return
        self._errors += 1
        message, _ = self.redactor.redact(str(error)[:2000])
        payload = {
            "error": {"message": message, "name": type(error).__name__},
            "errorContext": context,
            "recoverable": True,
        }
        key = f"error:{self.attempt}.{self._errors}"
        self._while_stopping(lambda: self._event("errorOccurred", key, payload, close=True))

    def end(self, status: str) -> None:
        """Run the ``sessionEnd`` hooks as the attempt ends with ``status``."""
        payload = {"reason": _END_REASONS.get(status, "user_exit")}
        key = f"attempt:{self.attempt}"
        self._while_stopping(lambda: self._event("sessionEnd", key, payload, close=True))

    def _while_stopping(self, step: Callable[[], object]) -> None:
        """Hooks run while the attempt stops: a failure to record them (a full disk) must not
        hide why the attempt stopped, nor keep the run's last checkpoint from being written."""
        try:
            step()
        except Exception as exc:
            self.notice(f"hooks could not be recorded as the run stopped: {exc}")

    # --- one event ------------------------------------------------------------------------

    def _for(self, event: str, tool: str | None = None) -> list[HookCommand]:
        return [h for h in self.hooks if h.event == event and (tool is None or h.matches(tool))]

    def _event(
        self, event: str, key: str, payload: Mapping[str, Any], *, tool: str = "", close: bool
    ) -> HookEvent:
        """Run ``event``'s hooks not yet recorded for ``key``, saving after each."""
        ledger = self.run.hooks
        hooks = self._for(event, tool if event in _TOOL_EVENTS else None)
        record = ledger.find(event, key)
        if record is None:
            record = HookEvent(event, key)
            if hooks:
                # Durable before any hook has an effect, with what it is about (a reply whose
                # calls these are is saved here, not after the hook).
                ledger.open.append(self._sealed(record))
                self.save()
        for position, hook in enumerate(hooks):
            if any(r.hook == hook.ref for r in record.ran):
                continue
            done = self._run_one(hook, payload, key)
            record.ran.append(done)
            self.ran(done.hook, event, _status(done), done.ms)
            self._sealed(record)
            ledger.runs += 1
            if close and position == len(hooks) - 1:
                ledger.close(event, key)
            faults.point("hooks.before_record")
            self.save()
            faults.point("hooks.recorded")
        if close and ledger.find(event, key) is not None:
            ledger.close(event, key)
            self.save()
        return record

    def _run_one(self, hook: HookCommand, payload: Mapping[str, Any], key: str = "") -> HookRun:
        from .hookprocess import run_hook

        whole = hook_input(hook, {**self._common(), **payload})
        try:
            outcome = run_hook(hook, whole, self.workspace, self.redactor)
        except Exception as exc:  # a hook never loses the run
            message, _ = self.redactor.redact(f"{type(exc).__name__}: {exc}")
            self.notice(f"hook {hook.ref} could not run: {message}")
            self.note(f"hook {hook.ref} could not run: {message}")
            # A guard that cannot run fails closed: its call is denied.
            denied = "deny" if hook.event == "preToolUse" else None
            reason = f"the hook could not run ({message[:200]})" if denied else None
            return HookRun(hook.ref, None, 0, decision=denied, reason=reason, output=message[:300])
        if outcome.failed:
            self.notice(outcome.describe())
            self.note(outcome.describe())
        elif outcome.decision == "deny":
            self.note(f"hook {hook.ref} denied a call: {outcome.reason or 'no reason given'}")
        changed = outcome.arguments if outcome.decision != "deny" else None
        args = None
        if changed is not None:
            self._live_arguments[(key, hook.ref)] = changed
            args = self.redactor.redact(json.dumps(changed, ensure_ascii=False))[0]
            self.note(f"hook {hook.ref} changed the arguments of a call to {args[:300]}")
        context = self.redactor.redact(outcome.context)[0][:20000] if outcome.context else None
        return HookRun(
            hook=hook.ref,
            exit=outcome.exit,
            ms=outcome.ms,
            timed_out=outcome.timed_out,
            decision=outcome.decision,
            reason=(outcome.reason or "")[:2000] or None,
            output=outcome.preview or None,
            args=args,
            context=context,
        )

    # --- payloads, as the Copilot CLI sends them ---------------------------------------------

    def _common(self) -> dict[str, Any]:
        return {
            "sessionId": self.run.run_id,
            "timestamp": int(time.time() * 1000),
            "cwd": str(self.workspace),
        }

    def _tool_payload(self, call: Entry) -> dict[str, Any]:
        # ``toolArgs`` is the arguments' JSON text, as the Copilot CLI documents it.
        return {"toolName": call.tool or "", "toolArgs": call.content or "{}", CALL: call.call_id}

    def _settled_payload(self, event: str, entry: Entry | None) -> dict[str, Any] | None:
        if entry is None:
            return None
        if event == "userPromptSubmitted":
            return {"prompt": entry.content} if entry.role == "user" else None
        if entry.role != "tool_result":
            return None
        transcript = self.run.transcript
        # The call sits just before its result: walk back from there (no copy of the list).
        start = min(entry.id, len(transcript)) - 1
        call = next(
            (
                transcript[i]
                for i in range(start, -1, -1)
                if transcript[i].role == "tool_call" and transcript[i].call_id == entry.call_id
            ),
            None,
        )
        kind = (
            "denied"
            if entry.content.startswith(DENIED)
            else ("failure" if entry.is_error else "success")
        )
        return {
            "toolName": entry.tool or "",
            "toolArgs": call.content if call is not None else "{}",
            "toolResult": {"resultType": kind, "textResultForLlm": entry.content},
            CALL: entry.call_id,
        }

    def _tidy(self) -> None:
        """Drop records that no longer matter (another attempt's session and error events,
        decisions of calls whose result is recorded) and records this machine did not seal:
        a progress file never says that a hook ran (docs/spec.md 10.8)."""
        from .conversation import unanswered_calls

        waiting = {f"call:{c.call_id}" for c in unanswered_calls(self.run.transcript)}
        kept = [
            e
            for e in self.run.hooks.open
            if e.event in _SETTLED or (e.event == "preToolUse" and e.key in waiting)
        ]
        forged = [e for e in kept if not self._verifies(e)]
        if forged:
            line = (
                f"{len(forged)} hook record(s) in the file were not written by flow on this "
                "machine and were dropped: " + ", ".join(f"{e.event} {e.key}" for e in forged)
            )
            self.notice(line)
            self.note(line)
        self.run.hooks.open = [e for e in kept if e not in forged]

    def _record_text(self, record: HookEvent) -> str:
        ran = [
            [r.hook, r.exit, r.ms, r.timed_out, r.decision, r.reason, r.output]
            # What a hook changed is sealed too; a record without it seals as it always did.
            + ([r.args, r.context] if r.args is not None or r.context is not None else [])
            for r in record.ran
        ]
        return json.dumps([record.event, record.key, ran], ensure_ascii=False)

    def _sealed(self, record: HookEvent) -> HookEvent:
        """``record`` with this machine's seal of it as it is now."""
        if self.key is not None:
            record.seal = self.key.hook_seal(self.run.run_id, self._record_text(record))
        return record

    def _verifies(self, record: HookEvent) -> bool:
        if self.key is None:
            return True
        expected = self.key.hook_seal(self.run.run_id, self._record_text(record))
        return Key.verifies(record.seal, expected)


_SETTLED = ("userPromptSubmitted", "postToolUse")
#: The call id of a tool event, which VS Code's input carries (``tool_use_id``) and
#: Copilot's does not.
CALL = "_callId"


def hook_input(hook: HookCommand, event: Mapping[str, Any]) -> dict[str, Any]:
    """What ``hook`` reads on its standard input for ``event`` (flow's payload, in Copilot's
    names): as the Copilot CLI sends it, or as VS Code does for a hook of its format."""
    if hook.dialect != "vscode":
        copilot = {k: v for k, v in event.items() if k != CALL}
        if "toolArgs" in copilot:
            # The same text again under the name the guard hooks of the public Copilot
            # collection read (``toolInput``), so they see the call they are to judge.
            copilot["toolInput"] = copilot["toolArgs"]
        return copilot
    written = hook.label.partition("[")[0]
    out: dict[str, Any] = {
        "timestamp": time.strftime(
            "%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(event["timestamp"] / 1000)
        ),
        "cwd": event["cwd"],
        "sessionId": event["sessionId"],
        "hookEventName": written,
    }
    if "toolName" in event:
        try:
            arguments = json.loads(event["toolArgs"])
        except ValueError:
            arguments = event["toolArgs"]
        out.update(tool_name=event["toolName"], tool_input=arguments, tool_use_id=event.get(CALL))
    if "toolResult" in event:
        out["tool_response"] = event["toolResult"]["textResultForLlm"]
    for key in ("prompt", "source"):
        if key in event:
            out[key] = event[key]
    if hook.event == "sessionEnd":
        out.update(stop_hook_active=False, reason=event.get("reason"))
    return out


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _status(ran: HookRun) -> str:
    """How a hook run ended, in one word (the ``hook`` event's ``status``, docs/spec.md 4.16)."""
    if ran.exit is None:
        return "not_started"
    if ran.timed_out:
        return "timed_out"
    if ran.exit != 0:
        return "failed"
    return "denied" if ran.decision == "deny" else "ok"


def _prompt_key(entry_id: int, text: str) -> str:
    """``entry:N#<8 hex>``: a prompt's event is its entry with this text."""
    return f"entry:{entry_id}#{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"


_TOOL_EVENTS = ("preToolUse", "postToolUse")
