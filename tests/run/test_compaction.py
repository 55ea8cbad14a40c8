"""Context compaction: the ``compaction`` entry, the request view, and long runs that outgrow
a model's context window against a local OpenAI-compatible server that enforces one.

The server (``ProbeModel``) counts a request's tokens its own way (JSON length / 4, more than
flow's estimate) and answers the real OpenAI error, HTTP 400 ``context_length_exceeded``, to a
request over its limit. Its answers are a function of the request alone (the probes a request
shows, from tool calls or summaries), so a run killed and resumed, or replayed, is served
alike.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptflow_resume.api import RunOptions, StartRequest, compact_run, start_run
from promptflow_resume.base.errors import (
    EXIT_LOCKED,
    EXIT_NOT_FOUND,
    EXIT_PROVIDER,
    ProgressFormatError,
    WorkflowError,
)
from promptflow_resume.progress import ProgressStore, load_progress
from promptflow_resume.progress.digest import entry_digest
from promptflow_resume.progress.model import Entry, Run
from promptflow_resume.progress.parse import parse
from promptflow_resume.progress.render import render
from promptflow_resume.providers.context import context_window
from promptflow_resume.run.compaction import plan_compaction
from promptflow_resume.run.conversation import RequestView, request_view, to_messages
from promptflow_resume.workflow import load_workflow
from tests import support
from tests.support.flowproc import flow, flow_env
from tests.support.providers_server import (
    Canned,
    ModelServer,
    Received,
    anthropic_error,
    anthropic_message,
    error_body,
    llamacpp_context_exceeded,
    ollama_context_exceeded,
    openai_completion,
    openai_tool_call,
    openai_usage,
)
from tests.support.slow import sweep

LIMIT = 3000
FILLER = "lorem ipsum dolor sit amet " * 8
WORKFLOW = """---
description: A long probe loop
provider: openai
model: local-model
{extra}retry:
  max_attempts: 2
  initial_delay: 0.01
  max_delay: 0.05
commands:
  probe:
    description: Print one probe's line
    argv: ["echo", "probe {{n}}: {filler}"]
    idempotent: true
    parameters:
      n: {{type: string}}
tools: [probe]
---
You are a patient prober.

## Step 1: Loop
Call the probe tool until you are done.

## Step 2: Wrap
Say what you found.
"""


def server_tokens(body: dict[str, object]) -> int:
    """The server's count: its JSON length / 4 (more than flow's estimate, as a real
    tokenizer may be)."""
    return len(json.dumps(body.get("messages"))) // 4 + len(json.dumps(body.get("tools"))) // 4


_DONE = re.compile(r"probes done: ([0-9]+)")
_ARG = re.compile(r'"n": "([0-9]+)"')


@dataclass
class ProbeModel:
    """A model that calls ``probe`` ``turns`` times, then answers; it refuses requests over
    ``limit`` tokens as OpenAI does."""

    turns: int
    limit: int = LIMIT
    #: The refusal of a request over the limit (size, limit): OpenAI's unless given.
    refuse: Callable[[int, int], Canned] | None = None
    sizes: list[int] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    requests: list[list[dict[str, object]]] = field(default_factory=list)

    def __call__(self, received: Received) -> Canned:
        body = received.body
        if received.method == "GET":  # a server that reports no window (no /props)
            return Canned(status=404, body={"error": "not found"})
        size = server_tokens(body)
        self.sizes.append(size)
        messages = body["messages"]
        if size > self.limit:
            self.rejected.append(size)
            if self.refuse is not None:
                return self.refuse(size, self.limit)
            return Canned(
                status=400,
                body=error_body(
                    f"This model's maximum context length is {self.limit} tokens. However, "
                    f"your messages resulted in {size} tokens. Please reduce the length.",
                    type="invalid_request_error",
                    code="context_length_exceeded",
                ),
            )
        self.requests.append(messages)
        texts = [str(m.get("content") or "") for m in messages]
        for m in messages:
            for call in m.get("tool_calls") or ():
                texts.append(call["function"]["arguments"])
        done = max(
            (int(n) for text in texts for n in (*_DONE.findall(text), *_ARG.findall(text))),
            default=0,
        )
        usage = openai_usage(size, 12)
        if str(messages[0].get("content", "")).startswith("You compact"):
            self.summaries.append(texts[1])
            summary = f"Probes 1 to {done} ran and each printed its line; probes done: {done}."
            return Canned(body=openai_completion(summary, usage=usage))
        if any("Say what you found" in text for text in texts):
            return Canned(body=openai_completion("Every probe printed its line.", usage=usage))
        if done >= self.turns:
            return Canned(body=openai_completion("Done probing.", usage=usage))
        n = done + 1
        call = openai_tool_call(f"call_{n}", "probe", json.dumps({"n": str(n)}))
        return Canned(body=openai_completion(f"Probe {n} next.", [call], usage=usage))


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-for-local-server")
    for name in ("OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


def write_workflow(where: Path, extra: str = f"context_window: {LIMIT}\n") -> Path:
    path = where / "probe.prompt.md"
    path.write_text(WORKFLOW.format(extra=extra, filler=FILLER.strip()), encoding="utf-8")
    return path


def probe_results(run: Run) -> list[int]:
    """The probe numbers of the run's tool results, in order."""
    found = []
    for entry in run.transcript:
        if entry.role == "tool_result":
            match = re.search(r"probe ([0-9]+): lorem", entry.content)
            assert match, entry.content
            found.append(int(match.group(1)))
    return found


