"""Tool calls: the tools a step offers, and each call of a reply run in order — checked
(offered, sealed, not in flight, decided), its ``preToolUse`` hooks, its start durable before
the tool runs, the tool, its result recorded (a large one kept whole in a sidecar file) and
the file snapshot it is due.

    toolcalls = ToolCalls(workflow, run, store, tools, options, key, hooks, points,
                          budgets, holds, snapshots, children)
    toolcalls.settle(step)       # runs every unanswered call of the last reply
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..base import faults
from ..base.clock import ms_since, now_iso
from ..base.errors import NeedsReviewError, ToolServerError
from ..base.traceids import span_id, traceparent, tracing_on
from ..chat import ToolSpec
from ..progress import ProgressStore
from ..progress.entry import EntryMeta
from ..progress.model import Entry, InFlight, Run
from ..progress.seal import Key, seal_calls, settle_call, unsealed_calls
from ..progress.sidecar import sidecar_extension
from ..tools import offered_tool_names
from ..tools.consent import Consent
from ..tools.declared import CommandTool
from ..tools.subagent import OfferedAgent, SubagentTool
from ..tools.tool import Tool, ToolContext, ToolResult
from ..workflow import step_command_args
from ..workflow.records import Step, Workflow
from ..workflow.skillset import LOAD_TOOL
from ..workflow.toolnames import SUBAGENT_TOOL
from .budgets import Budgets
from .checkpoints import Checkpoints, FileSnapshots
from .childruns import ChildRuns
from .conversation import unanswered_calls
from .engineoptions import EngineOptions
from .heldcalls import HeldCalls
from .hooks import RunHooks
from .stepoutputs import step_outputs

#: How the model is told that a tool is not available (a hand-edited or hostile transcript).
_UNKNOWN_TOOL = (
    "error: the tool {name!r} is not available in this workflow; tools you may call here: {names}."
)


def tool_kind(tool: Tool | None) -> tuple[str | None, str | None]:
    """What kind of tool answered a call, and its MCP server (a result's ``kind``/``server``)."""
    if tool is None:
        return None, None
    if isinstance(tool, SubagentTool):
        return "agent", None
    ref = getattr(tool, "server_ref", None)
    if isinstance(ref, dict):
        return "mcp", str(ref.get("name") or "") or None
    if isinstance(tool, CommandTool):
        return "command", None
    return "builtin", None


class ToolCalls:
    """Runs the tool calls of one attempt of a run, each durable before and after it runs."""

    def __init__(
        self,
        workflow: Workflow,
        run: Run,
        store: ProgressStore,
        tools: Mapping[str, Tool],
        options: EngineOptions,
        key: Key,
        hooks: RunHooks,
        points: Checkpoints,
        budgets: Budgets,
        holds: HeldCalls,
        snapshots: FileSnapshots,
        children: ChildRuns,
    ) -> None:
        self.workflow = workflow
        self.run = run
        self.store = store
        self.tools = tools
        self.options = options
        self.reporter = options.reporter
        self._key = key
        self._hooks = hooks
        self._points = points
        self._budgets = budgets
        self._holds = holds
        self._snapshots = snapshots
        self._children = children
        #: Set when a tool call's tool really ran (its result may have changed files).
        self._tool_ran = False

    def specs(self, step: Step) -> tuple[ToolSpec, ...]:
        """The specifications of the tools the model may call in ``step``."""
        return tuple(self.tools[name].spec for name in self.offered(step) if name in self.tools)

    def offered(self, step: Step) -> tuple[str, ...]:
        """Tools the model may call in ``step``: its own list, else the workflow's ``tools``
        and the MCP tools they name."""
        names = offered_tool_names(self.workflow, step)
        if step.tools is None and self.options.extra_tools:
            names += tuple(n for n in self.options.extra_tools if n not in names)
        names += tuple(n for n in self.options.part_tools.get(step.id, ()) if n not in names)
        if LOAD_TOOL not in names and any(s.model_invocable for s in self.options.skills):
            # Every step may load a skill, whatever its own tool list says (spec 1.11).
            names += (LOAD_TOOL,)
        agent = self.workflow.agent
        if SUBAGENT_TOOL in self.tools and SUBAGENT_TOOL not in names and agent and agent.agents:
            names += (SUBAGENT_TOOL,)  # an agent's `agents:` list asks for the tool by itself
        return names

    def settle(self, step: Step) -> None:
        """Run every unanswered tool call of the last reply, recording start and result.

        When the approval policy holds any of them, none of the reply's calls runs until
        every held one is decided: the results stay in the order the model asked for them."""
        calls = unanswered_calls(self.run.transcript)
        if step.kind != "command":
            self._holds.hold(step, calls)
        for call in calls:
            self._run_tool(step, call)

    def _run_tool(self, step: Step, call: Entry) -> None:
        """Run one recorded call (or answer it with an error) and record its result."""
        run = self.run
        name = call.tool or ""
        # A command step runs its workflow's command only (raises when the file says otherwise).
        command_args = self._command_step_arguments(step, call) if step.kind == "command" else None
        allowed = step.kind == "command" or name in self.offered(step)
        tool = self.tools.get(name) if allowed else None
        self._children.keep_subagent_child(step, call, tool)
        if tool is None:
            self.reporter.notice(
                f"entry {call.id} calls the tool {name!r}, which step {step.id} does not offer; "
                "it was not run, and the model is told so."
            )
        if any(f.call_id == call.call_id for f in run.in_flight):
            # Reconcile decides about calls that were in flight when the run stopped; reaching
            # one here means it was neither cleared nor answered.
            raise NeedsReviewError(
                f"tool call {call.call_id} ({name}) was started before the run stopped and its "
                "result was not recorded.",
                hint="Resume with --rerun-unsafe to run it again, "
                "or write its result into the file.",
            )
        if tool is not None and step.kind != "command" and unsealed_calls(run, self._key, [call]):
            # Reconcile holds such calls before a resume starts; this is the last guard.
            raise NeedsReviewError(
                f"tool call {call.call_id} ({name}) in entry {call.id} was not recorded by flow "
                "on this machine as it reads now, so it was not run.",
                hint="Check it, then resume with --trust-calls or --deny-calls.",
            )
        denied = self._holds.decided(call) if step.kind != "command" else None
        began = time.monotonic()
        if tool is None:
            names = ", ".join(sorted(self.offered(step))) or "none"
            result = ToolResult(_UNKNOWN_TOOL.format(name=name, names=names), is_error=True)
        elif denied is not None:
            result = denied
        else:
            self._budgets.check_deadline()
            try:
                if command_args is not None:
                    arguments = command_args
                else:
                    arguments = json.loads(call.content or "{}")
                if not isinstance(arguments, dict):
                    raise ValueError("arguments must be a JSON object")
            except (ValueError, RecursionError) as error:
                result = ToolResult(f"error: invalid tool arguments: {error}", is_error=True)
            else:
                result = self._tool_effect(step, call, tool, arguments)
        entry = self._result_entry(step, call, result)
        kind, server = tool_kind(tool)
        entry.meta = EntryMeta(ms=ms_since(began), kind=kind, server=server)
        settle_call(run, call.call_id)
        self._hooks.tool_done(call, run.next_entry_id())
        self._holds.forget(call)
        snapshot = self._tool_ran and not getattr(tool, "read_only", False)
        self._tool_ran = False
        if snapshot:
            self._snapshots.due(call)
        self._points.append([entry])
        faults.point("engine.tool_result_recorded")
        if snapshot:
            self._snapshots.take()
        first_line = entry.content.strip().splitlines()[0] if entry.content.strip() else ""
        # Whole (within reason): the display fits it to its width at a word boundary.
        self.reporter.tool_finished(name, entry.is_error, first_line[:1000], call.call_id or "")
        self._hooks.settle()

    def _tool_effect(
        self, step: Step, call: Entry, tool: Tool, arguments: dict[str, Any]
    ) -> ToolResult:
        """Run one tool call: its ``preToolUse`` hooks (a denial is the call's result and
        nothing runs), its start durable, the tool, then its in-flight record cleared; a
        subagent call runs its agent as a child run (``_run_subagent``)."""
        run = self.run
        name = call.tool or ""
        agent: OfferedAgent | None = None
        if isinstance(tool, SubagentTool):
            checked = tool.check(arguments)
            if isinstance(checked, ToolResult):
                return checked  # an agent not offered here is never run
            agent = checked
        hooked = self._hooks.pre_tool(call)
        if hooked.denied is not None:
            return ToolResult(hooked.denied, is_error=True)
        if hooked.arguments is not None:
            # A hook's `updatedInput`/`modifiedArgs`: the call runs with them, and its result
            # says so (the model's call stays as it sent it).
            arguments = hooked.arguments
            if isinstance(tool, SubagentTool):
                checked = tool.check(arguments)
                if isinstance(checked, ToolResult):
                    return checked
                agent = checked
        faults.point("engine.hooks_allowed")
        if agent is not None:
            self._children.link_subagent(step, call, agent)
        run.in_flight.append(
            InFlight(
                call_id=call.call_id or "",
                tool=name,
                step=step.id,
                entry=call.id,
                started=now_iso(),
                idempotent=tool.idempotent,
                expect=self._expectation(tool, arguments),
                server=getattr(tool, "server_ref", None),
            )
        )
        if step.kind != "command":
            # The start record is sealed with the call: resume decides by it.
            seal_calls(run, self._key, [call])
        faults.point("engine.before_tool_start_record")
        self._points.save()  # the intent is durable before the tool runs
        faults.point("engine.tool_start_recorded")
        self.reporter.tool_started(name, call.content, call.call_id or "")
        if agent is None:
            result = self._invoke(tool, arguments, self._holds.consent_for(call), call)
        else:
            result = self._children.run_subagent(step, call, agent, str(arguments["task"]))
        faults.point("engine.tool_ran")
        self._tool_ran = True
        run.in_flight = [f for f in run.in_flight if f.call_id != call.call_id]
        if step.kind != "command":
            # Without its start record until the result is saved, as before it started.
            seal_calls(run, self._key, [call])
        if hooked.notes:
            result = replace(result, content=hooked.result_text(result.content))
        return result

    def _command_step_arguments(self, step: Step, call: Entry) -> dict[str, Any]:
        """What a command step's recorded call runs with: always the workflow's ``run:`` line.

        The call was recorded from that line; one that names another command or other
        arguments was changed in the file, and a progress file must not decide what runs.
        """
        values = step_command_args(
            self.workflow,
            step,
            inputs=self.run.inputs,
            step_outputs=step_outputs(self.workflow, self.run),
            editor=self.options.editor,
        )
        expected = json.dumps(values, sort_keys=True, ensure_ascii=False)
        recorded = call.content
        if call.tool != step.command or recorded not in (
            expected,
            self.options.redactor.redact(expected)[0],
        ):
            raise NeedsReviewError(
                f"command step {step.id!r} runs `{step.command}` with the arguments of its "
                f"`run:` line ({expected}), but its recorded call (entry {call.id}) is "
                f"`{call.tool}` with {recorded[:200]}: the progress file does not match the "
                "workflow, so nothing was run.",
                hint=(
                    "Restore that entry from version control, or set the step back to pending "
                    f"(steps.{step.id}.status: pending) to run the workflow's command afresh."
                ),
            )
        return values

    def _context(self, consent: Consent | None = None, call: Entry | None = None) -> ToolContext:
        step = self.workflow.step(call.step) if call is not None and call.step else None
        return ToolContext(
            workspace=self.options.workspace,
            env=dict(os.environ),
            consent=consent or self.options.consent,
            skills=self.options.skills,
            traceparent=self._traceparent(call) if call is not None else None,
            offered=self.offered(step) if step is not None else None,
        )

    def _traceparent(self, call: Entry) -> str | None:
        """With tracing on, the context of ``call``'s ``execute_tool`` span (its id derived
        as ``otel.spans`` derives it, so the span the run sends is the one named)."""
        if not tracing_on():
            return None
        run = self.run
        trace = run.trace_id()
        return traceparent(trace, span_id(trace, f"call/{call.call_id or call.id}"))

    def _expectation(self, tool: Tool, arguments: dict[str, Any]) -> dict[str, str] | None:
        """An edit's file hashes before and after, recorded with its start (see tools.edit)."""
        expectation = getattr(tool, "expectation", None)
        if expectation is None:
            return None
        try:
            found: dict[str, str] | None = expectation(arguments, self._context())
        except Exception:  # the tool reports its own problem when it runs
            return None
        return found

    def _invoke(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        consent: Consent | None = None,
        call: Entry | None = None,
    ) -> ToolResult:
        ctx = self._context(consent, call)
        try:
            return tool.run(arguments, ctx)
        except ToolServerError:
            # An MCP server failed mid-call: the call's effect is unknown, so it stays in
            # flight and the run stops; resume decides (re-run if idempotent, else review).
            raise
        except Exception as error:  # a tool's bug is the model's error result, not a crash
            return ToolResult(
                f"error: the tool failed: {type(error).__name__}: {error}", is_error=True
            )

    def _result_entry(self, step: Step, call: Entry, result: ToolResult) -> Entry:
        sidecar: tuple[str, str, int] | None = None
        content = result.content
        if result.data is not None:
            raw, count = self.options.redactor.redact_bytes(result.data)
            if count:
                self._points.count_redactions(count, f"sidecar in step {step.id}")
            hint = f"{call.call_id}-{call.tool}{sidecar_extension(result.media_type)}"
            rel, digest = self.store.write_sidecar(hint, raw)
            sidecar = (rel, digest, len(raw))
            if result.cut:
                content = content.rstrip("\n") + "\n" + self._whole_result_note(rel, len(raw))
        entry = self._points.entry(
            "tool_result",
            content,
            step.id,
            call_id=call.call_id,
            tool=call.tool,
            is_error=result.is_error,
        )
        if sidecar is not None:
            entry.sidecar, entry.sidecar_sha256, entry.sidecar_bytes = sidecar
        return entry

    def _whole_result_note(self, rel: str, size: int) -> str:
        """The line that tells the model where a cut result is kept whole, and how to read it."""
        where = (self.store.path.parent / rel).resolve()
        try:
            shown = where.relative_to(self.options.workspace.resolve()).as_posix()
        except ValueError:
            return (
                f"[the whole result ({size:,} bytes) is kept in {where}, outside the workspace; "
                "to see more, call the tool again for a smaller part (a range, a page, a "
                "filter) if it takes one]"
            )
        return (
            f"[the whole result ({size:,} bytes) is kept in {shown}: read_file reads it from "
            "any line (offset, limit); or call the tool again for a smaller part if it takes "
            "a range]"
        )
