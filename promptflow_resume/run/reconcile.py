"""What to do when a stopped run is resumed.

``plan_resume`` compares a loaded run with the workflow as it is now and decides, without
changing anything, where the run continues, what is reused, what is re-run and why, in a
``ResumePlan`` (its records: ``resumeplan``); ``planapply.apply_plan`` then makes the run match
that decision. ``flow status`` and ``flow resume --plan`` show the plan; ``flow resume``
applies it::

    plan = plan_resume(run, workflow, report, choice=Choices(rerun_unsafe=False))
    notes = apply_plan(run, workflow, plan, archive=store.write_sidecar)

The rules (docs/spec.md, "Running and resuming"):
- Completed steps and completed tool calls are never re-run; their recorded results are reused.
- The resume point is the first step that is not completed, or the cursor when a person moved
  it back. A completed step set back to ``pending`` by hand, a rewound cursor, and
  ``--rerun-changed`` re-run that step and every later one; their old transcript entries are
  archived to a sidecar file, not lost.
- A workflow change to steps not yet started is taken as is. A change to a started step needs a
  decision: ``--rerun-changed``, ``--keep-completed``, or an answer on a terminal.
- A tool call that was started but has no result is re-run when the workflow declares the tool
  idempotent; otherwise the run stops ``needs_review`` with a marked placeholder result that a
  person can overwrite, or ``--rerun-unsafe`` runs it again.
- An edit in flight is judged by its file (``tools.edit``): at the edit's end state it is
  recorded as done, at its start state it runs once, in any other state a person decides.
- ``--retry-step STEP`` runs a started step again from its start and ``--skip-step STEP``
  marks a step not completed ``skipped``; both archive the step's entries and every later one
  (a recovery decision, ``recovery``, chooses the same way).
- A tool call without a result runs only when flow on this machine recorded it from a model
  reply and it reads as recorded (its seal, ``progress.seal``); any other (added or changed
  by hand, or in a file written elsewhere) stops the run until a person chooses:
  ``--trust-calls`` runs them as written, ``--deny-calls`` gives each a refusal as its result.
  A recovery decision never chooses for them.
- A plan that cannot go on says why in ``blocked`` (words for people) and ``stop`` (a ``Stop``
  value to decide by).
"""

from __future__ import annotations

import json
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import InputError
from ..progress.model import InFlight, LoadReport, Run, StepState
from ..progress.seal import Key, unsealed_calls
from ..workflow.records import Workflow
from ..workflow.toolnames import SUBAGENT_TOOL
from .conversation import unanswered_calls
from .resumeplan import ChangeDecision, Choices, ResumePlan, StepChange, Stop, UnsealedCall

if TYPE_CHECKING:
    # Importing tools.base imports every tool module; ``flow status`` plans without them.
    from ..tools.tool import Tool

#: The result of a call in flight that a recovery decision went past without running it again.
CONTINUED_RESULT = (
    "RESULT NOT RECORDED: flow started this tool call but the run stopped before its result "
    "was recorded, so it may or may not have taken effect. The run went on without running it "
    "again (a recovery decision; see the decision entry)."
)

#: What a non-idempotent tool call that was in flight is answered with until a person decides.
PLACEHOLDER_RESULT = (
    "RESULT NOT RECORDED: flow started this tool call but the run stopped before its result "
    "was recorded, so it may or may not have taken effect. Check its side effects, then replace "
    "this text with the real result and run `flow resume` again (or resume with --rerun-unsafe "
    "to run the call again)."
)

#: The result a pending call gets when the person resuming denies it (``--deny-calls``).
DENIED_RESULT = (
    "error: not run. This tool call was not recorded by flow on this machine as it reads now, "
    "and the person who resumed the run chose not to run it (--deny-calls)."
)


def _started(run: Run, step_id: str) -> bool:
    """True once a step did more than send its prompt (a model reply, a tool call, an answer)."""
    state = run.steps.get(step_id)
    if state is not None and state.status == "completed":
        return True
    return any(
        e.step == step_id and e.role not in ("user", "note", "decision") for e in run.transcript
    )


def workflow_changes(run: Run, workflow: Workflow) -> list[StepChange]:
    """Steps whose hash differs from the one recorded, in the order a reader expects them."""
    old = run.workflow.steps
    new = {s.id: s.hash for s in workflow.steps}
    changes = [
        StepChange(sid, "changed", _started(run, sid))
        for sid in new
        if sid in old and old[sid] != new[sid]
    ]
    changes += [StepChange(sid, "added", False) for sid in new if sid not in old]
    changes += [StepChange(sid, "removed", _started(run, sid)) for sid in old if sid not in new]
    return changes


def _first_entry_of(run: Run, step_ids: set[str]) -> int | None:
    return next((e.id for e in run.transcript if e.step in step_ids), None)


