"""What a run shows on the terminal: the live status line while it runs (``ConsoleReporter``)
and the summary when it stops (``report_outcome``).

On a terminal a live line shows the step, a spinner, tokens and cost; in a log (CI) a plain
line per step. ``flow run``, ``flow resume`` and ``flow compact`` share them::

    reporter = ConsoleReporter(live=sys.stderr.isatty(), verbose=False)
    outcome = resume_run(path, RunOptions(reporter=reporter))
    return report_outcome(outcome.run, outcome.path, outcome.exit_code, as_json=False)
"""

from __future__ import annotations

import dataclasses
import textwrap
import time
from pathlib import Path
from typing import Any

from ..base import clock
from ..base.paths import display_path
from ..base.wording import count
from ..progress.model import Run, Usage
from ..providers.provider import Request
from ..run.events import Reporter
from .app import err, out, print_json


class Countdown:
    """A status line that counts down to a moment; rich renders it afresh at each refresh."""

    def __init__(self, template: str, until: float) -> None:
        self.template = template
        self.until = until

    def __rich__(self) -> str:
        left = max(0.0, self.until - clock.monotonic())
        return self.template.format(left=f"{left:.0f}s")


class _Generating:
    """The status line while a reply streams: tokens so far, their rate and the text's tail;
    rich renders it afresh at each refresh, so a token costs a count, not a redraw."""

    def __init__(self, head: str, usage: str) -> None:
        self.head = head
        self.usage = usage
        self.tokens = 0
        self.first: float | None = None
        self.last = 0.0
        self.tail = ""

    def add(self, delta: str) -> None:
        """One piece of reply text arrived."""
        now = time.monotonic()
        if self.first is None:
            self.first = now
        self.last = now
        self.tokens += 1
        self.tail = (self.tail + delta)[-200:]

    def rate(self) -> float | None:
        """Tokens per second since the first one (None until two have come)."""
        if self.first is None or self.tokens < 2 or self.last <= self.first:
            return None
        return (self.tokens - 1) / (self.last - self.first)

    def __rich__(self) -> str:
        if not self.tokens:
            return f"{self.head} · waiting for the first token · {self.usage}"
        rate = self.rate()
        per = f" · {rate:.1f} tokens/s" if rate is not None else ""
        tail = " ".join(self.tail.split())[-48:]
        return f"{self.head} · {count(self.tokens, 'token')}{per} · {self.usage} · …{tail}"


