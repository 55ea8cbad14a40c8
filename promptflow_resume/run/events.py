"""What the engine tells whoever watches a run (the terminal display, tests, other programs).

The engine calls these hooks; it never prints. ``Reporter`` is the no-op base: subclass it and
override what you need; ``Tee`` tells several reporters (the terminal display and the event
stream of ``--events``, docs/spec.md 4.16). A hook that reports a fact is called once the fact
is saved in the progress file, so what a reporter is told never runs ahead of the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..progress.model import Approval, Run, Usage
from ..providers.provider import Request

if TYPE_CHECKING:
    from ..base.redact import Redactor


class Reporter:
    """Hooks called as a run progresses; every method does nothing by default."""

    def run_started(self, run_usage: Usage) -> None:
        """The run starts or resumes; ``run_usage`` is what earlier attempts already used."""

    def run_opened(self, run: Run, progress: Path, redactor: Redactor) -> None:
        """The attempt's ``running`` status is saved, before any model call: ``run`` has its
        id and attempt number, ``progress`` is its file; ``redactor`` is what the run records
        with, for anything a watcher writes down (docs/spec.md 4.16)."""

    def run_stopped(self, run: Run, error: BaseException | None) -> None:
        """The attempt ended and its last status is folded into the file; ``error`` is what
        goes on to the caller (a user error met mid-run, or a bug), else None."""

    def dry_run(self) -> None:
        """The run sends nothing (the ``echo`` provider): its requests are only shown."""

    def notice(self, text: str) -> None:
        """A one-line message for the user (resume decisions, workflow changes, warnings)."""

    def step_started(
        self, step_id: str, title: str, index: int, total: int, agent: str | None = None
    ) -> None:
        """A step begins (or resumes); ``agent`` names the step's agent in a handoff chain."""

    def step_finished(self, step_id: str, status: str) -> None:
        """A step ended."""

    def model_call(self, step_id: str, turn: int, request: Request) -> None:
        """A model request is about to be sent (``request`` is exactly what the provider gets)."""

    def text(self, delta: str) -> None:
        """Reply text as it arrives (streaming providers)."""

    def model_reply(self, step_id: str, usage: Usage, run_usage: Usage) -> None:
        """A model reply was recorded; ``run_usage`` is the run's total so far."""

    def tool_started(self, name: str, arguments: str, call_id: str = "") -> None:
        """A tool call starts (its start is already durable)."""

    def tool_finished(self, name: str, is_error: bool, summary: str, call_id: str = "") -> None:
        """A tool call's result was recorded."""

    def model_refused(self, model: str, message: str) -> None:
        """The provider refused ``model`` (recorded in the attempt); the next one is tried."""

    def compacted(self, step_id: str, first: int, last: int, tokens: int) -> None:
        """Entries ``first``..``last`` were summarised into a durable compaction entry."""

    def approval_needed(self, calls: Sequence[Approval]) -> None:
        """The run stops with status ``awaiting_approval``, saved: ``calls`` are the pending
        tool calls (their arguments as previews, redacted as recorded)."""

    def question_asked(self, step_id: str, text: str) -> None:
        """A human step's question is saved in the file; the run stops for its answer."""

    def retry(self, attempt: int, delay: float, message: str) -> None:
        """A transient provider error; the call is retried after ``delay`` seconds."""

    def suspended(self, until: str, reason: str) -> None:
        """The run stops ``suspended`` at a provider's quota window that opens at ``until``
        (UTC, ISO 8601); ``reason`` is the run's one-line reason (docs/spec.md 4.18)."""

    def hook_ran(self, hook: str, event: str, status: str, ms: int) -> None:
        """A repository hook ran for ``event`` (docs/spec.md 4.15) and ended as ``status``:
        ``ok``, ``failed``, ``timed_out``, ``not_started`` or ``denied`` (a ``preToolUse``
        hook refused the call), after ``ms`` milliseconds."""

    def close(self) -> None:
        """The run stopped; tear down any live display."""


class Tee(Reporter):
    """Tells every hook to each of ``reporters`` in turn (the terminal display and an event
    stream both watch one run)."""

    def __init__(self, *reporters: Reporter) -> None:
        self.reporters = reporters

    def run_started(self, run_usage: Usage) -> None:
        """Told to each."""
        for r in self.reporters:
            r.run_started(run_usage)

    def run_opened(self, run: Run, progress: Path, redactor: Redactor) -> None:
        """Told to each."""
        for r in self.reporters:
            r.run_opened(run, progress, redactor)

    def run_stopped(self, run: Run, error: BaseException | None) -> None:
        """Told to each."""
        for r in self.reporters:
            r.run_stopped(run, error)

    def dry_run(self) -> None:
        """Told to each."""
        for r in self.reporters:
            r.dry_run()

    def notice(self, text: str) -> None:
        """Told to each."""
        for r in self.reporters:
            r.notice(text)

    def step_started(
        self, step_id: str, title: str, index: int, total: int, agent: str | None = None
    ) -> None:
        """Told to each."""
        for r in self.reporters:
            r.step_started(step_id, title, index, total, agent=agent)

    def step_finished(self, step_id: str, status: str) -> None:
        """Told to each."""
        for r in self.reporters:
            r.step_finished(step_id, status)

    def model_call(self, step_id: str, turn: int, request: Request) -> None:
        """Told to each."""
        for r in self.reporters:
            r.model_call(step_id, turn, request)

    def text(self, delta: str) -> None:
        """Told to each."""
        for r in self.reporters:
            r.text(delta)

    def model_reply(self, step_id: str, usage: Usage, run_usage: Usage) -> None:
        """Told to each."""
        for r in self.reporters:
            r.model_reply(step_id, usage, run_usage)

    def tool_started(self, name: str, arguments: str, call_id: str = "") -> None:
        """Told to each."""
        for r in self.reporters:
            r.tool_started(name, arguments, call_id)

    def tool_finished(self, name: str, is_error: bool, summary: str, call_id: str = "") -> None:
        """Told to each."""
        for r in self.reporters:
            r.tool_finished(name, is_error, summary, call_id)

    def retry(self, attempt: int, delay: float, message: str) -> None:
        """Told to each."""
        for r in self.reporters:
            r.retry(attempt, delay, message)

    def model_refused(self, model: str, message: str) -> None:
        """Told to each."""
        for r in self.reporters:
            r.model_refused(model, message)

    def compacted(self, step_id: str, first: int, last: int, tokens: int) -> None:
        """Told to each."""
        for r in self.reporters:
            r.compacted(step_id, first, last, tokens)

    def approval_needed(self, calls: Sequence[Approval]) -> None:
        """Told to each."""
        for r in self.reporters:
            r.approval_needed(calls)

    def question_asked(self, step_id: str, text: str) -> None:
        """Told to each."""
        for r in self.reporters:
            r.question_asked(step_id, text)

    def suspended(self, until: str, reason: str) -> None:
        """Told to each."""
        for r in self.reporters:
            r.suspended(until, reason)

    def hook_ran(self, hook: str, event: str, status: str, ms: int) -> None:
        """Told to each."""
        for r in self.reporters:
            r.hook_ran(hook, event, status, ms)

    def close(self) -> None:
        """Told to each."""
        for r in self.reporters:
            r.close()
