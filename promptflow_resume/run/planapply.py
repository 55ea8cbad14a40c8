"""What ``flow resume`` does with a resume plan: make the run match it.

``reconcile.plan_resume`` decides, without changing anything, where a stopped run continues;
this module carries the decision out. ``apply_plan`` archives the entries of the steps that
run again, adopts the workflow as it is now, settles the calls in flight (a result written by
hand, an edit found applied, a call run again, one a recovery decision went past, calls a person
trusted or denied) and stops the run for review where a person must decide; ``check_servers``
refuses to run an MCP call again on a server other than the one that started it; and
``resume_note`` is the one message that tells the model the run was resumed::

    plan = plan_resume(run, workflow, report, choice=Choices(rerun_unsafe=False))
    notes = apply_plan(run, workflow, plan, archive=store.write_sidecar)
    engine.resume_note = resume_note(run, plan, workflow)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING

from ..base.clock import now_iso
from ..base.errors import NeedsReviewError, ToolServerError, WorkflowChangedError
from ..base.wording import count
from ..progress.model import EditNote, Entry, InFlight, Run, StepState
from ..progress.seal import Key, seal_calls, settle_call
from ..workflow.records import Workflow
from ..workflow.toolnames import SUBAGENT_TOOL
from .conversation import skipped_output, unanswered_calls
from .reconcile import CONTINUED_RESULT, DENIED_RESULT, PLACEHOLDER_RESULT
from .resumeplan import ChangeDecision, ResumePlan, Stop

if TYPE_CHECKING:
    from ..tools.tool import Tool


def check_servers(plan: ResumePlan, tools: dict[str, Tool]) -> None:
    """An MCP call that runs again must find the server that started it: the same name,
    started the same way (``InFlight.server``); else resume stops naming the configuration
    the run used. Called once the servers of the resume are started."""
    for flight in plan.retry_tools:
        recorded = flight.server
        if recorded is None:
            continue
        now: dict[str, str] | None = getattr(tools.get(flight.tool), "server_ref", None)
        if (
            now is not None
            and now.get("name") == recorded.get("name")
            and (now.get("id") == recorded.get("id"))
        ):
            continue
        found = (
            f"the configuration in use ({now['config']}) starts {now['name']} differently "
            f"({now['id']})"
            if now is not None
            else "no server in the configuration in use provides the tool"
        )
        raise ToolServerError(
            f"tool call {flight.call_id} ({flight.tool}) was in flight on the MCP server "
            f"{recorded.get('name')!r} from {recorded.get('config')} ({recorded.get('id')}), "
            f"and {found}: running it again there could repeat its effect elsewhere or not at "
            "all. Nothing was run.",
            hint=f"Resume with --mcp-config {recorded.get('config')} (the configuration the run "
            "used), or settle the call by hand (write its result into the file).",
        )


def apply_plan(
    run: Run,
    workflow: Workflow,
    plan: ResumePlan,
    *,
    archive: Callable[[str, bytes], tuple[str, str]],
) -> list[str]:
    """Make ``run`` match ``plan``; returns notes for the attempt history.

    ``archive(name, data)`` stores archived entries in a sidecar and returns its relative path.
    Raises ``NeedsReviewError`` after adding placeholders for in-flight calls that need a
    person, and ``WorkflowChangedError`` when the plan still asks a question.
    """
    _refuse_open_question(workflow, plan)
    _refuse_unsealed(run, plan)
    notes = _change_notes(plan)
    notes += _archive_reset_steps(run, plan, archive)
    _adopt_workflow(run, workflow, plan)
    notes += _settle_answered_and_applied(run, plan)
    notes += _drop_retried_placeholders(run, plan)
    notes += _continue_past_unknown(run, plan)
    notes += _trust_or_deny_unsealed(run, plan)
    settled = {
        f.call_id
        for f in plan.answered_tools + plan.retry_tools + plan.applied_tools + plan.continued_tools
    }
    run.in_flight = [f for f in run.in_flight if f.call_id not in settled]
    for flight in plan.answered_tools + plan.applied_tools + plan.continued_tools:
        settle_call(run, flight.call_id)  # answered: its seal has nothing left to guard
    _reseal_waiting(run, plan)
    _stop_for_review(run, plan)
    return notes


def _refuse_open_question(workflow: Workflow, plan: ResumePlan) -> None:
    """A workflow change still waiting for an answer: nothing is changed."""
    if plan.decision is not ChangeDecision.ASK:
        return
    # ``blocked`` is a clause (status shows it too): end it before the hint's sentence.
    reason = (plan.blocked or f"the workflow {os.path.normpath(workflow.path)} changed").rstrip(".")
    raise WorkflowChangedError(reason + ".", hint="Nothing was changed in the progress file.")


def _refuse_unsealed(run: Run, plan: ResumePlan) -> None:
    """Calls flow did not record here wait for a person: the run stops, nothing else changes."""
    if plan.stop is not Stop.UNSEALED_CALLS:
        return
    run.status = "needs_review"
    run.reason = plan.blocked
    raise NeedsReviewError(
        (plan.blocked or "tool calls not recorded here wait for a person").rstrip(".") + "."
    )


def _change_notes(plan: ResumePlan) -> list[str]:
    """One note per workflow change the resume accepts."""
    notes: list[str] = []
    for change in plan.changes:
        if change.kind == "changed" and not change.started:
            notes.append(f"step {change.step_id} changed before it started; using the new text")
        elif change.kind == "added":
            notes.append(f"step {change.step_id} was added to the workflow")
        elif change.kind == "removed":
            notes.append(f"step {change.step_id} was removed from the workflow")
        elif plan.decision is ChangeDecision.KEEP_COMPLETED:
            notes.append(f"step {change.step_id} changed after it ran; kept its recorded result")
    return notes


def _archive_reset_steps(
    run: Run, plan: ResumePlan, archive: Callable[[str, bytes], tuple[str, str]]
) -> list[str]:
    """Move the entries of the steps that run again to a sidecar; set those steps back; drop
    a prompt that is written again."""
    notes: list[str] = []
    if plan.archive_from is not None:
        moved = [e for e in run.transcript if e.id >= plan.archive_from]
        payload = json.dumps([asdict(e) for e in moved], ensure_ascii=False, indent=1)
        rel, _digest = archive(
            f"archive-attempt-{len(run.attempts) + 1}.json", payload.encode("utf-8")
        )
        del run.transcript[plan.archive_from - 1 :]
        notes.append(
            f"entries {moved[0].id}-{moved[-1].id} archived to {rel}: {plan.reset_reason}"
            if moved
            else f"{plan.reset_reason}"
        )
        run.in_flight = [f for f in run.in_flight if f.entry < plan.archive_from]
        if run.snapshots is not None:
            # File snapshots of archived calls go with them (their entry ids are reused).
            cut = plan.archive_from
            run.snapshots.calls = [c for c in run.snapshots.calls if c.entry < cut]
    for sid in plan.reset:
        run.steps[sid] = StepState()
    for sid in plan.skip:
        run.steps[sid] = StepState(status="skipped", finished=now_iso())
        notes.append(f"step {sid} skipped; ${{step:{sid}}} reads {skipped_output(sid)!r}")
    if plan.reprompt is not None:
        # Only the step's own prompt (and notes) are dropped; they are derived, not recorded work.
        while run.transcript and run.transcript[-1].step == plan.reprompt:
            run.dropped_prompt.insert(0, run.transcript.pop())
    return notes


def _adopt_workflow(run: Run, workflow: Workflow, plan: ResumePlan) -> None:
    """The workflow as it is now defines the steps and their hashes from here on."""
    old_states = run.steps
    run.steps = {s.id: old_states.get(s.id, StepState()) for s in workflow.steps}
    run.workflow.hash = workflow.hash
    run.workflow.steps = {s.id: s.hash for s in workflow.steps}
    run.workflow.name = workflow.name
    run.workflow.description = workflow.description
    run.cursor.total = len(workflow.steps)
    if plan.resume_from is not None:
        run.cursor.step = plan.resume_from
        run.cursor.index = [s.id for s in workflow.steps].index(plan.resume_from) + 1


def _settle_answered_and_applied(run: Run, plan: ResumePlan) -> list[str]:
    """A hand-written result is used as is; an edit found applied gets its result."""
    notes: list[str] = []
    for flight in plan.answered_tools:
        result = _result_for(run, flight.call_id)
        if result is not None:
            result.is_error = False
        notes.append(
            EditNote(f"tool call {flight.call_id} ({flight.tool}): result written by hand, used")
        )
    for flight in plan.applied_tools:
        placeholder = _result_for(run, flight.call_id)
        if placeholder is not None and placeholder is run.transcript[-1]:
            run.transcript.pop()
        run.transcript.append(
            Entry(
                id=run.next_entry_id(),
                role="tool_result",
                content=plan.applied_results.get(flight.call_id, "the edit was already applied"),
                step=flight.step,
                call_id=flight.call_id,
                tool=flight.tool,
            )
        )
        notes.append(
            f"tool call {flight.call_id} ({flight.tool}) was in flight and had already taken "
            "effect; recorded as done"
        )
    return notes


def _drop_retried_placeholders(run: Run, plan: ResumePlan) -> list[str]:
    """A call that runs again loses its placeholder result (when it is the last entry)."""
    notes: list[str] = []
    for flight in plan.retry_tools:
        placeholder = _result_for(run, flight.call_id)
        if placeholder is not None and placeholder is run.transcript[-1]:
            run.transcript.pop()
        if flight.tool == SUBAGENT_TOOL:
            notes.append(
                f"subagent call {flight.call_id} ({flight.tool}) was in flight; resuming its run"
            )
        else:
            notes.append(
                f"tool call {flight.call_id} ({flight.tool}) was in flight; running it again"
            )
    return notes


def _continue_past_unknown(run: Run, plan: ResumePlan) -> list[str]:
    """Calls a recovery decision went past: their result says it is unknown."""
    notes: list[str] = []
    for flight in plan.continued_tools:
        placeholder = _result_for(run, flight.call_id)
        if placeholder is not None:
            placeholder.content = CONTINUED_RESULT
            placeholder.is_error = True
        else:
            _append_error_result(run, flight, CONTINUED_RESULT)
        notes.append(
            f"tool call {flight.call_id} ({flight.tool}) was in flight; went on without running "
            "it again (recovery decision)"
        )
    return notes


def _trust_or_deny_unsealed(run: Run, plan: ResumePlan) -> list[str]:
    """``--trust-calls``: the calls are sealed here, as the person's own; ``--deny-calls``:
    each gets a refusal as its result. Either way the attempt's notes name them."""
    calls = plan.unsealed_tools
    if not calls or plan.unsealed_choice is None:
        return []
    names = ", ".join(f"{c.tool} ({c.call_id})" for c in calls)
    if plan.unsealed_choice == "trust":
        return [f"tool calls not recorded here run as written (--trust-calls): {names}"]
    for call in calls:
        flight = InFlight(call.call_id, call.tool, call.step or "", call.entry, now_iso(), False)
        run.in_flight = [f for f in run.in_flight if f.call_id != call.call_id]
        _append_error_result(run, flight, DENIED_RESULT)
    return [f"tool calls not recorded here were not run (--deny-calls): {names}"]


