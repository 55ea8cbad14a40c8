"""What to do when a stopped run is resumed.

``plan_resume`` compares a loaded run with the workflow as it is now and decides, without
changing anything, where the run continues, what is reused, what is re-run and why;
``apply_plan`` then makes the run match that decision. ``flow status`` and ``flow resume
--plan`` show the plan; ``flow resume`` applies it::

    plan = plan_resume(run, workflow, report, choice=Choices(rerun_unsafe=False))
    notes = apply_plan(run, workflow, plan, store)

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
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import NeedsReviewError, WorkflowChangedError
from .progress.model import Entry, InFlight, LoadReport, Run, StepState
from .tools.base import Tool
from .workflow.model import Workflow

#: What a non-idempotent tool call that was in flight is answered with until a person decides.
PLACEHOLDER_RESULT = (
    "RESULT NOT RECORDED: flow started this tool call but the run stopped before its result "
    "was recorded, so it may or may not have taken effect. Check its side effects, then replace "
    "this text with the real result and run `flow resume` again (or resume with --rerun-unsafe "
    "to run the call again)."
)

Decision = Literal["continue", "rerun_changed", "keep_completed", "ask"]


@dataclass(frozen=True)
class StepChange:
    """One step whose definition differs from the checkpoint."""

    step_id: str
    kind: Literal["changed", "added", "removed"]
    #: True when the step had started (completed, running or failed) at the checkpoint.
    started: bool


@dataclass(frozen=True)
class Choices:
    """The user's answers to resume questions (command-line flags or a terminal prompt)."""

    rerun_changed: bool = False
    keep_completed: bool = False
    rerun_unsafe: bool = False