def assert_calls_never_split(requests: list[list[dict[str, object]]]) -> None:
    """Every tool message follows the assistant message that made its call."""
    for messages in requests:
        called: set[str] = set()
        for m in messages:
            for call in m.get("tool_calls") or ():  # type: ignore[attr-defined]
                called.add(call["id"])
            if m["role"] == "tool":
                assert m["tool_call_id"] in called, m


# --- the entry and the view ----------------------------------------------------------------


def _entries(*specs: tuple[str, str | None]) -> list[Entry]:
    out = []
    for i, (role, step) in enumerate(specs, start=1):
        extra = {}
        if role in ("tool_call", "tool_result"):
            extra = {"call_id": f"c{i if role == 'tool_call' else i - 1}", "tool": "probe"}
        out.append(Entry(id=i, role=role, content=f"{role} {i}", step=step, **extra))  # type: ignore[arg-type]
    return out


TURNS = [
    ("system", None),
    ("user", "a"),
    *[(r, "a") for _ in range(4) for r in ("assistant", "tool_call", "tool_result")],
    ("assistant", "a"),
    ("user", "b"),
    *[(r, "b") for _ in range(2) for r in ("assistant", "tool_call", "tool_result")],
]


def test_a_compaction_stands_for_what_it_covers_and_keeps_the_prompts() -> None:
    entries = _entries(*TURNS)  # 1 system, 2 prompt a, 3-14 turns, 15 answer, 16 prompt b ...
    entries.append(Entry(id=23, role="compaction", content="S1", step="b", covers=(3, 17)))
    view = [e.id for e in request_view(entries)]
    # The prompts (2, 16) stay; the summary stands where entry 17 stood.
    assert view == [1, 2, 16, 23, 18, 19, 20, 21, 22]
    messages = to_messages(entries)
    assert messages[3].role == "user" and messages[3].content.endswith("\n\nS1")
    assert "entries 3-17" in messages[3].content
    # It stands for the five replies 3, 6, 9, 12, 15 and 17 (the scripted provider counts them).
    assert messages[3].replaces_replies == 6
    # A later compaction may cover an earlier one.
    entries.append(Entry(id=24, role="compaction", content="S2", step="b", covers=(3, 20)))
    assert [e.id for e in request_view(entries)] == [1, 2, 16, 24, 21, 22]
    assert to_messages(entries)[3].replaces_replies == 7


def test_the_incremental_view_equals_the_whole_one() -> None:
    entries = _entries(*TURNS)
    view = RequestView()
    grown: list[Entry] = []
    for entry in [*entries[:14], Entry(id=0, role="compaction", content="S", covers=(3, 8))]:
        grown.append(entry)
        if entry.role == "compaction":
            entry.id = 15
        assert [e.id for e in view.update(grown)] == [e.id for e in request_view(grown)]
    assert [e.id for e in view.entries] == [1, 2, 15, 9, 10, 11, 12, 13, 14]