def _reseal_waiting(run: Run, plan: ResumePlan) -> None:
    """Calls that run again wait without a start record now, and calls a person let run as
    written are theirs: both are sealed as waiting, so the engine runs them (and only them)."""
    unsealed = {c.call_id for c in plan.unsealed_tools}
    trusted = plan.unsealed_choice == "trust"
    ids = {f.call_id for f in plan.retry_tools if trusted or f.call_id not in unsealed}
    if trusted:
        ids |= unsealed
    calls = [e for e in unanswered_calls(run.transcript) if e.call_id in ids]
    if calls:
        seal_calls(run, Key.ensure(), calls)


def _stop_for_review(run: Run, plan: ResumePlan) -> None:
    """Calls a person must review get a marked placeholder result and stop the run."""
    if not plan.review_tools:
        return
    for flight in plan.review_tools:
        if _result_for(run, flight.call_id) is None:
            _append_error_result(run, flight, PLACEHOLDER_RESULT)
    run.status = "needs_review"
    run.reason = plan.blocked
    raise NeedsReviewError(plan.blocked or "a tool call needs review")


def _append_error_result(run: Run, flight: InFlight, content: str) -> None:
    """Give an in-flight call the result ``content``, marked as an error, so the model is never
    left with an unanswered call."""
    run.transcript.append(
        Entry(
            id=run.next_entry_id(),
            role="tool_result",
            content=content,
            step=flight.step,
            call_id=flight.call_id,
            tool=flight.tool,
            is_error=True,
        )
    )


