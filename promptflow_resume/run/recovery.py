"""Recovery decisions: continue, retry the step, skip the step, or ask a person.

When a stopped run is resumed in a state that is ambiguous — a call that is not idempotent
was in flight, a step failed (once or again and again), or the workflow changed in steps that
already ran — ``flow resume --decide`` (or ``recovery: model`` in the workflow) asks the run's
model to choose, instead of stopping for a person::

    situation = find_situation(run, plan, workflow)
    if situation is not None:
        decision = ask_model(provider, run, situation)
        choices = decision.choices(choices)   # then plan again and apply

The rules (docs/spec.md §4.11):
- It is never the default: without ``--decide`` or ``recovery: model`` nothing is asked.
- A person's answer wins: a result written by hand for a call in flight is used (that call is
  not ambiguous any more), and a choice on the command line (``--retry-step``, ``--skip-step``,
  ``--rerun-unsafe``, ``--rerun-changed``, ``--keep-completed``) means no model is asked.
- The model answers with one JSON object of a fixed shape, read strictly; an answer that is
  malformed, or a choice the situation does not allow, is refused and the decision becomes
  "ask a person" (the run stops ``needs_review``). Either way the decision is recorded as a
  ``decision`` entry in the progress file.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..base.clock import now_iso
from ..base.errors import ProviderError, ReplayMismatchError
from ..base.redact import Redactor
from ..chat import Message
from ..progress.model import Attempt, Entry, Run, Usage
from ..providers.provider import Provider, Purpose, Reply, Request
from ..workflow.records import Recovery, Workflow
from .recorded import make_provider
from .resumeplan import Choices, ResumePlan, Stop


class Choice(enum.Enum):
    """What a recovery decision does with the ambiguous step."""

    #: Go on from where the run stopped (an unknown call's result is recorded as unknown; a
    #: workflow change keeps the recorded results).
    CONTINUE = "continue"
    #: Run the step again from its start (its entries are archived; a workflow change re-runs
    #: from the first changed step).
    RETRY = "retry"
    #: Mark the step ``skipped`` and go on with the next one.
    SKIP = "skip"
    #: Stop ``needs_review`` for a person to decide.
    ASK = "ask"


class Ambiguity(enum.Enum):
    """Which kind of state asks for a decision."""

    IN_FLIGHT = "in_flight"
    WORKFLOW_CHANGED = "workflow_changed"
    FAILED_STEP = "failed_step"
    REPEATED_FAILURE = "repeated_failure"


#: Consecutive failed attempts from which a failure counts as repeated.
REPEATED = 2

#: How the model must answer (the system message of the decision request).
INSTRUCTIONS = (
    "You decide how a stopped workflow run recovers. Read the state below and answer with "
    'exactly one JSON object and nothing else: {"choice": CHOICE, "reason": REASON}, where '
    'CHOICE is one of "continue" (go on from where the run stopped), "retry" (run the step '
    'again from its start), "skip" (leave the step out and go on with the next one) or "ask" '
    "(stop and let a person decide), and REASON is one or two sentences saying why. Choose "
    '"ask" when a wrong choice could do harm that cannot be undone.'
)
#: The longest reason kept (a reason is a sentence or two, not an essay).
MAX_REASON = 600


@dataclass(frozen=True)
class Situation:
    """An ambiguous state: its kind, the step concerned, a short description, allowed choices."""

    kind: Ambiguity
    step: str | None
    description: str
    allowed: tuple[Choice, ...]


@dataclass(frozen=True)
class Decision:
    """A recovery decision as applied: the choice, why, and whether the model's was refused."""

    situation: Situation
    choice: Choice
    reason: str
    #: Why the model's answer was refused (then ``choice`` is ``ASK``); None when accepted.
    refused: str | None = None
    #: The model's reply as given (kept in the entry when it was refused).
    answer: str = ""
    usage: Usage = field(default_factory=Usage)

    def choices(self, base: Choices) -> Choices:
        """The resume choices that carry out this decision (``ASK`` changes nothing)."""
        kind, step, choice = self.situation.kind, self.situation.step, self.choice
        if choice is Choice.ASK:
            return base
        if kind is Ambiguity.WORKFLOW_CHANGED:
            if choice is Choice.CONTINUE:
                return replace(base, keep_completed=True)
            return replace(base, rerun_changed=True)
        if choice is Choice.RETRY:
            return replace(base, retry_step=step)
        if choice is Choice.SKIP:
            return replace(base, skip_step=step)
        if kind is Ambiguity.IN_FLIGHT:
            return replace(base, continue_unsafe=True)
        return base

    @property
    def stops(self) -> bool:
        """True when the run stops for a person (the choice is ``ask``, or it was refused)."""
        return self.choice is Choice.ASK

    @property
    def answered(self) -> bool:
        """True when the model answered (its call took tokens, counted in the run's usage)."""
        return bool(self.answer) or self.usage != Usage()

    def usage_text(self) -> str:
        """The decision call's tokens and cost, e.g. ``40 in / 7 out tokens, $0.0001``."""
        u = self.usage
        return f"{u.input_tokens:,} in / {u.output_tokens:,} out tokens, ${u.cost_usd:.4f}"

    def note(self) -> str:
        """The attempt note (and the line a person sees) for an applied decision."""
        return f"recovery decision: {self.choice.value} — {self.reason}"

    def notes(self) -> list[str]:
        """The attempt notes of the decision: ``note()`` and, when the model answered, what
        its call took, so ``flow log`` accounts for every token of the run."""
        usage = [f"recovery decision's call: {self.usage_text()}"] if self.answered else []
        return [self.note(), *usage]

    def stop_reason(self, plan: ResumePlan) -> str:
        """The run's ``reason`` when the decision stops it for a person."""
        if self.refused is not None:
            why = f"the model's recovery decision was refused ({self.refused})"
        else:
            why = f"the model's recovery decision is to ask a person: {self.reason}"
        if plan.blocked:
            return f"{plan.blocked}; {why}"
        return f"{why}. Then resume with --retry-step, --skip-step, or without an option"

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form (``flow resume --plan --decide --json``)."""
        return {
            "situation": self.situation.kind.value,
            "step": self.situation.step,
            "choice": self.choice.value,
            "reason": self.reason,
            "refused": self.refused,
            "description": self.situation.description,
        }

    def entry_text(self) -> str:
        """The body of the ``decision`` entry: a Markdown list, one field an item."""
        lines = [f"- choice: {self.choice.value}"]
        if self.refused is not None:
            lines.append(f"- refused: {self.refused}; a person decides (needs_review)")
            lines.append(f"- answer: {_one_line(self.answer, 300) or '(empty)'}")
        lines.append(f"- reason: {self.reason}")
        lines.append(f"- situation: {self.situation.description}")
        if self.answered:
            lines.append(f"- usage: {self.usage_text()}")
        return "\n".join(lines)


def wants_decision(workflow: Workflow, choices: Choices, *, decide: bool) -> bool:
    """True when this resume lets the model decide: ``--decide`` or ``recovery: model``, and
    no choice of a person's on the command line."""
    return (decide or workflow.recovery is Recovery.MODEL) and decision_asked(choices)


