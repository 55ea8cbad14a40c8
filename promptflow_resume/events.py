"""What the engine tells whoever watches a run (the terminal display, tests, other programs).

The engine calls these hooks; it never prints. ``Reporter`` is the no-op base: subclass it and
override what you need.
"""

from __future__ import annotations

from .progress.model import Usage
from .providers.base import Request


class Reporter:
    """Hooks called as a run progresses; every method does nothing by default."""

    def run_started(self, run_usage: Usage) -> None:
        """The run starts or resumes; ``run_usage`` is what earlier attempts already used."""

    def dry_run(self) -> None:
        """The run sends nothing (the ``echo`` provider): its requests are only shown."""

    def notice(self, text: str) -> None:
        """A one-line message for the user (resume decisions, workflow changes, warnings)."""

    def step_started(self, step_id: str, title: str, index: int, total: int) -> None:
        """A step begins (or resumes)."""

    def step_finished(self, step_id: str, status: str) -> None:
        """A step ended."""

    def model_call(self, step_id: str, turn: int, request: Request) -> None:
        """A model request is about to be sent (``request`` is exactly what the provider gets)."""

    def text(self, delta: str) -> None:
        """Reply text as it arrives (streaming providers)."""

    def model_reply(self, step_id: str, usage: Usage, run_usage: Usage) -> None:
        """A model reply was recorded; ``run_usage`` is the run's total so far."""

    def tool_started(self, name: str, arguments: str) -> None:
        """A tool call starts (its start is already durable)."""

    def tool_finished(self, name: str, is_error: bool, summary: str) -> None:
        """A tool call's result was recorded."""

    def retry(self, attempt: int, delay: float, message: str) -> None:
        """A transient provider error; the call is retried after ``delay`` seconds."""

    def suspended(self, until: str, reason: str) -> None:
        """The run stops ``suspended`` at a provider's quota window that opens at ``until``
        (UTC, ISO 8601); ``reason`` is the run's one-line reason (docs/spec.md 4.18)."""

    def close(self) -> None:
        """The run stopped; tear down any live display."""