class ConsoleReporter(Reporter):
    """Progress on stderr: on a terminal, a live line (step i of n, a spinner, tokens and
    cost) and a line per step and tool; without one (CI logs), a plain line as each step
    starts and ends, so a log shows where a run is without ``-v``."""

    def __init__(self, *, live: bool, verbose: bool = False, quiet_dry_run: bool = False) -> None:
        self.live = live
        self.verbose = verbose
        #: Print every request in full (the ``echo`` dry run shows what would be sent) unless
        #: ``quiet_dry_run`` (``--json`` keeps stdout and stderr for the document).
        self.show_requests = False
        self._quiet_dry_run = quiet_dry_run
        self._status: Any = None
        self._step = ""
        self._usage = Usage()
        self._step_began = (0.0, Usage())
        #: The reply streaming now (None between replies).
        self._generating: _Generating | None = None
        if live:
            from ..base.printing import console

            self._console = console(stderr=True)

    def _show(self, what: Any) -> None:
        if not self.live:
            return
        if not isinstance(what, str):
            line: Any = what
        else:
            line = f"{self._step} · {what} · {self._usage_text(self._usage)}"
        if self._status is None:
            self._status = self._console.status(line)
            self._status.start()
        else:
            self._status.update(line)

    @staticmethod
    def _usage_text(usage: Usage) -> str:
        # A model with no price costs nothing as counted, which is not $0 (docs/spec.md 5.4).
        cost = f" · ${usage.cost_usd:.4f}" if usage.cost_usd else ""
        return f"{usage.total_tokens:,} tokens{cost}"

    def _print(self, text: str) -> None:
        if self.live:
            self._console.print(text, markup=False, highlight=False)
        else:
            err(text)

    def _fit(self, text: str, indent: int) -> str:
        """``text`` cut at a word boundary to fit the terminal's width (whole in a log)."""
        if not self.live:
            return text
        width = max(20, self._console.width - indent)
        return textwrap.shorten(text, width=width, placeholder=" …") if len(text) > width else text

    def dry_run(self) -> None:
        self.show_requests = not self._quiet_dry_run

    def run_started(self, run_usage: Usage) -> None:
        # A resumed run's totals carry on from its earlier attempts.
        self._usage = run_usage

    def notice(self, text: str) -> None:
        self._print(f"flow: {text}")

    def step_started(
        self, step_id: str, title: str, index: int, total: int, agent: str | None = None
    ) -> None:
        self._step = f"step {index}/{total} {title}"
        self._step_began = (time.monotonic(), dataclasses.replace(self._usage))
        if self.live or self.verbose:
            self._print(f"▶ {self._step}")
        else:
            err(f"flow: {self._step}: started")
        self._show("starting")

    def step_finished(self, step_id: str, status: str) -> None:
        began, usage = self._step_began
        seconds = time.monotonic() - began
        used = Usage(
            input_tokens=self._usage.input_tokens - usage.input_tokens,
            output_tokens=self._usage.output_tokens - usage.output_tokens,
            cost_usd=self._usage.cost_usd - usage.cost_usd,
        )
        line = f"{self._step}: {status} in {seconds:.1f}s · {self._usage_text(used)}"
        if self.live or self.verbose:
            self._print(f"■ {line}")
        else:
            err(f"flow: {line}")

    def model_call(self, step_id: str, turn: int, request: Request) -> None:
        if self.show_requests:
            from ..providers.echo import format_request

            self._print(f"--- request: step {step_id}, turn {turn} ---\n{format_request(request)}")
        self._generating = _Generating(f"{self._step} · turn {turn}", self._usage_text(self._usage))
        self._show(self._generating)

    def text(self, delta: str) -> None:
        shown = self._generating
        if not self.live or shown is None:
            return
        if not shown.tokens:  # after a retry's countdown the line shows the stream again
            self._show(shown)
        shown.add(delta)

    def model_reply(self, step_id: str, usage: Usage, run_usage: Usage) -> None:
        self._usage = run_usage
        done, self._generating = self._generating, None
        if done is not None and self.live and (rate := done.rate()) is not None:
            tokens = usage.output_tokens or done.tokens
            self._print(f"  · reply: {count(tokens, 'token')} at {rate:.1f} tokens/s")
        self._show("reply recorded")

    def tool_started(self, name: str, arguments: str, call_id: str = "") -> None:
        self._show(f"running {name}")
        if self.verbose:
            self._print(self._fit(f"  → {name} {arguments}", 0))

    def tool_finished(self, name: str, is_error: bool, summary: str, call_id: str = "") -> None:
        if self.live or self.verbose:
            mark = "✗" if is_error else "✓"
            self._print(self._fit(f"  {mark} {name}: {summary}", 0))

    def retry(self, attempt: int, delay: float, message: str) -> None:
        if self._generating is not None:  # the reply streams again from its start
            self._generating = _Generating(self._generating.head, self._generating.usage)
        self._print(f"flow: provider error, retry {attempt} in {delay:.1f}s: {message}")
        self._show(
            Countdown(
                f"{self._step} · retry {attempt} in {{left}} · {message}", clock.monotonic() + delay
            )
        )

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def report_outcome(run: Run, path: Path, exit_code: int, as_json: bool) -> int:
    """How a run ended, on stdout (``--json``: its summary document) or stderr, and what to
    do next; returns ``exit_code``."""
    from ..api import answer_location, approval_lines, run_summary

    path = Path(display_path(path))
    if as_json:
        data = run_summary(run, path)
        data["exit_code"] = exit_code
        print_json(data)
        return exit_code
    s = run_summary(run, path)
    cost = f", ${run.usage.cost_usd:.4f}" if run.usage.cost_usd else ""
    counts = f"{s['steps_done']}/{s['steps_total']} steps, {run.usage.total_tokens:,} tokens{cost}"
    if run.status == "completed":
        out(f"completed: {counts} — {path}")
    else:
        reason = f" ({run.reason})" if run.reason else ""
        err(f"{run.status}{reason}: {counts}.")
        if run.status == "failed" and run.last_error is not None:
            err(f"Cause: {run.last_error.message}")
        if run.status == "interrupted":
            err("Progress saved.")
        if run.status == "awaiting_input":
            err(f"Write the answer at {answer_location(path)}, then resume.")
            err(f"Or answer with: flow answer {path} --text TEXT")
        if run.status == "awaiting_approval":
            for line in approval_lines(run, path):
                err(line)
        if run.status == "suspended":
            err(f"The provider's window opens at {run.until}.")
            err(f"Continue then with: flow resume --wait {path}")
        else:
            err(f"Resume with: flow resume {path}")
    if run.worktree is not None:
        err(
            f"Worktree: {run.worktree.path} (branch {run.worktree.branch}). "
            f"See the changes with: flow review {path}"
        )
    return exit_code