def record_decision(run: Run, decision: Decision, redactor: Redactor) -> Entry:
    """Append the ``decision`` entry (secrets in the model's words replaced)."""
    text, hidden = redactor.redact(decision.entry_text())
    entry = Entry(
        id=run.next_entry_id(), role="decision", content=text, step=decision.situation.step
    )
    if hidden:
        run.redactions.count += hidden
        run.redactions.where.append(f"entry {entry.id}")
    run.transcript.append(entry)
    return entry


def decision_attempt(run: Run, decision: Decision) -> Attempt:
    """Append the attempt of a resume that only decided (the run stopped for a person before
    anything ran): it holds the decision's usage and note, so the attempts still add up to
    the run's usage (``flow log``). Call it once the run's status and reason are set."""
    now = now_iso()
    return run.add_attempt(
        now,
        ended=now,
        status=run.status,
        reason=run.reason,
        usage=replace(decision.usage),
        notes=decision.notes(),
    )


def decision_asked(choices: Choices) -> bool:
    """False when a person already chose on the command line: their answer wins."""
    return not (
        choices.rerun_unsafe
        or choices.rerun_changed
        or choices.keep_completed
        or choices.retry_step
        or choices.skip_step
    )


def find_situation(run: Run, plan: ResumePlan, workflow: Workflow) -> Situation | None:
    """The ambiguous state of a stopped run, or None when resuming needs no decision."""
    if plan.stop is Stop.NEEDS_REVIEW and plan.review_tools:
        step = plan.review_tools[0].step
        calls = ", ".join(f"{f.tool} ({f.call_id})" for f in plan.review_tools)
        return Situation(
            Ambiguity.IN_FLIGHT,
            step,
            f"in step {step}, a tool call that is not idempotent was in flight when the run "
            f"stopped: {calls}; it may or may not have taken effect, and its result was not "
            "recorded. continue = go on without running it again (its result is recorded as "
            "unknown); retry = run the step again from its start; skip = leave the step out.",
            tuple(Choice),
        )
    if plan.stop is Stop.WORKFLOW_CHANGED:
        changed = [c.step_id for c in plan.changes if c.started and c.kind != "added"]
        return Situation(
            Ambiguity.WORKFLOW_CHANGED,
            changed[0] if changed else None,
            f"the workflow changed in steps that already ran: {', '.join(changed)}. "
            "continue = keep their recorded results and use the new text for what is left; "
            "retry = run again from the first changed step. skip is not possible here.",
            (Choice.CONTINUE, Choice.RETRY, Choice.ASK),
        )
    error = run.last_error
    # A run a decision stopped for a person (its last entry is that decision) is asked again.
    last = run.transcript[-1] if run.transcript else None
    asked = run.status == "needs_review" and last is not None and last.role == "decision"
    if (run.status != "failed" and not asked) or error is None or error.step is None:
        return None
    state = run.steps.get(error.step)
    if (
        state is None
        or state.status not in ("running", "failed")
        or workflow.step(error.step) is None
    ):
        return None  # a person set the step back or skipped it by hand: their answer wins
    failures = _trailing_failures(run)
    kind = Ambiguity.REPEATED_FAILURE if failures >= REPEATED else Ambiguity.FAILED_STEP
    times = "once" if failures <= 1 else f"{failures} times in a row"
    return Situation(
        kind,
        error.step,
        f"step {error.step} failed {times}; the last error was {error.type}: "
        f"{_one_line(error.message, 300)}. continue = resume the step where it stopped; "
        "retry = run the step again from its start; skip = leave the step out.",
        tuple(Choice),
    )