def test_a_compaction_entry_round_trips_and_old_digests_do_not_change() -> None:
    plain = Entry(id=3, role="assistant", content="hi", step="a")
    # The digest of an entry without ``covers`` is what it was before compaction existed.
    assert entry_digest(plain) == "7a6ebaebd82513ae"
    # (The saved files of every other test re-save byte-identical: test_progress_roundtrip.)
    originals = sorted((support.FIXTURES / "progress" / "valid").glob("*.md"))
    run, _ = parse(originals[0].read_text(encoding="utf-8"), path="x")
    ident = run.next_entry_id()
    run.transcript.append(
        Entry(id=ident, role="compaction", content="# Summary\n\nAll fine.", covers=(1, ident - 1))
    )
    text = render(run)
    assert f"<!-- flow:entry {ident} compaction covers=1-{ident - 1} d=" in text
    assert f"### {ident} · compaction summary" in text
    again, report = parse(text, path="x")
    assert again == run and not report.edited_entries


@pytest.mark.parametrize(
    ("covers", "words"),
    [("5-3", "names entries 5 to 3"), ("2-9", "names entries 2 to 9"), ("x-2", "malformed")],
)
def test_a_bad_covers_field_is_refused_with_its_line(covers: str, words: str) -> None:
    fixture = sorted((support.FIXTURES / "progress" / "valid").glob("*.md"))[0]
    run, _ = parse(fixture.read_text(encoding="utf-8"), path="x")
    ident = run.next_entry_id()
    run.transcript.append(Entry(id=ident, role="compaction", content="S", covers=(1, 1)))
    text = render(run).replace(" covers=1-1 ", f" covers={covers} ")
    if covers == "2-9":
        text = text.replace(f"entry {ident} compaction", "entry 9 compaction")
    with pytest.raises(ProgressFormatError) as caught:
        parse(text, path="p.md")
    assert words in caught.value.message or "malformed" in caught.value.message
    assert caught.value.line is not None


def test_front_matter_keys_and_the_window_table(tmp_path: Path) -> None:
    assert context_window("gpt-4o-2024-08-06") == 128_000
    assert context_window("openai/gpt-4.1") == 1_047_576
    assert context_window("claude-sonnet-4-5-20250929") == 200_000
    assert context_window("local-model") is None
    wf = load_workflow(write_workflow(tmp_path))
    assert wf.compaction.enabled and wf.compaction.context_window == LIMIT
    assert wf.compaction.threshold == 0.8
    off = load_workflow(write_workflow(tmp_path, "compaction: off\n"))
    assert not off.compaction.enabled
    tuned = load_workflow(
        write_workflow(tmp_path, "compaction: {threshold: 0.6, keep_recent: 0.2}\n")
    )
    assert (tuned.compaction.threshold, tuned.compaction.keep_recent) == (0.6, 0.2)
    with pytest.raises(WorkflowError) as caught:
        load_workflow(write_workflow(tmp_path, "compaction: {threshold: 0.5, keep_recent: 0.6}\n"))
    assert "probe.prompt.md:5:" in str(caught.value)
    assert "keep_recent (0.6) must be below threshold (0.5)" in str(caught.value)
    with pytest.raises(WorkflowError) as caught:
        load_workflow(write_workflow(tmp_path, "context_window: 10\n"))
    assert "$.context_window" in str(caught.value)


def test_a_run_far_longer_than_the_window_completes_within_it(
    tmp_path: Path, server: ModelServer
) -> None:
    model = ProbeModel(turns=100)
    server.responder = model
    outcome = start_run(
        StartRequest(write_workflow(tmp_path), progress=tmp_path / "run" / "progress.md"),
        RunOptions(base_url=server.url + "/v1", workspace=tmp_path),
    )
    run = outcome.run
    assert outcome.exit_code == 0, run.last_error
    assert run.status == "completed"
    # Every tool result is in the file, whole, though requests carried summaries instead.
    loaded, _ = load_progress(tmp_path / "run" / "progress.md")
    assert probe_results(loaded) == list(range(1, 101))
    compactions = [e for e in loaded.transcript if e.role == "compaction"]
    assert len(compactions) >= 2
    assert all(e.covers and e.covers[1] < e.id for e in compactions)
    # No request over the limit was sent; the run as a whole was far over it.
    assert model.rejected == [] and max(model.sizes) <= LIMIT
    assert sum(len(e.content) for e in loaded.transcript) // 4 > 2 * LIMIT
    assert_calls_never_split(model.requests)
    # Summaries were asked for and sent in place of what they cover.
    assert len(model.summaries) == len(compactions)
    assert any("probes done:" in str(m.get("content")) for m in model.requests[-1])
    # The compaction calls are counted in the usage (a turn each, besides the 102 turns).
    assert run.usage.turns == 102 + len(compactions)


