"""OpenTelemetry traces of runs (docs/spec.md 13), checked against a real OTLP/HTTP receiver
that decodes what it gets with ``opentelemetry-proto`` (tests/support/otlp_receiver.py).

A live run of the README example sends the expected span tree, and ``flow export otel`` of its
progress file (to the endpoint, or to a file as OTLP/JSON) gives the same spans; a resumed run
adds an attempt to the same trace, linked; an MCP call carries its span's ``traceparent`` in
``_meta``; batch rows link to the batch's span, on local workers and on Ray.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_TELEMETRY
from promptflow_resume.base.traceids import span_id, trace_id_for
from promptflow_resume.progress import load_progress
from tests import support
from tests.support.flowproc import flow, flow_env
from tests.support.otlp_receiver import OtlpReceiver, SpanView, spans_of_json_lines, tree_text
from tests.support.trust import trusted

EXAMPLE = support.REPO / "workflows" / "triage-todos.prompt.md"
RECORDING = support.REPO / "workflows" / "triage-todos.recording.jsonl"
SERVER = support.SUPPORT / "mcp_servers.py"

#: The README example's span tree: names, in start order, indented by depth.
EXAMPLE_TREE = [
    "invoke_agent triage-todos",
    "  step collect",
    "    chat gpt-4o-mini",
    "    execute_tool find_todos",
    "    chat gpt-4o-mini",
    "    execute_tool read_file",
    "    chat gpt-4o-mini",
    "  step prioritise",
    "    chat gpt-4o-mini",
]


@pytest.fixture(scope="module")
def receiver() -> OtlpReceiver:
    with OtlpReceiver() as running:
        yield running


def _names(spans: list[SpanView]) -> list[str]:
    return [line.split(" [")[0] for line in tree_text(spans).splitlines()]


def _run_example(where: Path, receiver: OtlpReceiver, *extra: str, **env: str) -> Path:
    progress = where / "run" / "progress.md"
    done = flow(
        "run",
        str(EXAMPLE),
        "--provider",
        "replay",
        "--recording",
        str(RECORDING),
        "--new",
        "--progress",
        str(progress),
        # Run from the checkout, whose git repository must get no snapshot refs of tests.
        "--no-snapshots",
        *extra,
        cwd=support.REPO,
        env=flow_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, **env),
    )
    assert done.returncode in (0, 1), done.stderr
    return progress


def _shapes(spans: list[SpanView]) -> list[tuple[object, ...]]:
    return sorted(s.shape() for s in spans)


def test_a_live_run_sends_the_example_tree_and_its_export_is_the_same(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    progress = _run_example(tmp_path, receiver)
    run, _ = load_progress(progress)
    assert run.trace is not None and run.trace.id == trace_id_for(run.run_id)
    live = receiver.of_trace(run.trace.id)
    assert _names(live) == EXAMPLE_TREE, tree_text(live)
    root = next(s for s in live if not s.parent_span_id)
    assert root.span_id == span_id(run.trace.id, "attempt/1")
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.usage.input_tokens"] == run.usage.input_tokens
    assert root.resource["service.name"] == "flow"
    chats = [s for s in live if s.name.startswith("chat")]
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == run.usage.input_tokens
    assert sum(s.attributes["flow.usage.cost_usd"] for s in chats) == pytest.approx(
        run.usage.cost_usd
    )
    first = chats[0].attributes
    assert first["gen_ai.provider.name"] == "replay"
    assert first["gen_ai.request.model"] == "gpt-4o-mini"
    assert first["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert chats[0].kind == 3  # CLIENT
    grep = next(s for s in live if s.name == "execute_tool find_todos")
    assert grep.attributes["flow.tool.kind"] == "command"
    assert grep.attributes["gen_ai.tool.call.id"]
    assert "gen_ai.output.messages" not in first  # no content without the switch
    for span in live:  # children lie within their parents
        parent = next((p for p in live if p.span_id == span.parent_span_id), None)
        if parent is not None:
            assert parent.start_ns <= span.start_ns <= span.end_ns <= parent.end_ns

    receiver.clear()
    sent = flow("export", "otel", str(progress), "--endpoint", receiver.url, cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    assert f"exported 9 spans of 1 run to {receiver.url}/v1/traces" in sent.stdout
    assert _shapes(receiver.of_trace(run.trace.id)) == _shapes(live)

    out = tmp_path / "traces.jsonl"
    written = flow("export", "otel", str(progress), "--file", str(out), cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert _shapes(spans_of_json_lines(out.read_text(encoding="utf-8"))) == _shapes(live)


def test_message_content_is_sent_only_with_the_switch(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    progress = _run_example(
        tmp_path, receiver, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true"
    )
    run, _ = load_progress(progress)
    assert run.trace is not None
    live = receiver.of_trace(run.trace.id)
    chat = next(s for s in live if s.name.startswith("chat"))
    message = json.loads(chat.attributes["gen_ai.output.messages"])
    assert message[0]["role"] == "assistant"
    assert message[0]["parts"][1]["name"] == "find_todos"
    tool = next(s for s in live if s.name == "execute_tool read_file")
    assert "TODO" in tool.attributes["gen_ai.tool.call.result"]
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"])["path"]


def test_a_resumed_run_adds_a_linked_attempt_to_the_same_trace(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    progress = _run_example(tmp_path, receiver, "--max-turns", "2")
    run, _ = load_progress(progress)
    assert run.status == "budget_exhausted" and run.trace is not None
    resumed = flow(
        "resume",
        str(progress),
        "--max-turns",
        "12",
        "--no-snapshots",
        cwd=support.REPO,
        env=flow_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url),
    )
    assert resumed.returncode == 0, resumed.stderr
    trace = run.trace.id
    live = receiver.of_trace(trace)
    roots = sorted((s for s in live if not s.parent_span_id), key=lambda s: s.start_ns)
    assert [r.attributes["flow.attempt"] for r in roots] == [1, 2]
    assert roots[0].attributes["flow.status"] == "budget_exhausted"
    assert roots[0].status == 2  # ERROR
    assert roots[1].links == [(trace, roots[0].span_id, {"flow.link": "resumes"})]
    names = _names(live)
    assert names.count("  step collect") == 2  # the step went on in the second attempt
    assert names.count("    chat gpt-4o-mini") == 4
    receiver.clear()
    flow("export", "otel", str(progress), "--endpoint", receiver.url, cwd=tmp_path)
    assert _shapes(receiver.of_trace(trace)) == _shapes(live)
    status = json.loads(flow("status", str(progress), "--json", cwd=tmp_path).stdout)
    assert status["trace_id"] == trace


def test_a_sub_workflow_step_links_to_its_child_runs_trace(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    progress = tmp_path / "run" / "progress.md"
    done = flow(
        "run",
        str(support.REPO / "workflows" / "release-check.prompt.md"),
        "--recording",
        str(RECORDING),
        "--new",
        "--progress",
        str(progress),
        "--no-snapshots",
        cwd=support.REPO,
        env=flow_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url),
    )
    assert done.returncode == 0, done.stderr
    run, _ = load_progress(progress)
    child_path = progress.parent / str(run.steps["triage"].child)
    child, _ = load_progress(child_path)
    assert run.trace is not None and child.trace is not None
    assert child.trace.id != run.trace.id  # one trace per run
    parent_spans = receiver.of_trace(run.trace.id)
    assert _names(parent_spans) == [
        "invoke_agent release-check",
        "  step triage",
        "    execute_tool workflow",
    ]
    call = next(s for s in parent_spans if s.name == "execute_tool workflow")
    assert call.attributes["flow.tool.kind"] == "workflow"
    child_root = span_id(child.trace.id, "attempt/1")
    assert call.links == [(child.trace.id, child_root, {"flow.link": "child_run"})]
    # The child's own spans were sent too, when the parent's attempt stopped.
    assert _names(receiver.of_trace(child.trace.id)) == EXAMPLE_TREE


MCP_WORKFLOW = """---
description: Ask the notes server
provider: scripted
tools: ['notes/*']
---
You check the notes server.

