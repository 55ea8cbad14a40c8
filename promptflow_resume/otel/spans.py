"""The spans of one run, made from its progress file's records alone (docs/spec.md 13).

Both the live path (``live.OtelReporter``) and ``flow export otel`` call ``run_spans``, so a
run's spans have the same ids, parents, names, times and attributes whichever made them:

- one ``invoke_agent`` span per attempt, all in the run's trace (``trace.id``); an attempt
  after the first links to the one before, the first to the context it was started under;
- under it a span per step the attempt worked on (``step <id>``);
- under a step a ``chat`` span per model reply, an ``execute_tool`` span per tool call and a
  ``compaction`` span per compaction summary, timed by the entries' ``at`` and ``ms``.

Span ids are derived from the trace id and the record (``base.traceids``). Attribute names
follow the OpenTelemetry GenAI semantic conventions; flow's own are under ``flow.``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ..base.clock import parse_iso
from ..base.traceids import parse_traceparent, span_id, trace_id_for
from ..progress.model import Attempt, Entry, Run

AttrValue = str | int | float | bool | list[str]

#: The standard switch that lets spans carry message content (off unless ``true``).
CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Content in an attribute is cut to this many characters.
CONTENT_CHARS = 4096
#: Attempt statuses that end an attempt's span with status ERROR.
ERROR_STATUSES = frozenset({"failed", "timeout", "budget_exhausted", "needs_review"})

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass
class SpanLink:
    """A link to a span of this trace or another."""

    trace_id: str
    span_id: str
    attributes: dict[str, AttrValue] = field(default_factory=dict)


@dataclass
class SpanRecord:
    """One span, independent of any OpenTelemetry package (``sdk`` and ``otlpjson`` write it)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    #: ``internal`` or ``client``.
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue] = field(default_factory=dict)
    #: ``unset``, ``ok`` or ``error``, and the error's description.
    status: str = "unset"
    status_message: str = ""
    links: list[SpanLink] = field(default_factory=list)
    #: The attempt the span belongs to (not sent): the live path sends its own attempt's.
    attempt: int = 0
    #: False when the record of its end is not there yet (a running attempt or step, a tool
    #: call without a result); the live path sends such a span only when the attempt stops.
    closed: bool = True