def test_a_context_length_error_compacts_and_retries_once(
    tmp_path: Path, server: ModelServer
) -> None:
    model = ProbeModel(turns=40)
    server.responder = model
    # No context_window and a model the table does not know: only the error tells.
    outcome = start_run(
        StartRequest(write_workflow(tmp_path, ""), progress=tmp_path / "run" / "progress.md"),
        RunOptions(base_url=server.url + "/v1", workspace=tmp_path),
    )
    assert outcome.exit_code == 0, outcome.run.last_error
    assert model.rejected, "the run never reached the server's limit"
    compactions = [e for e in outcome.run.transcript if e.role == "compaction"]
    # The refusal names the window ("maximum context length is N tokens"): one request was
    # refused, compacted and retried; from then on the run compacts before it would pass.
    assert len(model.rejected) == 1 and compactions
    assert max(size for size in model.sizes if size not in model.rejected) <= LIMIT
    assert probe_results(outcome.run) == list(range(1, 41))
    assert_calls_never_split(model.requests)


def test_compaction_off_fails_with_the_provider_error_and_flow_compact_rescues_the_run(
    tmp_path: Path, server: ModelServer
) -> None:
    model = ProbeModel(turns=26)
    server.responder = model
    outcome = start_run(
        StartRequest(
            write_workflow(tmp_path, "compaction: off\n"), progress=tmp_path / "run" / "progress.md"
        ),
        RunOptions(base_url=server.url + "/v1", workspace=tmp_path),
    )
    run = outcome.run
    assert outcome.exit_code == EXIT_PROVIDER
    assert run.status == "failed" and run.last_error is not None
    assert "maximum context length" in run.last_error.message
    assert not any(e.role == "compaction" for e in run.transcript)
    done = probe_results(run)
    assert done == list(range(1, len(done) + 1)) and len(done) < 26

    # By hand: `flow compact` (a real process) summarises, then the run resumes to the end.
    progress = tmp_path / "run" / "progress.md"
    result = flow("compact", str(progress), "--base-url", server.url + "/v1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.match(
        r"compacted entries 3-[0-9]+ into entry [0-9]+: the next request", result.stdout
    )
    assert "resume with `flow resume" in result.stdout
    resumed = flow("resume", str(progress), "--base-url", server.url + "/v1", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    final, _ = load_progress(progress)
    assert final.status == "completed"
    assert probe_results(final) == list(range(1, 27))


def test_flow_compact_words_and_exit_codes(tmp_path: Path, server: ModelServer) -> None:
    model = ProbeModel(turns=3)
    server.responder = model
    progress = tmp_path / "run" / "progress.md"
    outcome = start_run(
        StartRequest(write_workflow(tmp_path), progress=progress),
        RunOptions(base_url=server.url + "/v1", workspace=tmp_path),
    )
    assert outcome.exit_code == 0
    url = server.url + "/v1"
    # A short run: the turns kept verbatim are all there is.
    result = flow("compact", str(progress), "--base-url", url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "nothing to compact: only the step prompts and the most recent turns" in result.stdout
    as_json = flow("compact", str(progress), "--base-url", url, "--json", cwd=tmp_path)
    doc = json.loads(as_json.stdout)
    assert doc["compacted"] is False and doc["covers"] is None
    # The library compacts it when told the run is larger than its window allows.
    wf = tmp_path / "probe.prompt.md"
    wf.write_text(wf.read_text().replace(f"context_window: {LIMIT}", "context_window: 300"))
    done = compact_run(progress, RunOptions(base_url=url))
    assert done.compacted and done.covers is not None and done.covers[0] == 3
    assert done.tokens_after < done.tokens_before
    assert done.usage.turns == 1
    after, _ = load_progress(progress)
    assert after.attempts[-1].notes[-1] == (
        f"flow compact: entries 3-{done.covers[1]} summarised in entry {done.entry}"
    )
    # A live run is refused with the lock error.
    store, _, _ = ProgressStore.open(progress)
    try:
        locked = flow("compact", str(progress), "--base-url", url, cwd=tmp_path)
    finally:
        store.close()
    assert locked.returncode == EXIT_LOCKED, locked.stderr
    assert "lock" in locked.stderr and "Traceback" not in locked.stderr
    missing = flow("compact", str(tmp_path / "nope.md"), cwd=tmp_path)
    assert missing.returncode == EXIT_NOT_FOUND
    assert "no progress file at" in missing.stderr
    assert "--json" in flow("compact", "--help", cwd=tmp_path).stdout


def test_a_replay_of_a_compacted_run_sends_the_same_requests(
    tmp_path: Path, server: ModelServer
) -> None:
    model = ProbeModel(turns=40)
    server.responder = model
    write_workflow(tmp_path)
    url = server.url + "/v1"
    recorded = flow(
        "run",
        "probe.prompt.md",
        "--base-url",
        url,
        "--record",
        "--progress",
        "a/progress.md",
        cwd=tmp_path,
    )
    assert recorded.returncode == 0, recorded.stderr
    first, _ = load_progress(tmp_path / "a" / "progress.md")
    assert any(e.role == "compaction" for e in first.transcript)
    calls = len(server.requests)
    replayed = flow(
        "run",
        "probe.prompt.md",
        "--provider",
        "replay",
        "--recording",
        "a/session.recording.jsonl",
        "--progress",
        "b/progress.md",
        "--new",
        cwd=tmp_path,
    )
    # A request that differed from the recording would be a replay mismatch (exit 10).
    assert replayed.returncode == 0, replayed.stderr
    assert len(server.requests) == calls  # the replay asked nothing of the server
    second, _ = load_progress(tmp_path / "b" / "progress.md")
    rows = lambda run: [(e.role, e.content, e.covers) for e in run.transcript]  # noqa: E731
    assert rows(second) == rows(first)


@pytest.mark.parametrize("point", sweep(["compaction.replied", "compaction.recorded"]))
def test_sigkill_during_compaction_then_resume_completes(
    tmp_path: Path, server: ModelServer, point: str
) -> None:
    model = ProbeModel(turns=40)
    server.responder = model
    write_workflow(tmp_path)
    url = server.url + "/v1"
    progress = tmp_path / "run" / "progress.md"
    killed = flow(
        "run",
        "probe.prompt.md",
        "--base-url",
        url,
        "--progress",
        "run/progress.md",
        cwd=tmp_path,
        env=flow_env(FLOW_CRASH_AT=point),
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before, _ = load_progress(progress)
    written = [e for e in before.transcript if e.role == "compaction"]
    # Killed after the summary came back: recorded or not, by the point.
    assert len(written) == (1 if point == "compaction.recorded" else 0)
    asked = len(model.summaries)
    resumed = flow("resume", "run/progress.md", "--base-url", url, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    after, _ = load_progress(progress)
    assert after.status == "completed"
    assert probe_results(after) == list(range(1, 41))
    compactions = [e for e in after.transcript if e.role == "compaction"]
    assert compactions[: len(written)] == written  # a recorded summary is kept as it was
    # A summary lost with the process was asked for again; none was asked for twice else.
    assert len(model.summaries) == asked + len(compactions) - len(written)
    assert model.rejected == [] and max(model.sizes) <= LIMIT


def test_the_scripted_provider_answers_compactions_and_keeps_its_reply_order(
    tmp_path: Path,
) -> None:
    write_workflow(tmp_path)
    replies = [
        {
            "content": f"Probe {n} next.",
            "tool_calls": [{"name": "probe", "arguments": {"n": str(n)}}],
        }
        for n in range(1, 41)
    ]
    replies += ["Done probing.", "Every probe printed its line."]
    script = {"replies": replies, "summary": "Earlier probes all printed their lines."}
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    outcome = start_run(
        StartRequest(
            tmp_path / "probe.prompt.md",
            recording=tmp_path / "script.json",
            progress=tmp_path / "run" / "progress.md",
        ),
        RunOptions(provider="scripted", workspace=tmp_path),
    )
    assert outcome.exit_code == 0, outcome.run.last_error
    run = outcome.run
    summaries = [e for e in run.transcript if e.role == "compaction"]
    assert summaries and all(e.content == script["summary"] for e in summaries)
    # Reply k after a compaction is still the k-th: the summary counts as the replies it covers.
    calls = [json.loads(e.content)["n"] for e in run.transcript if e.role == "tool_call"]
    assert calls == [str(n) for n in range(1, 41)]
    assert probe_results(run) == list(range(1, 41))


def test_anthropics_prompt_is_too_long_compacts_and_retries_once(
    tmp_path: Path, server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    wf = write_workflow(tmp_path, "")
    wf.write_text(
        wf.read_text().replace(
            "provider: openai\nmodel: local-model", "provider: anthropic\nmodel: claude-local"
        ),
        encoding="utf-8",
    )
    too_long = Canned(
        status=400,
        body=anthropic_error(
            "prompt is too long: 215000 tokens > 200000 maximum", "invalid_request_error"
        ),
    )
    server.push(
        Canned(body=anthropic_message("Probe 1.", [("toolu_1", "probe", {"n": "1"})])),
        Canned(body=anthropic_message("Probe 2.", [("toolu_2", "probe", {"n": "2"})])),
        too_long,
        Canned(body=anthropic_message("Probes 1 and 2 printed their lines.")),
        Canned(body=anthropic_message("Done probing.")),
        Canned(body=anthropic_message("Every probe printed its line.")),
    )
    outcome = start_run(
        StartRequest(wf, progress=tmp_path / "run" / "progress.md"),
        RunOptions(base_url=server.url, workspace=tmp_path),
    )
    assert outcome.exit_code == 0, outcome.run.last_error
    assert server.pending == 0
    run = outcome.run
    [summary] = [e for e in run.transcript if e.role == "compaction"]
    assert summary.content == "Probes 1 and 2 printed their lines." and summary.covers == (3, 5)
    bodies = [r.body for r in server.requests]
    # The compaction request has no tools; the retry carries the summary instead of turn 1.
    assert "tools" not in bodies[3] and bodies[3]["system"].startswith("You compact")
    retry = json.dumps(bodies[4]["messages"])
    assert "Probes 1 and 2 printed their lines." in retry and "toolu_1" not in retry
    assert "toolu_2" in retry
    assert probe_results(run) == [1, 2]


@st.composite
def transcripts(draw: st.DrawFn) -> list[Entry]:
    """A system entry, then steps of turns: replies with 0-3 tool calls and their results,
    notes, long and short contents, and earlier compactions made by the planner itself."""
    entries: list[Entry] = [Entry(id=1, role="system", content="sys")]

    def add(role: str, content: str, step: str, **extra: object) -> None:
        entries.append(Entry(id=len(entries) + 1, role=role, content=content, step=step, **extra))  # type: ignore[arg-type]

    for s in range(draw(st.integers(1, 3))):
        step = f"s{s}"
        add("user", f"prompt {s}", step)
        for t in range(draw(st.integers(0, 8))):
            if draw(st.booleans()) and t:
                add("note", "resumed", step)
            add("assistant", "x" * draw(st.integers(0, 400)), step)
            for c in range(draw(st.integers(0, 3))):
                call = f"c{len(entries)}-{c}"
                add("tool_call", "{}", step, call_id=call, tool="probe")
                add(
                    "tool_result", "y" * draw(st.integers(0, 900)), step, call_id=call, tool="probe"
                )
            if draw(st.integers(0, 4)) == 0:
                view = RequestView()
                view.update(entries)
                plan = plan_compaction(
                    view,
                    keep_tokens=draw(st.integers(0, 400)),
                    max_tokens=draw(st.integers(1, 600)),
                )
                if plan is not None:
                    add("compaction", "summary", step, covers=plan.covers)
    return entries


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(0, 500), st.integers(1, 800))
def test_a_compaction_never_splits_a_call_from_its_result(
    entries: list[Entry], keep: int, read: int
) -> None:
    view = RequestView()
    view.update(entries)
    plan = plan_compaction(view, keep_tokens=keep, max_tokens=read)
    if plan is not None:
        assert plan.covers[0] <= plan.covers[1] < len(entries) + 1
        entries = [
            *entries,
            Entry(id=len(entries) + 1, role="compaction", content="S", covers=plan.covers),
        ]
    messages = to_messages(entries)
    # The system entry and every step prompt are still sent, verbatim and in order.
    prompts = [m.content for m in messages if m.role in ("system", "user") and not m.note]
    expected = [e.content for e in entries if e.role == "system" or e.content.startswith("prompt")]
    assert [p for p in prompts if not p.startswith("Summary of")] == expected
    called: set[str] = set()
    answered: set[str] = set()
    for m in messages:
        called.update(c.id for c in m.tool_calls)
        if m.role == "tool":
            assert m.tool_call_id in called  # never a result without its call
            answered.add(m.tool_call_id or "")
    assert called == answered  # never a call without its result
    # The incremental view (as the engine keeps it) agrees with the one built at once.
    grown = RequestView()
    for n in range(1, len(entries) + 1):
        grown.update(entries[:n])
    assert [e.id for e in grown.entries] == [e.id for e in request_view(entries)]


def test_large_tool_results_keep_their_sidecars_and_send_only_previews(
    tmp_path: Path, server: ModelServer
) -> None:
    model = ProbeModel(turns=30)
    server.responder = model
    wf = write_workflow(tmp_path)
    # Each probe prints ~1,000 characters; only 120 bytes of it go into the transcript's
    # preview, the whole output into a sidecar file.
    wf.write_text(
        wf.read_text()
        .replace("    idempotent: true\n", "    idempotent: true\n    max_output: 120\n")
        .replace(FILLER.strip(), FILLER.strip() * 5),
        encoding="utf-8",
    )
    progress = tmp_path / "run" / "progress.md"
    outcome = start_run(
        StartRequest(wf, progress=progress),
        RunOptions(base_url=server.url + "/v1", workspace=tmp_path),
    )
    assert outcome.exit_code == 0, outcome.run.last_error
    run, _ = load_progress(progress)  # verifies every sidecar's hash
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert len(results) == 30 and all(e.sidecar for e in results)
    for entry in results:
        full = (progress.parent / str(entry.sidecar)).read_bytes()
        assert len(full) > 1000 and full.startswith(b"exit code: 0")
    assert any(e.role == "compaction" for e in run.transcript)
    sent = [
        str(m["content"]) for messages in model.requests for m in messages if m["role"] == "tool"
    ]
    assert sent and max(map(len, sent)) < 600  # previews only, never the whole output
    assert not any(FILLER.strip() * 5 in text for text in model.summaries)


@pytest.mark.parametrize(
    "server_kind", ["llama.cpp", "ollama"], ids=["llama.cpp-names-n_ctx", "ollama-names-none"]
)
def test_a_local_servers_context_overflow_compacts_like_openais(
    tmp_path: Path, server: ModelServer, server_kind: str
) -> None:
    refuse = (
        (lambda size, limit: llamacpp_context_exceeded(size, limit))
        if server_kind == "llama.cpp"
        else (lambda size, limit: ollama_context_exceeded())
    )
    model = ProbeModel(turns=40, refuse=refuse)
    server.responder = model
    outcome = start_run(
        StartRequest(write_workflow(tmp_path, ""), progress=tmp_path / "run" / "progress.md"),
        RunOptions(base_url=server.url + "/v1", workspace=tmp_path),
    )
    assert outcome.exit_code == 0, outcome.run.last_error
    assert probe_results(outcome.run) == list(range(1, 41))
    compactions = [e for e in outcome.run.transcript if e.role == "compaction"]
    if server_kind == "llama.cpp":
        # n_ctx beside the refusal is the window: one refusal, then compaction before it.
        assert len(model.rejected) == 1 and compactions
    else:
        # No window said (and no /props to ask): each refusal compacts and retries once.
        assert model.rejected and len(compactions) == len(model.rejected)
        assert [r.path for r in server.requests if r.method == "GET"] == ["/props", "/v1/models"]
