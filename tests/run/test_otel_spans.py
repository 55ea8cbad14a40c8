"""The spans a run's records make (promptflow_resume/otel/spans.py, docs/spec.md 13): ids
derived from the records, each entry in the attempt it was recorded in, a compaction and
retries visible, a call without a result an error, and a run from before format 7 timed by
its steps."""

from __future__ import annotations

from promptflow_resume.base.traceids import span_id, trace_id_for
from promptflow_resume.otel.otlpjson import request_json
from promptflow_resume.otel.spans import run_spans
from promptflow_resume.progress.entry import EntryMeta
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Attempt, Entry, Run, StepState, TraceRef, Usage

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _at(second: int, ms: int = 0) -> str:
    return f"2026-11-21T23:25:{second:02d}.{ms:03d}Z"


def _two_attempts() -> Run:
    run = example_run()
    run.trace = TraceRef(id=TRACE, parent=f"00-{'ab' * 16}-{'cd' * 8}-01")
    reply = EntryMeta(model="gpt-4o-mini", tokens=(100, 10, 0), cost=0.001, finish="tool_calls")
    run.transcript = [
        Entry(1, "system", "Be brief.", meta=EntryMeta(at=_at(30))),
        Entry(2, "user", "Inspect.", step="inspect", meta=EntryMeta(at=_at(30, 5))),
        Entry(3, "assistant", "", step="inspect", meta=_with(reply, _at(31), 900, retries=2)),
        Entry(
            4,
            "tool_call",
            "{}",
            step="inspect",
            call_id="c1",
            tool="git_log",
            meta=EntryMeta(at=_at(31)),
        ),
        Entry(
            5,
            "tool_result",
            "log",
            step="inspect",
            call_id="c1",
            tool="git_log",
            meta=EntryMeta(at=_at(32), ms=400, kind="command"),
        ),
        Entry(
            6,
            "compaction",
            "summary",
            step="inspect",
            covers=(2, 5),
            meta=EntryMeta(at=_at(33), ms=700, model="gpt-4o-mini", tokens=(50, 5, 0), cost=0.0001),
        ),
        # The second attempt: the run went on after a stop.
        Entry(7, "assistant", "", step="inspect", meta=_with(reply, _at(45), 300)),
        Entry(
            8,
            "tool_call",
            "{}",
            step="inspect",
            call_id="c2",
            tool="notes/read",
            meta=EntryMeta(at=_at(45)),
        ),
    ]
    run.steps = {"inspect": StepState(status="running", started="2026-11-21T23:25:30Z")}
    run.attempts = [
        Attempt(
            n=1,
            started="2026-11-21T23:25:30Z",
            ended="2026-11-21T23:25:34Z",
            status="interrupted",
            usage=Usage(input_tokens=150),
        ),
        Attempt(
            n=2,
            started="2026-11-21T23:25:44Z",
            ended="2026-11-21T23:25:46Z",
            status="failed",
            reason="boom",
        ),
    ]
    return run


def _with(meta: EntryMeta, at: str, ms: int, retries: int | None = None) -> EntryMeta:
    return EntryMeta(
        at=at,
        ms=ms,
        model=meta.model,
        tokens=meta.tokens,
        cost=meta.cost,
        finish=meta.finish,
        retries=retries,
    )


def test_spans_are_placed_by_attempt_with_derived_ids_and_links() -> None:
    spans = run_spans(_two_attempts())
    by_name = [(s.name, s.attempt) for s in spans]
    assert by_name == [
        ("invoke_agent release-notes", 1),
        ("step inspect", 1),
        ("chat gpt-4o-mini", 1),
        ("execute_tool git_log", 1),
        ("compaction", 1),
        ("invoke_agent release-notes", 2),
        ("step inspect", 2),
        ("chat gpt-4o-mini", 2),
        ("execute_tool notes/read", 2),
    ]
    first, second = spans[0], spans[5]
    assert first.span_id == span_id(TRACE, "attempt/1") and first.parent_span_id is None
    assert [(link.trace_id, link.span_id) for link in first.links] == [("ab" * 16, "cd" * 8)]
    assert [(link.span_id, link.attributes) for link in second.links] == [
        (first.span_id, {"flow.link": "resumes"})
    ]
    assert second.status == "error" and second.status_message == "boom"
    assert spans[1].span_id == span_id(TRACE, "step/1/inspect")
    assert spans[2].parent_span_id == spans[1].span_id
    assert spans[3].span_id == span_id(TRACE, "call/c1")


