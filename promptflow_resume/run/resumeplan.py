"""The records of a resume plan: what a person chose, and what ``flow resume`` will do.

``reconcile.plan_resume`` fills a ``ResumePlan`` from a stopped run, the workflow as it is now
and the ``Choices`` a person gave (``--rerun-changed``, ``--retry-step``, ``--trust-calls``…);
``planapply.apply_plan`` carries it out, and ``flow status`` and ``flow resume --plan`` show it.
A plan that cannot go on says why as a ``Stop`` value (to decide by) and in words (for people)::

    plan = plan_resume(run, workflow, report, choice=Choices(rerun_unsafe=False))
    if plan.stop is Stop.WORKFLOW_CHANGED:
        ...
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Literal

from ..progress.model import InFlight


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
