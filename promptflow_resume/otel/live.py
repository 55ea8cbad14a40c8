"""Spans sent while a run goes on (``flow run --otel``, or ``OTEL_EXPORTER_OTLP_ENDPOINT``).

``OtelReporter`` is a ``Reporter``: the engine tells it what it saved, and it sends the spans
``spans.run_spans`` makes from the run as recorded, so they are the spans ``flow export otel``
makes from the file later (same ids, times and attributes). A span is sent once its end is
recorded: a model call's and a tool call's at the latest when its step ends (and every
``FLUSH_SECONDS`` while a step goes on), a step's when it ends, the attempt's when it stops.
A sending failure never stops the run: it is told once as a notice, and tracing stops.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import TelemetryError
from ..progress.model import Run, Usage
from ..run.events import Reporter
from .spans import capture_content, run_spans

if TYPE_CHECKING:
    from ..base.redact import Redactor
    from .sdk import SpanSender

#: While a step goes on, finished model and tool calls are sent at most this often.
FLUSH_SECONDS = 5.0


class OtelReporter(Reporter):
    """Sends the spans of the attempt it watches to an OTLP/HTTP endpoint."""

    def __init__(self, endpoint: str | None = None, tell: Reporter | None = None) -> None:
        self._endpoint = endpoint
        #: Where a sending failure is told (the terminal display).
        self._tell = tell
        self._sender: SpanSender | None = None
        self._run: Run | None = None
        self._progress: Path | None = None
        self._redactor: Redactor | None = None
        self._attempt = 0
        self._sent: set[str] = set()
        self._children: set[tuple[str, str]] = set()
        self._last = time.monotonic()
        self._failed = False

    def run_opened(self, run: Run, progress: Path, redactor: Redactor) -> None:
        """Watch this run's current attempt."""
        self._run, self._progress, self._redactor = run, progress, redactor
        self._attempt = run.attempts[-1].n if run.attempts else 1
        self._sent.clear()

    def model_reply(self, step_id: str, usage: Usage, run_usage: Usage) -> None:
        """Finished calls go out every ``FLUSH_SECONDS``."""
        self._maybe_flush()

    def tool_finished(self, name: str, is_error: bool, summary: str, call_id: str = "") -> None:
        """Finished calls go out every ``FLUSH_SECONDS``."""
        self._maybe_flush()

    def step_finished(self, step_id: str, status: str) -> None:
        """The step's span and its calls' go out."""
        self._flush(final=False)

    def run_stopped(self, run: Run, error: BaseException | None) -> None:
        """Everything of the attempt that was not sent goes out."""
        self._run = run
        self._flush(final=True)

    def close(self) -> None:
        """Shut the exporter down (it sends nothing more)."""
        if self._sender is not None:
            self._sender.close()
            self._sender = None

    def _maybe_flush(self) -> None:
        if time.monotonic() - self._last >= FLUSH_SECONDS:
            self._flush(final=False)

    def _flush(self, *, final: bool) -> None:
        run = self._run
        if run is None or self._failed:
            return
        self._last = time.monotonic()
        redactor = self._redactor
        redact = (lambda text: redactor.redact(text)[0]) if redactor and capture_content() else None
        spans = [
            s
            for s in run_spans(run, self._progress, redact=redact)
            if s.attempt == self._attempt and (s.closed or final) and s.span_id not in self._sent
        ]
        if not spans:
            return
        try:
            if self._sender is None:
                from .sdk import SpanSender

                self._sender = SpanSender(self._endpoint)
            self._sender.send(spans)
        except TelemetryError as error:
            self._failed = True
            if self._tell is not None:
                self._tell.notice(
                    f"tracing stopped: {error.message} The run goes on; send its spans later "
                    f"with: flow export otel {self._progress}"
                )
            return
        self._sent.update(s.span_id for s in spans)
        if final:
            self._send_children(run)

    def _send_children(self, run: Run) -> None:
        """The spans of the child runs this attempt ran (sub-workflows, subagents): their
        engines tell their parent's display, not this reporter, so they are sent from their
        files when the parent's attempt stops."""
        if self._progress is None or self._sender is None:
            return
        from ..base.errors import FlowError
        from ..progress.loading import load_progress
        from .spans import ns_of

        attempt = next((a for a in run.attempts if a.n == self._attempt), None)
        since = ns_of(attempt.started) if attempt is not None else 0
        paths = [state.child for state in run.steps.values() if state.child]
        paths += [link.child for state in run.steps.values() for link in state.agents.values()]
        for rel in paths:
            path = self._progress.parent / rel
            try:
                child, _ = load_progress(path)
                spans = [
                    s
                    for s in run_spans(child, path)
                    if s.end_ns >= since and (s.trace_id, s.span_id) not in self._children
                ]
                self._sender.send(spans)
            except (FlowError, OSError):
                continue  # a child's file that cannot be read (or sent) is not the run's
            self._children.update((s.trace_id, s.span_id) for s in spans)