def _trailing_failures(run: Run) -> int:
    """How many of the last attempts ended ``failed``, one after the other."""
    count = 0
    for attempt in reversed(run.attempts):
        if attempt.status != "failed":
            break
        count += 1
    return max(count, 1)


def request_for(run: Run, situation: Situation) -> Request:
    """The decision's model call: the instructions and the state, nothing of the conversation."""
    done = [sid for sid, s in run.steps.items() if s.status == "completed"]
    state = (
        # No run id: it is random, and a replayed session must send the recorded request.
        f"A run of workflow {run.workflow.name or run.workflow.path} stopped with "
        f"status {run.status}" + (f" ({_one_line(run.reason, 200)})" if run.reason else "") + ". "
        f"Steps completed: {', '.join(done) if done else 'none'}. "
        f"Situation: {situation.description} "
        f"Allowed choices: {', '.join(c.value for c in situation.allowed)}."
    )
    return Request(
        messages=(Message("system", INSTRUCTIONS), Message("user", state)),
        model=run.config.model,
        purpose=Purpose.RECOVERY,
    )


def ask_model(provider: Provider, run: Run, situation: Situation) -> Decision:
    """Ask the run's model to decide; a failed call or a bad answer becomes ``ASK``."""
    from ..providers.fallback import ModelChoices

    # The run's models in order, as its own model calls try them.
    choices = ModelChoices(run.config.model_order())
    try:
        reply = choices.call(request_for(run, situation), provider.complete)
    except ReplayMismatchError as error:
        # A replay that would decide otherwise than the recorded session is not a decision a
        # person should review but a replay that went astray: say so, like any mismatch.
        error.message = f"the recovery decision's request: {error.message}"
        raise
    except ProviderError as error:
        return failed_call(situation, error)
    return read_answer(reply, situation, usage_of(reply, choices.current, run.config.prices))