def ns_of(text: str) -> int:
    """A recorded timestamp as nanoseconds since the epoch."""
    moment = parse_iso(text)
    return ((moment - _EPOCH) // timedelta(microseconds=1)) * 1000


def capture_content() -> bool:
    """True when the standard switch asks for message content in spans."""
    return os.environ.get(CAPTURE_VARIABLE, "").strip().lower() in ("true", "1", "yes")


@dataclass
class _Context:
    run: Run
    trace: str
    progress: Path | None
    redact: Callable[[str], str] | None
    #: Each entry's end time (ns) and the attempt it belongs to.
    ends: dict[int, int]
    attempt_of: dict[int, int]
    #: Each tool call's result entry (by the call's entry id), and each result's call.
    result_of: dict[int, Entry] = field(default_factory=dict)
    call_of: dict[int, Entry] = field(default_factory=dict)


def run_spans(
    run: Run, progress: Path | None = None, *, redact: Callable[[str], str] | None = None
) -> list[SpanRecord]:
    """Every span of ``run``, parents before children, in the order of the records.

    ``progress`` is the run's file (to find child runs' files); ``redact`` is applied to
    message content, which is included only when ``redact`` is given (the capture switch).
    """
    trace = run.trace_id()
    attempts = run.attempts or [
        Attempt(n=1, started=run.created, ended=run.updated, status=run.status)
    ]
    ctx = _Context(run, trace, progress, redact, {}, {})
    _place_entries(ctx, attempts)
    spans: list[SpanRecord] = []
    for index, attempt in enumerate(attempts):
        spans.extend(_attempt_spans(ctx, attempt, attempts[index - 1] if index else None))
    return spans


def _place_entries(ctx: _Context, attempts: list[Attempt]) -> None:
    """Each entry's time, and the attempt it was recorded in: by the attempt's first entry id,
    or for files without one by time (an entry without a time takes the time of the one
    before it, or its step's start)."""
    starts = [(ns_of(a.started), a.n, a.first_entry) for a in attempts]
    last = ns_of(ctx.run.created)
    for entry in ctx.run.transcript:
        meta = entry.meta
        if meta is not None and meta.at is not None:
            at = ns_of(meta.at)
        else:
            step = ctx.run.steps.get(entry.step or "")
            at = max(last, ns_of(step.started)) if step and step.started else last
        last = at
        ctx.ends[entry.id] = at
        n = starts[0][1]
        for start, number, first in starts:
            # Recorded attempt starts are whole seconds: by time, an entry in that second is
            # theirs, though the attempt before may have written it in that second too.
            if (first <= entry.id) if first is not None else (start <= at):
                n = number
        ctx.attempt_of[entry.id] = n
    _pair_calls(ctx)


def _pair_calls(ctx: _Context) -> None:
    """Each tool call with the result recorded for it (the first result with its call id after
    it): a call re-run on resume has its result in a later attempt than its start."""
    waiting: dict[str, Entry] = {}
    for entry in ctx.run.transcript:
        if entry.role == "tool_call" and entry.call_id:
            waiting[entry.call_id] = entry
        elif entry.role == "tool_result" and entry.call_id in waiting:
            call = waiting.pop(entry.call_id)
            ctx.result_of[call.id] = entry
            ctx.call_of[entry.id] = call


def _start(ctx: _Context, entry: Entry) -> int:
    """When the call that made ``entry`` began: its time less its duration, and never before
    the entry before it (times are cut to milliseconds, so the two can cross by one)."""
    ms = entry.meta.ms if entry.meta is not None and entry.meta.ms is not None else 0
    before = ctx.ends.get(entry.id - 1, 0)
    return min(ctx.ends[entry.id], max(before, ctx.ends[entry.id] - ms * 1_000_000))


def _attempt_spans(ctx: _Context, attempt: Attempt, before: Attempt | None) -> list[SpanRecord]:
    run, trace = ctx.run, ctx.trace
    mine = [e for e in run.transcript if ctx.attempt_of[e.id] == attempt.n]
    root_id = span_id(trace, f"attempt/{attempt.n}")
    start = ns_of(attempt.started)
    ended = attempt.ended is not None
    end = ns_of(attempt.ended) if attempt.ended else start
    children: list[SpanRecord] = []
    by_step: dict[str, list[Entry]] = {}
    for entry in mine:
        if entry.step is not None:
            by_step.setdefault(entry.step, []).append(entry)
    for step_id, entries in by_step.items():
        children.extend(_step_spans(ctx, attempt.n, root_id, step_id, entries))
    for child in children:
        start, end = min(start, child.start_ns), max(end, child.end_ns)
    name = run.title()
    attributes: dict[str, AttrValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.agent.id": run.run_id,
        "gen_ai.conversation.id": run.run_id,
        "gen_ai.provider.name": run.config.provider,
        "flow.run.id": run.run_id,
        "flow.attempt": attempt.n,
        "flow.status": attempt.status or "running",
        "gen_ai.usage.input_tokens": attempt.usage.input_tokens,
        "gen_ai.usage.output_tokens": attempt.usage.output_tokens,
        "flow.usage.cached_tokens": attempt.usage.cached_tokens,
        "flow.usage.cost_usd": round(attempt.usage.cost_usd, 6),
        "flow.usage.turns": attempt.usage.turns,
    }
    model = attempt.model or run.config.model
    if model:
        attributes["gen_ai.request.model"] = model
    if attempt.reason:
        attributes["flow.reason"] = attempt.reason
    compactions = sum(1 for e in mine if e.role == "compaction")
    if compactions:
        attributes["flow.compactions"] = compactions
    links: list[SpanLink] = []
    if before is not None:
        links.append(
            SpanLink(trace, span_id(trace, f"attempt/{before.n}"), {"flow.link": "resumes"})
        )
    else:
        links.extend(_origin_links(run))
    root = SpanRecord(
        trace_id=trace,
        span_id=root_id,
        parent_span_id=None,
        name=f"invoke_agent {name}",
        kind="internal",
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        status="error" if attempt.status in ERROR_STATUSES else "unset",
        status_message=(attempt.reason or attempt.status or "")
        if attempt.status in ERROR_STATUSES
        else "",
        links=links,
        attempt=attempt.n,
        closed=ended,
    )
    return [root, *children]


def _origin_links(run: Run) -> list[SpanLink]:
    """The first attempt's links: the context it started under (a batch's), and for a
    subagent's run the parent run's tool call."""
    links: list[SpanLink] = []
    parsed = parse_traceparent(run.trace.parent if run.trace is not None else None)
    if parsed is not None:
        links.append(SpanLink(parsed[0], parsed[1], {"flow.link": "started_by"}))
    parent = run.parent or {}
    if parent.get("kind") == "agent" and parent.get("run_id") and parent.get("call"):
        parent_trace = trace_id_for(parent["run_id"])
        links.append(
            SpanLink(
                parent_trace,
                span_id(parent_trace, f"call/{parent['call']}"),
                {"flow.link": "parent_call"},
            )
        )
    return links


def _step_spans(
    ctx: _Context, n: int, root_id: str, step_id: str, entries: list[Entry]
) -> list[SpanRecord]:
    run, trace = ctx.run, ctx.trace
    state = run.steps.get(step_id)
    sid = span_id(trace, f"step/{n}/{step_id}")
    children: list[SpanRecord] = []
    for entry in entries:
        if entry.role == "assistant":
            children.append(_chat_span(ctx, n, sid, entry))
        elif entry.role == "compaction":
            children.append(_compaction_span(ctx, n, sid, entry))
        elif entry.role == "tool_call":
            result = ctx.result_of.get(entry.id)
            # A call whose result a later attempt recorded (re-run on resume) is that
            # attempt's: it ran there.
            if result is None or ctx.attempt_of[result.id] == n:
                children.append(_tool_span(ctx, n, sid, entry, result))
        elif entry.role == "tool_result":
            call = ctx.call_of.get(entry.id)
            if call is not None and ctx.attempt_of[call.id] != n:
                children.append(_tool_span(ctx, n, sid, call, entry))
    start = min(ctx.ends[e.id] for e in entries)
    end = max(ctx.ends[e.id] for e in entries)
    for child in children:
        start, end = min(start, child.start_ns), max(end, child.end_ns)
    finished_here = (
        state is not None
        and state.finished is not None
        and state.status in ("completed", "failed", "skipped")
        and ctx.attempt_of[entries[-1].id] == n
        and entries[-1].id == _last_entry_of(run, step_id)
    )
    status = state.status if state is not None and finished_here else "running"
    order = list(run.workflow.steps) or list(run.steps)
    attributes: dict[str, AttrValue] = {
        "flow.step.id": step_id,
        "flow.step.status": status if finished_here else "stopped",
    }
    if step_id in order:
        attributes["flow.step.index"] = order.index(step_id) + 1
    attempt = next((a for a in run.attempts if a.n == n), None)
    step = SpanRecord(
        trace_id=trace,
        span_id=sid,
        parent_span_id=root_id,
        name=f"step {step_id}",
        kind="internal",
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        status="error" if finished_here and status == "failed" else "unset",
        attempt=n,
        closed=finished_here or (attempt is not None and attempt.ended is not None),
    )
    return [step, *children]


def _last_entry_of(run: Run, step_id: str) -> int:
    return max((e.id for e in run.transcript if e.step == step_id), default=0)


def _usage_attributes(meta_tokens: tuple[int, int, int] | None) -> dict[str, AttrValue]:
    if meta_tokens is None:
        return {}
    return {
        "gen_ai.usage.input_tokens": meta_tokens[0],
        "gen_ai.usage.output_tokens": meta_tokens[1],
        "gen_ai.usage.cache_read.input_tokens": meta_tokens[2],
    }


def _chat_span(ctx: _Context, n: int, parent: str, entry: Entry) -> SpanRecord:
    run, meta = ctx.run, entry.meta
    model = (meta.model if meta is not None else None) or run.config.model or ""
    attributes: dict[str, AttrValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": run.config.provider,
        "flow.entry": entry.id,
    }
    if model:
        attributes["gen_ai.request.model"] = model
    if meta is not None:
        answered = meta.answered_by or meta.model
        if answered:
            attributes["gen_ai.response.model"] = answered
        attributes.update(_usage_attributes(meta.tokens))
        if meta.finish:
            attributes["gen_ai.response.finish_reasons"] = [meta.finish]
        if meta.cost is not None:
            attributes["flow.usage.cost_usd"] = meta.cost
        if meta.retries:
            attributes["flow.retries"] = meta.retries
        # A streamed reply: seconds to its first token, as the GenAI conventions measure
        # time to first token, and its output tokens per second.
        if meta.ttft is not None:
            attributes["gen_ai.response.time_to_first_token"] = meta.ttft / 1000
        if meta.tps is not None:
            attributes["flow.usage.output_tokens_per_second"] = meta.tps
    if ctx.redact is not None:
        calls = [
            {"type": "tool_call", "id": e.call_id, "name": e.tool}
            for e in ctx.run.transcript[entry.id : entry.id + 64]
            if e.role == "tool_call" and _same_reply(ctx.run, entry, e)
        ]
        parts = [{"type": "text", "content": _cut(ctx.redact(entry.content))}, *calls]
        attributes["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": parts}], ensure_ascii=False
        )
    return SpanRecord(
        trace_id=ctx.trace,
        span_id=span_id(ctx.trace, f"entry/{entry.id}"),
        parent_span_id=parent,
        name=f"chat {model}".strip(),
        kind="client",
        start_ns=_start(ctx, entry),
        end_ns=ctx.ends[entry.id],
        attributes=attributes,
        attempt=n,
    )


