"""What a child run tells its parent's display: its progress, within the parent's step.

A sub-workflow or subagent runs as a child run of its own (``subworkflows``), and the person
watching sees the parent's display throughout. The child's engine reports to a
``ChildReporter``, which forwards each event as the parent step's::

    reporter = ChildReporter(parent.reporter, step_id="review", title="Triage", run=parent_run,
                             rolled_up=lambda: rolled)
"""

from __future__ import annotations

from collections.abc import Callable

from ..progress.children import usage_difference
from ..progress.model import Run, Usage
from ..providers.provider import Request
from .events import Reporter


class ChildReporter(Reporter):
    """The parent's display, told about the child's progress within the parent's step.

    The display shows one step at a time, the parent's: the child's steps are notices
    (``Triage › step 1/2 Collect: started``), its model calls count toward the parent's step,
    and the totals shown are the parent's with the child's usage so far."""

    def __init__(
        self,
        parent: Reporter,
        *,
        step_id: str,
        title: str,
        run: Run,
        rolled_up: Callable[[], Usage],
    ) -> None:
        """``parent`` is told about the child run of the parent ``run``'s step ``step_id``,
        shown as ``title``; ``rolled_up()`` is what of the child's usage ``run`` has so far."""
        self.parent = parent
        self.step_id = step_id
        self.title = title
        self.run = run
        self.rolled_up = rolled_up

    def _with_parent(self, child_total: Usage) -> Usage:
        total = Usage(**vars(self.run.usage))
        total.add(usage_difference(child_total, self.rolled_up()))
        return total

    def notice(self, text: str) -> None:
        """Forwarded with the parent step's title in front."""
        self.parent.notice(f"{self.title} › {text}")

    def step_started(
        self, step_id: str, title: str, index: int, total: int, agent: str | None = None
    ) -> None:
        """A notice: the child's step within the parent's."""
        self.parent.notice(f"{self.title} › step {index}/{total} {title}: started")

    def step_finished(self, step_id: str, status: str) -> None:
        """A notice: the child's step ended."""
        self.parent.notice(f"{self.title} › step {step_id}: {status}")

    def model_call(self, step_id: str, turn: int, request: Request) -> None:
        """Forwarded as a call of the parent's step."""
        self.parent.model_call(f"{self.step_id}/{step_id}", turn, request)

    def text(self, delta: str) -> None:
        """Forwarded."""
        self.parent.text(delta)

    def model_reply(self, step_id: str, usage: Usage, run_usage: Usage) -> None:
        """Forwarded with the parent's totals including the child's usage so far."""
        self.parent.model_reply(self.step_id, usage, self._with_parent(run_usage))

    def tool_started(self, name: str, arguments: str, call_id: str = "") -> None:
        """Forwarded."""
        self.parent.tool_started(name, arguments, call_id)

    def tool_finished(self, name: str, is_error: bool, summary: str, call_id: str = "") -> None:
        """Forwarded."""
        self.parent.tool_finished(name, is_error, summary, call_id)

    def model_refused(self, model: str, message: str) -> None:
        """Forwarded."""
        self.parent.model_refused(model, message)

    def question_asked(self, step_id: str, text: str) -> None:
        """Forwarded as a question of the parent's step (``parent/child`` step ids)."""
        self.parent.question_asked(f"{self.step_id}/{step_id}", text)

    def compacted(self, step_id: str, first: int, last: int, tokens: int) -> None:
        """Forwarded as the parent step's (the entries are the child's)."""
        self.parent.compacted(f"{self.step_id}/{step_id}", first, last, tokens)

    def retry(self, attempt: int, delay: float, message: str) -> None:
        """Forwarded."""
        self.parent.retry(attempt, delay, message)