@dataclass
class ResumePlan:
    """Everything ``flow resume`` will do, decided before anything is changed."""

    can_resume: bool
    #: Why the run cannot continue as is (a question to answer, or nothing left to do).
    blocked: str | None
    resume_from: str | None
    reuse: list[str] = field(default_factory=list)
    rerun: list[str] = field(default_factory=list)
    changes: list[StepChange] = field(default_factory=list)
    workflow_changed: bool = False
    decision: Decision = "continue"
    #: Steps whose entries will be archived and that run again, and why.
    reset: list[str] = field(default_factory=list)
    reset_reason: str | None = None
    #: First transcript entry id that will be archived (None: nothing is archived).
    archive_from: int | None = None
    retry_tools: list[InFlight] = field(default_factory=list)
    review_tools: list[InFlight] = field(default_factory=list)
    #: In-flight calls whose placeholder result a person overwrote: the edit is the result.
    answered_tools: list[InFlight] = field(default_factory=list)
    #: In-flight edits whose file is already at their end state, and the result they get.
    applied_tools: list[InFlight] = field(default_factory=list)
    applied_results: dict[str, str] = field(default_factory=dict)
    edited_entries: list[int] = field(default_factory=list)
    #: A step whose prompt was sent but never answered: it is written again from the current
    #: workflow and inputs (edited inputs and ``--set`` apply to it), unless edited by hand.
    reprompt: str | None = None
    estimated_input_tokens: int = 0

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form (``flow status --json``, ``flow resume --plan --json``)."""
        data = asdict(self)
        data["changes"] = [asdict(c) for c in self.changes]
        return data


def _started(run: Run, step_id: str) -> bool:
    """True once a step did more than send its prompt (a model reply, a tool call, an answer)."""
    state = run.steps.get(step_id)
    if state is not None and state.status == "completed":
        return True
    return any(e.step == step_id and e.role not in ("user", "note") for e in run.transcript)


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
    are treated like any other call that is not idempotent)."""
    order = [s.id for s in workflow.steps]
    changes = workflow_changes(run, workflow)
    hard = [c for c in changes if c.started and c.kind != "added"]
    plan = ResumePlan(
        can_resume=True,
        blocked=None,
        resume_from=None,
        changes=changes,
        workflow_changed=run.workflow.hash != workflow.hash,
        edited_entries=list(report.edited_entries),
    )

    # Where the run continues: the first step not completed, or an earlier cursor.
    def status(sid: str) -> str:
        return run.steps.get(sid, StepState()).status

    first_open = next(
        (i for i, sid in enumerate(order) if status(sid) not in ("completed", "skipped")),
        len(order),
    )
    resume_index = first_open
    reset_reason: str | None = None
    if run.cursor.step in order and order.index(run.cursor.step) < first_open:
        resume_index = order.index(run.cursor.step)
        reset_reason = f"the cursor was moved back to step {run.cursor.step!r}"
    reset = {sid for sid in order[resume_index:] if status(sid) == "completed"}
    if resume_index < len(order):
        sid = order[resume_index]
        if status(sid) == "pending" and any(e.step == sid for e in run.transcript):
            reset.add(sid)
            reset_reason = reset_reason or f"step {sid!r} was set back to pending"
    if reset and reset_reason is None:
        reset_reason = "later steps were completed before an earlier one was set back to pending"

    # A changed step that only sent its prompt so far sends the new prompt instead.
    for change in changes:
        prompted = any(e.step == change.step_id for e in run.transcript)
        if change.kind == "changed" and not change.started and prompted:
            reset.add(change.step_id)
            reset_reason = reset_reason or f"step {change.step_id!r} changed before its first reply"

    if hard:
        names = ", ".join(c.step_id for c in hard)
        if choice.rerun_changed:
            plan.decision = "rerun_changed"
            first = min(
                (order.index(c.step_id) for c in hard if c.step_id in order), default=resume_index
            )
            for sid in order[first:]:
                if _started(run, sid):
                    reset.add(sid)
            resume_index = min(resume_index, first)
            reset_reason = f"the workflow changed in started steps ({names}); --rerun-changed"
        elif choice.keep_completed:
            plan.decision = "keep_completed"
        else:
            plan.decision = "ask"
            plan.can_resume = False
            plan.blocked = (
                f"the workflow {os.path.normpath(workflow.path)} changed in steps that already "
                f"ran: {names}. Choose "
                "--rerun-changed (re-run from the first changed step) or --keep-completed "
                "(keep recorded results, use the new text for what is left)"
            )

    plan.reset = [sid for sid in order if sid in reset]
    plan.reset_reason = reset_reason if reset else None
    if reset:
        plan.archive_from = _first_entry_of(run, reset)
    plan.resume_from = order[resume_index] if resume_index < len(order) else None
    if plan.resume_from is not None and plan.resume_from not in reset:
        mine = [e for e in run.transcript if e.step == plan.resume_from]
        step = workflow.step(plan.resume_from)
        unanswered = all(e.role in ("user", "note") for e in mine)
        untouched = not any(e.id in report.edited_entries for e in mine)
        tail = bool(mine) and mine[-1] is run.transcript[-1]
        if (
            step is not None
            and step.kind == "prompt"
            and mine
            and unanswered
            and untouched
            and tail
        ):
            plan.reprompt = plan.resume_from
    plan.reuse = [sid for sid in order if status(sid) == "completed" and sid not in reset]
    plan.rerun = [sid for sid in order if sid not in plan.reuse and status(sid) != "skipped"]

    # Tool calls in flight when the run stopped.
    archived = plan.archive_from
    for flight in run.in_flight:
        if archived is not None and flight.entry >= archived:
            continue  # its step runs again from the start
        result = next(
            (e for e in run.transcript if e.role == "tool_result" and e.call_id == flight.call_id),
            None,
        )
        tool = tools.get(flight.tool)
        idempotent = tool is not None and tool.idempotent  # the workflow decides, not the file
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
        else:
            plan.review_tools.append(flight)
    if plan.review_tools and plan.can_resume:
        plan.can_resume = False
        calls = ", ".join(f"{f.tool} ({f.call_id})" for f in plan.review_tools)
        plan.blocked = (
            f"a tool call that is not idempotent was in flight when the run stopped: {calls}. "
            "Check its side effects, then either write its real result in place of the "
            "'RESULT NOT RECORDED' text in the progress file, or resume with --rerun-unsafe"
        )

    if plan.resume_from is None and not plan.reset and run.status == "completed":
        plan.can_resume = False
        plan.blocked = "the run is already completed"

    kept = run.transcript if plan.archive_from is None else run.transcript[: plan.archive_from - 1]
    plan.estimated_input_tokens = sum(len(e.content) for e in kept) // 4
    return plan


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
    notes: list[str] = []
    if plan.decision == "ask":
        # ``blocked`` is a clause (status shows it too): end it before the hint's sentence.
        reason = (plan.blocked or f"the workflow {os.path.normpath(workflow.path)} changed").rstrip(
            "."
        )
        raise WorkflowChangedError(reason + ".", hint="Nothing was changed in the progress file.")

    for change in plan.changes:
        if change.kind == "changed" and not change.started:
            notes.append(f"step {change.step_id} changed before it started; using the new text")
        elif change.kind == "added":
            notes.append(f"step {change.step_id} was added to the workflow")
        elif change.kind == "removed":
            notes.append(f"step {change.step_id} was removed from the workflow")
        elif plan.decision == "keep_completed":
            notes.append(f"step {change.step_id} changed after it ran; kept its recorded result")

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
    for sid in plan.reset:
        run.steps[sid] = StepState()
    if plan.reprompt is not None:
        # Only the step's own prompt (and notes) are dropped; they are derived, not recorded work.
        while run.transcript and run.transcript[-1].step == plan.reprompt:
            run.transcript.pop()

    # The workflow as it is now defines the steps and their hashes from here on.
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

    for flight in plan.answered_tools:
        result = _result_for(run, flight.call_id)
        if result is not None:
            result.is_error = False
        notes.append(f"tool call {flight.call_id} ({flight.tool}): result written by hand, used")
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
    for flight in plan.retry_tools:
        placeholder = _result_for(run, flight.call_id)
        if placeholder is not None and placeholder is run.transcript[-1]:
            run.transcript.pop()
        notes.append(f"tool call {flight.call_id} ({flight.tool}) was in flight; running it again")
    settled = {f.call_id for f in plan.answered_tools + plan.retry_tools + plan.applied_tools}
    run.in_flight = [f for f in run.in_flight if f.call_id not in settled]

    if plan.review_tools:
        for flight in plan.review_tools:
            if _result_for(run, flight.call_id) is None:
                run.transcript.append(
                    Entry(
                        id=run.next_entry_id(),
                        role="tool_result",
                        content=PLACEHOLDER_RESULT,
                        step=flight.step,
                        call_id=flight.call_id,
                        tool=flight.tool,
                        is_error=True,
                    )
                )
        run.status = "needs_review"
        run.reason = plan.blocked
        raise NeedsReviewError(plan.blocked or "a tool call needs review")
    return notes


def _result_for(run: Run, call_id: str) -> Entry | None:
    return next(
        (e for e in reversed(run.transcript) if e.role == "tool_result" and e.call_id == call_id),
        None,
    )


def resume_note(run: Run, plan: ResumePlan, workflow: Workflow) -> str:
    """The one short message that tells the model the run was resumed, why, and what is done."""
    stopped = run.status + (f" ({run.reason})" if run.reason else "")
    done = [s.title for s in workflow.steps if s.id in plan.reuse]
    calls = sum(1 for e in run.transcript if e.role == "tool_result")
    step = workflow.step(plan.resume_from) if plan.resume_from else None
    parts = [
        f"Note from flow: this run was resumed after it stopped: {stopped}.",
        f"Already done: {', '.join(done) if done else 'no step completed yet'}; "
        f"{calls} tool result(s) are recorded above and were not re-run.",
    ]
    if step is not None:
        parts.append(f"Continue with {step.title} from where the conversation left off.")
    return " ".join(parts)