def _same_reply(run: Run, reply: Entry, call: Entry) -> bool:
    """True when ``call`` follows ``reply`` with only tool calls between (one reply's)."""
    return all(e.role == "tool_call" for e in run.transcript[reply.id : call.id - 1])


def _compaction_span(ctx: _Context, n: int, parent: str, entry: Entry) -> SpanRecord:
    meta = entry.meta
    attributes: dict[str, AttrValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": ctx.run.config.provider,
        "flow.entry": entry.id,
        "flow.compaction": True,
    }
    if entry.covers is not None:
        attributes["flow.compaction.covers"] = f"{entry.covers[0]}-{entry.covers[1]}"
    if meta is not None:
        if meta.model:
            attributes["gen_ai.request.model"] = meta.model
        attributes.update(_usage_attributes(meta.tokens))
        if meta.cost is not None:
            attributes["flow.usage.cost_usd"] = meta.cost
    return SpanRecord(
        trace_id=ctx.trace,
        span_id=span_id(ctx.trace, f"entry/{entry.id}"),
        parent_span_id=parent,
        name="compaction",
        kind="client",
        start_ns=_start(ctx, entry),
        end_ns=ctx.ends[entry.id],
        attributes=attributes,
        attempt=n,
    )


def _tool_span(ctx: _Context, n: int, parent: str, call: Entry, result: Entry | None) -> SpanRecord:
    tool = call.tool or ""
    meta = result.meta if result is not None else None
    kind = meta.kind if meta is not None else None
    attributes: dict[str, AttrValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call.call_id or "",
        "gen_ai.tool.type": "extension" if kind == "mcp" else "function",
        "flow.entry": call.id,
    }
    if kind:
        attributes["flow.tool.kind"] = kind
    if kind == "mcp":
        attributes["mcp.method.name"] = "tools/call"
        if meta is not None and meta.server:
            attributes["flow.mcp.server"] = meta.server
    links = _child_links(ctx, call, kind)
    if ctx.redact is not None:
        attributes["gen_ai.tool.call.arguments"] = _cut(ctx.redact(call.content))
        if result is not None:
            attributes["gen_ai.tool.call.result"] = _cut(ctx.redact(result.content))
    if result is not None:
        start, end = _start(ctx, result), ctx.ends[result.id]
    else:
        start = end = ctx.ends[call.id]
    return SpanRecord(
        trace_id=ctx.trace,
        span_id=span_id(ctx.trace, f"call/{call.call_id or call.id}"),
        parent_span_id=parent,
        name=f"execute_tool {tool}",
        kind="internal",
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        status="error" if result is None or result.is_error else "unset",
        status_message="no result recorded" if result is None else "",
        links=links,
        attempt=n,
        closed=result is not None,
    )


def _child_links(ctx: _Context, call: Entry, kind: str | None) -> list[SpanLink]:
    """A sub-workflow's or subagent's call links to its child run's first attempt."""
    if ctx.progress is None or kind not in ("workflow", "agent"):
        return []
    state = ctx.run.steps.get(call.step or "")
    if state is None:
        return []
    link = state.agents.get(call.call_id or "") if kind == "agent" else None
    child = link.child if link is not None else state.child
    if not child:
        return []
    child_trace = _trace_of_file(ctx.progress.parent / child)
    if child_trace is None:
        return []
    return [SpanLink(child_trace, span_id(child_trace, "attempt/1"), {"flow.link": "child_run"})]


def _trace_of_file(path: Path) -> str | None:
    """The trace id of the run in a child's progress file (None when it cannot be read)."""
    from ..base.errors import FlowError
    from ..progress.loading import load_progress

    try:
        child, _ = load_progress(path)
    except (FlowError, OSError):
        return None
    return child.trace_id()


def _cut(text: str) -> str:
    return text if len(text) <= CONTENT_CHARS else text[: CONTENT_CHARS - 1] + "…"