## Step 1: Check
Ask the server.
"""


def _mcp_run(tmp_path: Path, tool: str, *, otel: bool = True, **env: str) -> Path:
    """Run a workflow whose scripted model calls the notes server's ``tool`` once."""
    where = tmp_path / "ws"
    (where / ".vscode").mkdir(parents=True)
    (where / "state").mkdir()
    (where / "ask.prompt.md").write_text(MCP_WORKFLOW, encoding="utf-8")
    script = {
        "replies": [{"content": "", "tool_calls": [{"name": tool, "arguments": {}}]}, "Done."]
    }
    (where / "ask.script.yaml").write_text(json.dumps(script), encoding="utf-8")
    server = {"command": sys.executable, "args": [str(SERVER), "state"], "env": dict(env)}
    config = {"servers": {"notes": server}}
    (where / ".vscode" / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
    trusted(where)
    progress = where / "run" / "progress.md"
    done = flow(
        "run",
        "ask.prompt.md",
        "--recording",
        "ask.script.yaml",
        "--new",
        "--progress",
        str(progress),
        *(["--otel"] if otel else []),
        cwd=where,
        env=flow_env(**env),
    )
    assert done.returncode == 0, done.stderr
    return progress


def test_an_mcp_call_carries_its_span_context_in_meta(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    progress = _mcp_run(tmp_path, "trace_meta", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
    run, _ = load_progress(progress)
    assert run.trace is not None
    result = next(e for e in run.transcript if e.role == "tool_result")
    live = receiver.of_trace(run.trace.id)
    tool = next(s for s in live if s.name == "execute_tool trace_meta")
    assert tool.attributes["flow.tool.kind"] == "mcp"
    assert tool.attributes["flow.mcp.server"] == "notes"
    assert tool.attributes["gen_ai.tool.type"] == "extension"
    assert tool.attributes["mcp.method.name"] == "tools/call"
    assert json.loads(result.content) == {"traceparent": f"00-{run.trace.id}-{tool.span_id}-01"}


def test_without_tracing_an_mcp_call_carries_no_trace_context(tmp_path: Path) -> None:
    progress = _mcp_run(tmp_path, "trace_meta", otel=False)
    run, _ = load_progress(progress)
    result = next(e for e in run.transcript if e.role == "tool_result")
    assert json.loads(result.content) == {}


def test_captured_content_is_redacted(tmp_path: Path, receiver: OtlpReceiver) -> None:
    # The server's ``leak`` tool answers with its token: a secret the spans must not carry.
    secret = "tok-planted-9e8d7c6b5a4f3"
    progress = _mcp_run(
        tmp_path,
        "leak",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
        NOTES_TOKEN=secret,
    )
    run, _ = load_progress(progress)
    assert run.trace is not None
    tool = next(s for s in receiver.of_trace(run.trace.id) if s.name == "execute_tool leak")
    shown = tool.attributes["gen_ai.tool.call.result"]
    assert "the token is" in shown and secret not in shown


def _batch(tmp_path: Path, receiver: OtlpReceiver, engine: str) -> list[SpanView]:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"folder": "workflows/examples/sample-app"}\n' * 2, encoding="utf-8")
    out = tmp_path / "batch"
    done = flow(
        "batch",
        str(EXAMPLE),
        "--data",
        str(rows),
        "--provider",
        "replay",
        "--recording",
        str(RECORDING),
        "--out",
        str(out),
        "--engine",
        engine,
        "--workers",
        "2",
        cwd=support.REPO,
        env=flow_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    batch = next(s for s in receiver.spans if s.attributes.get("flow.batch.id"))
    assert batch.attributes["flow.batch.rows"] == 2
    assert batch.attributes["flow.batch.engine"] == engine
    traces = []
    for progress in sorted(out.glob("rows/*/progress.md")):
        run, _ = load_progress(progress)
        assert run.trace is not None
        assert run.trace.parent == f"00-{batch.trace_id}-{batch.span_id}-01"
        spans = receiver.of_trace(run.trace.id)
        assert _names(spans) == EXAMPLE_TREE, tree_text(spans)
        root = next(s for s in spans if not s.parent_span_id)
        assert root.links == [(batch.trace_id, batch.span_id, {"flow.link": "started_by"})]
        traces.append(run.trace.id)
    assert len(set(traces)) == 2  # one trace per run
    return receiver.spans


def test_batch_rows_on_local_workers_link_to_the_batch(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    receiver.clear()
    _batch(tmp_path, receiver, "local")


@pytest.mark.slow
def test_batch_rows_on_ray_link_to_the_batch(tmp_path: Path, receiver: OtlpReceiver) -> None:
    pytest.importorskip("ray")
    receiver.clear()
    _batch(tmp_path, receiver, "ray")


def test_export_of_a_file_from_before_traces_derives_its_trace(tmp_path: Path) -> None:
    old = support.FIXTURES / "progress" / "valid"
    source = sorted(old.glob("*.md"))[0]
    copy = tmp_path / "progress.md"
    shutil.copyfile(source, copy)
    out = tmp_path / "trace.json"
    done = flow("export", "otel", str(copy), "--file", str(out), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    run, _ = load_progress(copy)
    assert summary["traces"] == [trace_id_for(run.run_id)]
    spans = spans_of_json_lines(out.read_text(encoding="utf-8"))
    assert spans and {s.trace_id for s in spans} == {trace_id_for(run.run_id)}
    status = json.loads(flow("status", str(copy), "--json", cwd=tmp_path).stdout)
    assert status["trace_id"] == trace_id_for(run.run_id)  # where to look it up
    assert copy.read_bytes() == source.read_bytes()  # read, never written


def test_export_to_an_endpoint_that_does_not_answer_exits_20(tmp_path: Path) -> None:
    progress = support.FIXTURES / "progress" / "valid"
    source = sorted(progress.glob("*.md"))[0]
    done = flow(
        "export",
        "otel",
        str(source),
        "--endpoint",
        "http://127.0.0.1:9",
        cwd=tmp_path,
        env=flow_env(OTEL_EXPORTER_OTLP_TIMEOUT="2"),
    )
    assert done.returncode == EXIT_TELEMETRY
    assert "did not take" in done.stderr and "Traceback" not in done.stderr


def test_export_of_an_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    done = flow("export", "jaeger", "p.md", cwd=tmp_path)
    assert done.returncode == 2 and "unknown format" in done.stderr