def plan_resume(
    run: Run,
    workflow: Workflow,
    report: LoadReport,
    tools: dict[str, Tool],
    choice: Choices = Choices(),
    *,
    workspace: Path | None = None,
) -> ResumePlan:
    """Decide how ``run`` continues under ``workflow`` as it is now; changes nothing.

    ``workspace`` is where edits in flight are checked against their files (without it they
    are treated like any other call that is not idempotent). Each decision is one step below,
    taken in this order: where the run continues, what a workflow change asks, what runs
    again, how calls in flight are settled, and whether anything is left to do."""
    order = [s.id for s in workflow.steps]
    changes = workflow_changes(run, workflow)
    plan = ResumePlan(
        resume_from=None,
        changes=changes,
        workflow_changed=run.workflow.hash != workflow.hash,
        edited_entries=list(report.edited_entries),
    )
    point = _resume_point(run, order)
    _reset_steps_changed_before_reply(run, changes, point)
    _decide_workflow_change(run, workflow, order, changes, choice, plan, point)
    _retry_or_skip_step(run, order, choice, point)
    _choose_rerun(run, workflow, report, order, plan, point)
    _settle_in_flight(run, report, tools, choice, workspace, plan)
    _hold_unsealed_calls(run, workflow, choice, plan, Key.find())
    _block_when_completed(run, plan)
    kept = run.transcript if plan.archive_from is None else run.transcript[: plan.archive_from - 1]
    plan.estimated_input_tokens = sum(map(len, map(_content, kept))) // 4
    return plan


_content = operator.attrgetter("content")


@dataclass
class _ResumePoint:
    """Where the run continues (an index into the steps) and the steps reset on the way."""

    index: int
    reset: set[str]
    reason: str | None
    skip: set[str] = field(default_factory=set)


def _status_of(run: Run, step_id: str) -> str:
    return run.steps.get(step_id, StepState()).status


def _resume_point(run: Run, order: list[str]) -> _ResumePoint:
    """The first step not completed, or an earlier cursor; the completed steps from there on
    run again, and so does a pending step that already has entries (set back by hand)."""
    first_open = next(
        (i for i, sid in enumerate(order) if _status_of(run, sid) not in ("completed", "skipped")),
        len(order),
    )
    index = first_open
    reason: str | None = None
    if run.cursor.step in order and order.index(run.cursor.step) < first_open:
        index = order.index(run.cursor.step)
        reason = f"the cursor was moved back to step {run.cursor.step!r}"
    reset = {sid for sid in order[index:] if _status_of(run, sid) == "completed"}
    if index < len(order):
        sid = order[index]
        if _status_of(run, sid) == "pending" and any(e.step == sid for e in run.transcript):
            reset.add(sid)
            reason = reason or f"step {sid!r} was set back to pending"
    if reset and reason is None:
        reason = "later steps were completed before an earlier one was set back to pending"
    return _ResumePoint(index, reset, reason)


def _reset_steps_changed_before_reply(
    run: Run, changes: list[StepChange], point: _ResumePoint
) -> None:
    """A changed step that only sent its prompt so far sends the new prompt instead."""
    for change in changes:
        prompted = any(e.step == change.step_id for e in run.transcript)
        if change.kind == "changed" and not change.started and prompted:
            point.reset.add(change.step_id)
            point.reason = point.reason or f"step {change.step_id!r} changed before its first reply"


def _decide_workflow_change(
    run: Run,
    workflow: Workflow,
    order: list[str],
    changes: list[StepChange],
    choice: Choices,
    plan: ResumePlan,
    point: _ResumePoint,
) -> None:
    """A change to steps that already ran: re-run from the first, keep results, or ask."""
    hard = [c for c in changes if c.started and c.kind != "added"]
    if not hard:
        return
    names = ", ".join(c.step_id for c in hard)
    if choice.rerun_changed:
        plan.decision = ChangeDecision.RERUN_CHANGED
        first = min(
            (order.index(c.step_id) for c in hard if c.step_id in order), default=point.index
        )
        for sid in order[first:]:
            if _started(run, sid):
                point.reset.add(sid)
        point.index = min(point.index, first)
        point.reason = f"the workflow changed in started steps ({names}); --rerun-changed"
    elif choice.keep_completed:
        plan.decision = ChangeDecision.KEEP_COMPLETED
    else:
        plan.decision = ChangeDecision.ASK
        plan.block(
            Stop.WORKFLOW_CHANGED,
            f"the workflow {os.path.normpath(workflow.path)} changed in steps that already "
            f"ran: {names}. Choose "
            "--rerun-changed (re-run from the first changed step) or --keep-completed "
            "(keep recorded results, use the new text for what is left)",
        )