def model_decision(
    run: Run,
    progress_path: Path,
    plan: ResumePlan,
    workflow: Workflow,
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    record: bool = False,
) -> Decision | None:
    """Ask the run's model (as this resume or ``flow status --decide`` would use it) to decide
    an ambiguous state; its tokens and cost are added to the run's usage. None when the state
    is not ambiguous.
    With ``record`` the decision's exchange goes into the session recording (``--record``),
    so a replay of the session decides the same."""
    situation = find_situation(run, plan, workflow)
    if situation is None:
        return None
    config = replace(
        run.config,
        provider=provider or run.config.provider,
        model=model or run.config.model,
        # A model given for this resume is one model, without the run's fallbacks.
        models=[] if model else list(run.config.models),
    )
    try:
        decider = make_provider(
            replace(run, config=config),
            progress_path,
            stream=False,
            record=record,
            redactor=Redactor.from_environment(),
            base_url=base_url,
        )
    except ProviderError as error:  # a missing key or extra: a person decides
        return failed_call(situation, error)
    decision = ask_model(decider, replace(run, config=config), situation)
    run.usage.add(decision.usage)
    if situation.step is not None and situation.step in run.steps:
        run.steps[situation.step].usage.add(decision.usage)
    return decision


def failed_call(situation: Situation, error: ProviderError) -> Decision:
    """The decision when the model could not be asked: a person decides."""
    return Decision(
        situation,
        Choice.ASK,
        "the model could not be asked",
        refused=f"the model call failed: {_one_line(str(error), 200)}",
    )


def usage_of(
    reply: Reply, model: str | None, prices: dict[str, dict[str, float]] | None = None
) -> Usage:
    """The decision call's tokens and cost (at the run's given ``prices`` first), added to the
    run's usage."""
    from ..providers.givenprices import from_record
    from ..providers.pricing import cost_usd

    u = reply.usage
    cost = cost_usd(reply.model or model, u, from_record(prices or {})) or 0.0
    return Usage(u.input_tokens, u.output_tokens, u.cached_tokens, round(cost, 6), turns=0)


def read_answer(reply: Reply, situation: Situation, usage: Usage) -> Decision:
    """The decision in ``reply``, read strictly: one JSON object, ``choice`` and ``reason``."""
    text = reply.content.strip()

    def refuse(why: str) -> Decision:
        return Decision(
            situation, Choice.ASK, "the answer was refused", refused=why, answer=text, usage=usage
        )

    body = _without_fence(text)
    try:
        value = json.loads(body)
    except ValueError:
        return refuse("the answer is not one JSON object")
    if not isinstance(value, dict):
        return refuse("the answer is not one JSON object")
    keys = set(value)
    if keys != {"choice", "reason"}:
        extra = sorted(keys - {"choice", "reason"})
        missing = sorted({"choice", "reason"} - keys)
        what = [f"missing {', '.join(missing)}"] if missing else []
        what += [f"unknown {', '.join(extra)}"] if extra else []
        return refuse(
            f"the answer must have exactly the keys choice and reason ({'; '.join(what)})"
        )
    choice, reason = value["choice"], value["reason"]
    if not isinstance(reason, str) or not reason.strip():
        return refuse("reason must be a non-empty string")
    if len(reason) > MAX_REASON:
        return refuse(f"reason is longer than {MAX_REASON} characters")
    known = {c.value: c for c in Choice}
    if not isinstance(choice, str) or choice not in known:
        return refuse(f"choice must be one of {', '.join(known)}")
    picked = known[choice]
    if picked not in situation.allowed:
        return refuse(f"{choice} is not possible here")
    return Decision(situation, picked, _one_line(reason, MAX_REASON), answer=text, usage=usage)


def _without_fence(text: str) -> str:
    """The text inside one ```json fence around the whole answer (some models add one)."""
    if text.startswith("```") and text.endswith("```") and text.count("```") == 2:
        inner = text[3:-3]
        first, _, rest = inner.partition("\n")
        return rest if first.strip() in ("", "json") else inner
    return text


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