def test_calls_carry_their_usage_retries_compaction_and_times() -> None:
    spans = run_spans(_two_attempts())
    chat, tool, compaction = spans[2], spans[3], spans[4]
    assert chat.attributes["gen_ai.usage.input_tokens"] == 100
    assert chat.attributes["flow.retries"] == 2
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert chat.end_ns - chat.start_ns == 900_000_000
    assert tool.attributes["flow.tool.kind"] == "command"
    assert tool.end_ns - tool.start_ns == 400_000_000
    assert compaction.attributes["flow.compaction.covers"] == "2-5"
    assert spans[0].attributes["flow.compactions"] == 1
    unanswered = spans[8]
    assert unanswered.status == "error" and unanswered.status_message == "no result recorded"


def test_content_only_with_a_redactor() -> None:
    run = _two_attempts()
    run.transcript[4].content = "secret-value here"
    plain = run_spans(run)
    assert all("gen_ai.tool.call.result" not in s.attributes for s in plain)
    shown = run_spans(run, redact=lambda text: text.replace("secret-value", "[REDACTED]"))
    assert shown[3].attributes["gen_ai.tool.call.result"] == "[REDACTED] here"


def test_a_run_from_before_format_7_gets_its_derived_trace_and_step_times() -> None:
    run = example_run()  # no trace, no entry times
    spans = run_spans(run)
    trace = trace_id_for(run.run_id)
    assert {s.trace_id for s in spans} == {trace}
    steps = [s for s in spans if s.name.startswith("step ")]
    assert [s.name for s in steps] == ["step inspect", "step report"]
    document = request_json(spans, {"service.name": "flow"}, "0")
    sent = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["spanId"] for s in sent] == [s.span_id for s in spans]
    assert run_spans(run) == spans  # the same records make the same spans


def test_an_attempt_resumed_within_the_second_its_first_stopped_holds_only_its_entries() -> None:
    run = _two_attempts()
    # The first attempt ended, and the second began, in the second of entries 5 and 6: by
    # time alone those two would be the second attempt's; its first entry id says they are not.
    run.attempts[0] = Attempt(n=1, started="2026-11-21T23:25:30Z", first_entry=1)
    run.attempts[1] = Attempt(n=2, started="2026-11-21T23:25:32Z", first_entry=7)
    placed = [(s.name, s.attempt) for s in run_spans(run)]
    assert ("execute_tool git_log", 1) in placed and ("compaction", 1) in placed
    assert [name for name, n in placed if n == 2] == [
        "invoke_agent release-notes",
        "step inspect",
        "chat gpt-4o-mini",
        "execute_tool notes/read",
    ]


def test_a_call_re_run_on_resume_has_its_span_in_the_attempt_that_ran_it() -> None:
    # Attempt 1 recorded the call's start and stopped (a crash); attempt 2 ran the idempotent
    # call again and recorded its result.
    run = _two_attempts()
    del run.transcript[6:]
    run.transcript += [
        Entry(7, "assistant", "", step="inspect", meta=EntryMeta(at=_at(33, 500))),
        Entry(
            8, "tool_call", "{}", step="inspect", call_id="c2", tool="notes/read",
            meta=EntryMeta(at=_at(33, 600)),
        ),
        Entry(
            9, "tool_result", "notes", step="inspect", call_id="c2", tool="notes/read",
            meta=EntryMeta(at=_at(45, 200), ms=150, kind="command"),
        ),
    ]  # fmt: skip
    run.attempts[0].first_entry, run.attempts[1].first_entry = 1, 9
    spans = run_spans(run)
    [call] = [s for s in spans if s.name == "execute_tool notes/read"]
    assert call.attempt == 2 and call.span_id == span_id(TRACE, "call/c2")
    assert call.parent_span_id == span_id(TRACE, "step/2/inspect")
    assert (call.status, call.closed) == ("unset", True)
    assert call.end_ns - call.start_ns == 150_000_000
    # Every call of the run has exactly one span.
    calls = [e.call_id for e in run.transcript if e.role == "tool_call"]
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in spans if s.kind == "internal"
                  and s.name.startswith("execute_tool")) == sorted(calls)  # fmt: skip