def _retry_or_skip_step(run: Run, order: list[str], choice: Choices, point: _ResumePoint) -> None:
    """``--retry-step`` / ``--skip-step`` (or a recovery decision): the step runs again from
    its start, or is skipped; its entries and every later one are archived."""
    for option, step_id in (("--retry-step", choice.retry_step), ("--skip-step", choice.skip_step)):
        if step_id is not None and step_id not in order:
            raise InputError(
                f"{option} {step_id}: the workflow has no step {step_id!r}; its steps are "
                f"{', '.join(order)}."
            )
    if choice.retry_step is not None:
        index = order.index(choice.retry_step)
        if index > point.index:
            raise InputError(
                f"--retry-step {choice.retry_step}: the step has not run yet; the run resumes "
                f"at step {order[point.index]!r}."
            )
        point.reset.add(choice.retry_step)
        point.reset.update(sid for sid in order[index:] if _started(run, sid))
        point.index = index
        point.reason = f"step {choice.retry_step!r} runs again from its start (retry)"
    if choice.skip_step is not None:
        sid = choice.skip_step
        if _status_of(run, sid) == "completed" and sid not in point.reset:
            raise InputError(
                f"--skip-step {sid}: the step is completed; use --retry-step {sid} or "
                "`flow rewind` to run it again."
            )
        index = order.index(sid)
        point.reset.discard(sid)
        point.skip.add(sid)
        point.reset.update(s for s in order[index + 1 :] if _started(run, s))
        if any(e.step == sid for e in run.transcript):
            point.reason = point.reason or f"step {sid!r} is skipped"
        if index == point.index:
            point.index = next(
                (
                    i
                    for i in range(index + 1, len(order))
                    if order[i] in point.reset
                    or _status_of(run, order[i]) not in ("completed", "skipped")
                ),
                len(order),
            )


def _choose_rerun(
    run: Run,
    workflow: Workflow,
    report: LoadReport,
    order: list[str],
    plan: ResumePlan,
    point: _ResumePoint,
) -> None:
    """Which steps are reset (their entries archived), reused and run, and whether the resume
    step sends its prompt again."""
    reset = point.reset
    plan.reset = [sid for sid in order if sid in reset]
    plan.skip = [sid for sid in order if sid in point.skip]
    plan.reset_reason = point.reason if reset or point.skip else None
    if reset or point.skip:
        plan.archive_from = _first_entry_of(run, reset | point.skip)
    plan.resume_from = order[point.index] if point.index < len(order) else None
    start = plan.resume_from
    if start is not None and start not in reset and _only_prompted(run, workflow, report, start):
        plan.reprompt = start
    plan.reuse = [sid for sid in order if _status_of(run, sid) == "completed" and sid not in reset]
    plan.rerun = [
        sid
        for sid in order
        if sid not in plan.reuse and _status_of(run, sid) != "skipped" and sid not in point.skip
    ]


def _only_prompted(run: Run, workflow: Workflow, report: LoadReport, step_id: str) -> bool:
    """True when a prompt step's only entries are its unedited prompt, last in the file: it
    is written again from the current workflow and inputs."""
    step = workflow.step(step_id)
    transcript = run.transcript
    if step is None or step.kind != "prompt" or not transcript or transcript[-1].step != step_id:
        return False
    # From the end, so that a step with replies (a long one: all of a 30,000-entry run) is
    # answered by its last entry at once.
    edited = set(report.edited_entries)
    return not any(
        e.step == step_id and (e.role not in ("user", "note") or e.id in edited)
        for e in reversed(transcript)
    )


def _settle_in_flight(
    run: Run,
    report: LoadReport,
    tools: dict[str, Tool],
    choice: Choices,
    workspace: Path | None,
    plan: ResumePlan,
) -> None:
    """Sort the tool calls in flight when the run stopped: answered by hand, already applied,
    run again, or for a person to review (which blocks the resume)."""
    archived = plan.archive_from
    for flight in run.in_flight:
        if archived is not None and flight.entry >= archived:
            continue  # its step runs again from the start
        result = next(
            (e for e in run.transcript if e.role == "tool_result" and e.call_id == flight.call_id),
            None,
        )
        tool = tools.get(flight.tool)
        idempotent = _may_run_again(flight, tool)
        edit_state = _edit_state(tool, flight, workspace)
        if result is not None and result.id in report.edited_entries:
            plan.answered_tools.append(flight)
        elif edit_state == "applied" and tool is not None and workspace is not None:
            plan.applied_tools.append(flight)
            arguments = _call_arguments(run, flight)
            applied = tool.applied_result(flight.expect, arguments, workspace)  # type: ignore[attr-defined]
            plan.applied_results[flight.call_id] = applied.content
        elif edit_state == "not_applied" or idempotent or choice.rerun_unsafe:
            plan.retry_tools.append(flight)
        elif choice.continue_unsafe:
            plan.continued_tools.append(flight)
        else:
            plan.review_tools.append(flight)
    if plan.review_tools and plan.can_resume:
        calls = ", ".join(f"{f.tool} ({f.call_id})" for f in plan.review_tools)
        plan.block(
            Stop.NEEDS_REVIEW,
            f"a tool call that is not idempotent was in flight when the run stopped: {calls}. "
            "Check its side effects, then either write its real result in place of the "
            "'RESULT NOT RECORDED' text in the progress file, or resume with --rerun-unsafe",
        )


