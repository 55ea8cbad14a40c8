"""The event stream (``--events FILE``): a run's durable facts as JSON Lines (docs/spec.md 4.16).

One JSON object a line, each ``{"v": 1, "type": ..., "ts": ..., "seq": N, "run_id": ...}`` plus
the fields of its type, described by ``schemas/events.schema.json`` (``flow schema events``).

The stream is a view of what the engine records, not a second record: every event is written
by a ``Reporter`` hook the engine calls once the fact is saved in the progress file (a reply
with tool calls is told with its first call's start record, which is its save), and every
string passes through the redactor the run records with, so the stream carries no secret the
file does not. ``run_started`` is the first event of an attempt (what the engine tells before
it opens the run, such as resume decisions, follows it), ``run_finished`` the last, also when
the run is interrupted, fails, or stops for a person.

Usage::

    stream = EventStream.open("events.jsonl")
    options = RunOptions(reporter=Tee(ConsoleReporter(...), stream))
    ...
    stream.close_target()
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .base.clock import now_iso
from .base.errors import EXIT_BUG, FlowError, StorageError
from .base.redact import Redactor
from .progress.model import Approval, Run, Usage
from .providers.provider import Request
from .run.attempt import exit_code_for
from .run.events import Reporter

#: The version of the event format (``v`` of every event; spec 4.16).
EVENTS_VERSION = 1
#: The environment variable naming an events file when ``--events`` is not given.
EVENTS_VARIABLE = "FLOW_EVENTS"
#: Previews (tool arguments and results) are cut to this many characters.
PREVIEW_CHARS = 1000


def events_target(option: str | None) -> str | None:
    """Where events go: ``--events``, else ``$FLOW_EVENTS``, else nowhere (None)."""
    if option:
        return option
    return os.environ.get(EVENTS_VARIABLE) or None


def _usage(usage: Usage) -> dict[str, Any]:
    return dict(usage.to_dict())


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


class EventStream(Reporter):
    """Writes a run's events as JSON Lines to ``target`` (a file opened for appending, or
    stdout); ``fields`` go into every event (a batch's ``row``)."""

    def __init__(
        self, target: TextIO | int, *, owned: bool, fields: dict[str, Any] | None = None
    ) -> None:
        #: A text stream (stdout), or the file descriptor of a file opened for appending.
        self._target = target
        self._owned = owned
        self._fields = dict(fields or {})
        self._seq = 0
        self._run_id: str | None = None
        self._redactor = Redactor.from_environment()
        #: Events told before the run opened (resume notes): written right after run_started.
        self._early: list[dict[str, Any]] = []
        self._model: str | None = None
        #: The step the engine works on now: its tool calls are that step's.
        self._step: str | None = None

    @classmethod
    def open(
        cls, where: str, fields: dict[str, Any] | None = None, *, take_stdout: bool = False
    ) -> EventStream:
        """A stream to ``where``: ``-`` is stdout; a file is appended to (created, owner-only),
        so a resumed run continues the stream of its earlier attempts.

        With ``take_stdout`` (the command line), ``-`` keeps stdout for the events alone: the
        process's file descriptor 1 is pointed at stderr, so whatever else prints (the
        summary, ``--json``, a command a tool starts) cannot break a line of the stream."""
        if where == "-":
            if take_stdout:
                try:
                    fd = sys.stdout.fileno()
                except (AttributeError, OSError, ValueError):
                    return cls(sys.stdout, owned=False, fields=fields)
                sys.stdout.flush()
                kept = os.dup(fd)
                os.dup2(sys.stderr.fileno(), fd)
                return cls(kept, owned=True, fields=fields)
            return cls(sys.stdout, owned=False, fields=fields)
        path = Path(where)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as error:
            raise StorageError(
                f"cannot open the events file {where}: {error.strerror or error}.",
                path=path,
                hint="Give --events (or FLOW_EVENTS) a file in a folder you can write, "
                "or - for stdout.",
            ) from None
        return cls(fd, owned=True, fields=fields)

    # --- writing --------------------------------------------------------------------------

    def emit(self, kind: str, **fields: Any) -> None:
        """Write one event now (or, before ``run_started``, once it is written)."""
        event: dict[str, Any] = {"v": EVENTS_VERSION, "type": kind, "ts": now_iso()}
        event.update(self._fields)
        event.update(fields)
        if self._run_id is None and kind not in ("run_started", "batch_started", "batch_finished"):
            self._early.append(event)
            return
        self._write(event)

    def _write(self, fields: dict[str, Any]) -> None:
        self._seq += 1
        # The common fields first, in one order: a person reading the file finds them.
        event = {k: fields.pop(k) for k in ("v", "type", "ts")}
        event["seq"] = self._seq
        run_id = fields.pop("run_id", self._run_id)
        if run_id is not None:
            event["run_id"] = run_id
        event.update(fields)
        clean, _ = self._redactor.redact_value(event)
        self._put(json.dumps(clean, ensure_ascii=False, separators=(",", ":"), default=str))

    def _put(self, line: str) -> None:
        try:
            if isinstance(self._target, int):
                # One write per line on a file opened for appending: processes that share the
                # file (a batch's rows, a test session) never interleave within a line.
                data = (line + "\n").encode("utf-8")
                while data:  # a pipe (``-``) may take a long line in parts
                    data = data[os.write(self._target, data) :]
            else:
                self._target.write(line + "\n")
                self._target.flush()
        except (OSError, ValueError):
            # A reader that went away (a closed pipe) never stops the run it watches.
            pass

    def copy_line(self, line: str) -> None:
        """Write an event another stream already wrote (a batch row's), as it is."""
        self._put(line)

    def close_target(self) -> None:
        """Close the file (not stdout)."""
        if self._owned and isinstance(self._target, int):
            os.close(self._target)
            self._owned = False

    # --- the engine's hooks ---------------------------------------------------------------

    def run_opened(self, run: Run, progress: Path, redactor: Redactor) -> None:
        """``run_started``, then what was told before it."""
        self._redactor = redactor
        self._run_id = run.run_id
        attempt = len(run.attempts)
        self.emit(
            "run_started",
            run_id=run.run_id,
            progress=os.path.abspath(progress),
            workflow=os.path.abspath(progress.parent / run.workflow.path),
            attempt=attempt,
            resumed=attempt > 1,
        )
        early, self._early = self._early, []
        for event in early:
            self._write(event)

    def run_stopped(self, run: Run, error: BaseException | None) -> None:
        """``run_finished`` with the status saved, the exit code and the run's totals."""
        if isinstance(error, FlowError):
            code = error.exit_code
        elif error is not None:
            code = EXIT_BUG
        else:
            code = exit_code_for(run)
        done, total = run.step_counts()
        self.emit(
            "run_finished",
            status=run.status,
            reason=run.reason,
            exit_code=code,
            usage=_usage(run.usage),
            steps_done=done,
            steps_total=total,
        )
        self._early.clear()
        self._run_id = None

    def notice(self, text: str) -> None:
        """``notice``."""
        self.emit("notice", text=text)

    def step_started(
        self, step_id: str, title: str, index: int, total: int, agent: str | None = None
    ) -> None:
        """``step_started`` (with the step's agent in a handoff chain)."""
        self._step = step_id
        extra = {"agent": agent} if agent else {}
        self.emit("step_started", step=step_id, title=title, index=index, total=total, **extra)

    def step_finished(self, step_id: str, status: str) -> None:
        """``step_finished``."""
        self.emit("step_finished", step=step_id, status=status)

    def model_call(self, step_id: str, turn: int, request: Request) -> None:
        """``model_request``: the step's next turn is being sent."""
        self._model = request.model
        self._step = step_id
        self.emit(
            "model_request",
            step=step_id,
            turn=turn,
            model=request.model,
            messages=len(request.messages),
        )

    def model_reply(self, step_id: str, usage: Usage, run_usage: Usage) -> None:
        """``model_reply``: the reply is recorded; its usage and the run's total."""
        self.emit(
            "model_reply",
            step=step_id,
            model=self._model,
            usage=_usage(usage),
            run_usage=_usage(run_usage),
        )

    def model_refused(self, model: str, message: str) -> None:
        """``model_refused``."""
        self.emit("model_refused", model=model, message=message)

    def _in_step(self) -> dict[str, str]:
        return {"step": self._step} if self._step else {}

    def tool_started(self, name: str, arguments: str, call_id: str = "") -> None:
        """``tool_started``: the call's start record is saved."""
        self.emit(
            "tool_started",
            call_id=call_id,
            tool=name,
            **self._in_step(),
            arguments=_preview(arguments),
        )

    def tool_finished(self, name: str, is_error: bool, summary: str, call_id: str = "") -> None:
        """``tool_finished``: the result is recorded."""
        self.emit(
            "tool_finished",
            call_id=call_id,
            tool=name,
            **self._in_step(),
            status="error" if is_error else "ok",
            preview=_preview(summary),
        )

    def retry(self, attempt: int, delay: float, message: str) -> None:
        """``retry``: a transient provider error, retried after ``delay`` seconds."""
        self.emit("retry", attempt=attempt, delay_seconds=round(delay, 3), message=message)

    def compacted(self, step_id: str, first: int, last: int, tokens: int) -> None:
        """``compaction``."""
        self.emit("compaction", step=step_id, first_entry=first, last_entry=last, tokens=tokens)

    def approval_needed(self, calls: Sequence[Approval]) -> None:
        """``approval_needed``."""
        self.emit(
            "approval_needed",
            calls=[
                {"call_id": c.call_id, "tool": c.tool, "arguments": _preview(c.preview)}
                for c in calls
            ],
        )

    def question_asked(self, step_id: str, text: str) -> None:
        """``question_asked``."""
        self.emit("question_asked", step=step_id, question=text)

    def suspended(self, until: str, reason: str) -> None:
        """``suspended``."""
        self.emit("suspended", until=until, reason=reason)

    def hook_ran(self, hook: str, event: str, status: str, ms: int) -> None:
        """``hook``."""
        self.emit("hook", hook=hook, event=event, status=status, ms=ms)