def _result_for(run: Run, call_id: str) -> Entry | None:
    return next(
        (e for e in reversed(run.transcript) if e.role == "tool_result" and e.call_id == call_id),
        None,
    )


def resume_note(run: Run, plan: ResumePlan, workflow: Workflow) -> str:
    """The one short message that tells the model the run was resumed, why, and what is done.

    Made once the plan is applied and before the engine continues: the results in the
    transcript then are the ones reused as recorded, and the calls in ``plan.retry_tools``
    have none yet; they run again before the note is sent, so their new results come first.
    """
    stopped = run.status + (f" ({run.reason})" if run.reason else "")
    if run.status == "running":  # resume holds the lock: the process that ran it is gone
        stopped = "interrupted (the process running it ended without a checkpoint)"
    done = [s.title for s in workflow.steps if s.id in plan.reuse]
    rerun = {f.call_id for f in plan.retry_tools}
    reused = sum(1 for e in run.transcript if e.role == "tool_result" and e.call_id not in rerun)
    step = workflow.step(plan.resume_from) if plan.resume_from else None
    kept = (
        f"{count(reused, 'tool result')} recorded before it stopped "
        f"{'is' if reused == 1 else 'are'} reused as recorded, not run again"
        if reused
        else "no tool result was recorded before it stopped"
    )
    parts = [
        f"Note from flow: this run was resumed after it stopped: {stopped}.",
        f"Already done: {', '.join(done) if done else 'no step completed yet'}; {kept}.",
    ]
    if plan.retry_tools:
        calls = ", ".join(f"{f.tool} ({f.call_id})" for f in plan.retry_tools)
        one = len(plan.retry_tools) == 1
        parts.append(
            f"{'This call was' if one else 'These calls were'} interrupted before "
            f"{'its' if one else 'their'} result was recorded and ran again (idempotent): "
            f"{calls}; {'its result' if one else 'their results'} above {'is' if one else 'are'}"
            " from this run."
        )
    if step is not None:
        parts.append(f"Continue with {step.title} from where the conversation left off.")
    return " ".join(parts)