def _hold_unsealed_calls(
    run: Run, workflow: Workflow, choice: Choices, plan: ResumePlan, key: Key | None
) -> None:
    """The calls that would run on resume (pending, or in flight and run again) must carry
    this machine's seal; the others wait for a person (``--trust-calls``/``--deny-calls``).

    Command and workflow steps are exempt: their calls are checked against the workflow's own
    ``run:``/``workflow:`` lines before anything runs."""
    archived = plan.archive_from
    in_flight = {f.call_id for f in run.in_flight}
    retried = [run.entry(f.entry) for f in plan.retry_tools]
    waiting = [c for c in unanswered_calls(run.transcript) if c.call_id not in in_flight]
    calls = [
        c
        for c in [*retried, *waiting]
        if c is not None and (archived is None or c.id < archived) and _model_step(workflow, c.step)
    ]
    plan.unsealed_tools = [
        UnsealedCall(
            call_id=c.call_id or "",
            tool=c.tool or "",
            step=c.step,
            entry=c.id,
            arguments=_shortened(c.content),
        )
        for c in unsealed_calls(run, key, calls)
    ]
    if choice.trust_calls and choice.deny_calls:
        raise InputError("--trust-calls and --deny-calls exclude each other; choose one.")
    if choice.trust_calls or choice.deny_calls:
        plan.unsealed_choice = "trust" if choice.trust_calls else "deny"
    if not plan.unsealed_tools or plan.unsealed_choice is not None or not plan.can_resume:
        return
    plan.block(Stop.UNSEALED_CALLS, unsealed_message(plan.unsealed_tools))


def unsealed_message(calls: list[UnsealedCall]) -> str:
    """Why a resume stops for calls flow did not record, naming each tool and its arguments."""
    named = "; ".join(f"entry {c.entry}: {c.tool} ({c.call_id}) with {c.arguments}" for c in calls)
    return (
        f"{len(calls)} tool call(s) without a result were not recorded by flow on this machine "
        f"as they read now (added or changed by hand, or the file was written elsewhere): "
        f"{named}. Nothing was run. Check them, then resume with --trust-calls to run them as "
        "written, or --deny-calls to give each a refusal as its result"
    )


def _model_step(workflow: Workflow, step_id: str | None) -> bool:
    """True for a step whose tool calls come from model replies (not a command or child)."""
    step = workflow.step(step_id) if step_id is not None else None
    return step is None or step.kind not in ("command", "workflow")


def _shortened(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def _may_run_again(flight: InFlight, tool: Tool | None) -> bool:
    """Whether a call in flight may run again: what was recorded when it started decides (a
    later configuration never makes a call safe to repeat), and for the workflow's own tools
    the workflow must still say so. An MCP call is judged by its record alone: no server is
    started to decide (``flow status`` starts nothing). A subagent call runs again by resuming
    its child run where it stopped, so nothing it completed is done twice (docs/spec.md 4.14);
    which agent it runs is decided again from this machine's agent folders."""
    if flight.tool == SUBAGENT_TOOL:
        return True
    if flight.server is not None:
        return flight.idempotent
    return flight.idempotent and tool is not None and tool.idempotent


def _block_when_completed(run: Run, plan: ResumePlan) -> None:
    """A completed run with nothing set back has nothing left to do."""
    if plan.resume_from is None and not plan.reset and run.status == "completed":
        plan.block(Stop.COMPLETED, "the run is already completed")


def _edit_state(tool: Tool | None, flight: InFlight, workspace: Path | None) -> str | None:
    """``applied`` / ``not_applied`` / ``changed`` for an edit in flight; None for other tools.

    An edit recorded without an expectation changed nothing when it ran (its arguments did
    not fit the file, or the file already read as asked), so running it again is safe.
    """
    check = getattr(tool, "in_flight_state", None)
    if check is None or workspace is None:
        return None
    if flight.expect is None:
        return "not_applied"
    state: str = check(flight.expect, workspace)
    return state


def _call_arguments(run: Run, flight: InFlight) -> dict[str, Any]:
    call = run.entry(flight.entry)
    try:
        value = json.loads(call.content) if call is not None else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
