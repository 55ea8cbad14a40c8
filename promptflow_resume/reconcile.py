"""What to do when a stopped run is resumed.

``plan_resume`` compares a loaded run with the workflow as it is now and decides, without
changing anything, where the run continues, what is reused, what is re-run and why;
``apply_plan`` then makes the run match that decision. ``flow status`` and ``flow resume
--plan`` show the plan; ``flow resume`` applies it::

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

import enum
import json
import operator
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .base.clock import now_iso
from .base.errors import InputError, NeedsReviewError, ToolServerError, WorkflowChangedError
from .base.wording import count
from .conversation import skipped_output, unanswered_calls
from .progress.model import EditNote, Entry, InFlight, LoadReport, Run, StepState
from .progress.seal import Key, seal_calls, settle_call, unsealed_calls
from .workflow.model import Workflow
from .workflow.toolnames import SUBAGENT_TOOL

if TYPE_CHECKING:
    # Importing tools.base imports every tool module; ``flow status`` plans without them.
    from .tools.base import Tool

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


class ChangeDecision(enum.Enum):
    """What a resume does about a workflow change to steps that already ran."""

    #: No such change: the run goes on.
    CONTINUE = "continue"
    #: ``--rerun-changed``: re-run from the first changed step.
    RERUN_CHANGED = "rerun_changed"
    #: ``--keep-completed``: keep the recorded results, use the new text for what is left.
    KEEP_COMPLETED = "keep_completed"
    #: Neither was chosen: a person answers first (the plan is blocked, ``Stop.WORKFLOW_CHANGED``).
    ASK = "ask"


class Stop(enum.Enum):
    """Why a plan cannot continue as is; ``ResumePlan.blocked`` says it in words for people.

    Callers decide by this value, never by the words."""

    #: The run is completed and nothing was set back: there is nothing to resume.
    COMPLETED = "completed"
    #: The workflow changed in steps that already ran: --rerun-changed or --keep-completed.
    WORKFLOW_CHANGED = "workflow_changed"
    #: A call that is not idempotent was in flight: a person checks it (or --rerun-unsafe).
    NEEDS_REVIEW = "needs_review"
    #: A call without a result that flow on this machine did not record as it reads now: a
    #: person checks it (--trust-calls or --deny-calls).
    UNSEALED_CALLS = "unsealed_calls"
    #: The run's worktree and branch were discarded (``flow discard``): its files are gone.
    DISCARDED = "discarded"
    #: Another process runs it now (``flow status`` only: resume meets the lock instead).
    LIVE = "live"
    #: The workflow could not be read, so there is no plan (``flow status`` only; its
    #: ``workflow_error`` says why).
    NO_WORKFLOW = "workflow_error"


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
    #: ``--retry-step``: run this step again from its start (its entries are archived).
    retry_step: str | None = None
    #: ``--skip-step``: mark this step ``skipped`` and go on with the next one.
    skip_step: str | None = None
    #: A recovery decision to go on past non-idempotent calls in flight without running them
    #: again: their result is recorded as unknown.
    continue_unsafe: bool = False
    #: ``--trust-calls``: run the pending calls flow did not record here, as they are written.
    trust_calls: bool = False
    #: ``--deny-calls``: give those calls a refusal as their result instead of running them.
    deny_calls: bool = False


@dataclass(frozen=True)
class UnsealedCall:
    """A pending tool call that flow on this machine did not record as it reads now."""

    call_id: str
    tool: str
    step: str | None
    entry: int
    #: The arguments as written in the file (JSON text, shortened for display).
    arguments: str


@dataclass
class ResumePlan:
    """Everything ``flow resume`` will do, decided before anything is changed.

    ``stop`` alone says whether the run can go on; ``blocked`` says why in words for people.
    Both are set together, by ``block``."""

    resume_from: str | None = None
    reuse: list[str] = field(default_factory=list)
    rerun: list[str] = field(default_factory=list)
    changes: list[StepChange] = field(default_factory=list)
    workflow_changed: bool = False
    decision: ChangeDecision = ChangeDecision.CONTINUE
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
    #: Why the plan is blocked, as a value to decide by (None: it is not). Set by ``block``
    #: only (not an argument of the constructor), with the words.
    stop: Stop | None = field(default=None, init=False)
    #: The same in words for people (a question to answer, or nothing left to do); a clause
    #: without a final full stop. Set by ``block``.
    blocked: str | None = field(default=None, init=False)
    #: Steps marked ``skipped`` by this resume (``--skip-step`` or a recovery decision).
    skip: list[str] = field(default_factory=list)
    #: In-flight calls gone past without running them again (a recovery decision).
    continued_tools: list[InFlight] = field(default_factory=list)
    #: Calls that would run but that flow on this machine did not record as they read now.
    unsealed_tools: list[UnsealedCall] = field(default_factory=list)
    #: What the person chose for them: run as written, refuse, or nothing yet (blocked).
    unsealed_choice: Literal["trust", "deny"] | None = None

    @property
    def can_resume(self) -> bool:
        """True when nothing stops the plan (``stop`` is None)."""
        return self.stop is None

    def block(self, stop: Stop, words: str) -> None:
        """Stop the plan for ``stop``, saying why in ``words`` (for people)."""
        self.stop = stop
        self.blocked = words

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form: ``can_resume`` and ``blocked`` first, then the fields."""
        data: dict[str, object] = {"can_resume": self.can_resume, "blocked": self.blocked}
        data.update(asdict(self))
        data["changes"] = [asdict(c) for c in self.changes]
        data["decision"] = self.decision.value
        data["stop"] = self.stop.value if self.stop is not None else None
        return data


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


#: The result a pending call gets when the person resuming denies it (``--deny-calls``).
DENIED_RESULT = (
    "error: not run. This tool call was not recorded by flow on this machine as it reads now, "
    "and the person who resumed the run chose not to run it (--deny-calls)."
)


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
