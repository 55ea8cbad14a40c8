"""What a run does with the replies of a real model server that the fake ones never showed.

An empty reply, or one cut off at the token limit, is said in the run's output and in
``flow status``, and the workflow's ``incomplete_reply:`` chooses to keep it, ask again or
stop (docs/spec.md 4.1). A streamed reply records its time to first token and its tokens per
second on its entry. A killed attempt is closed when the run resumes, and while a request is
in flight ``flow status`` says since when (docs/spec.md 4.6).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.api import RunOptions, StartRequest, resume_run, run_status, start_run
from promptflow_resume.otel.spans import run_spans
from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import Run
from promptflow_resume.progress.owner import read_owner
from promptflow_resume.run.events import Reporter
from promptflow_resume.sharing.log import read_log
from tests.support.flowproc import flow, provider_env, spawn
from tests.support.providers_server import Canned, ModelServer, openai_completion, openai_usage

TWO_STEPS = """---
description: Draft a note, then use it
provider: scripted
{extra}
---
## Step 1: Draft
Draft the note.

## Step 2: Use
Use this: ${{step:draft}}
"""


class Notices(Reporter):
    """What the run told its watcher, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def notice(self, text: str) -> None:
        self.lines.append(text)


def run_script(workdir: Path, replies: list[Any], extra: str = "") -> tuple[Run, Path, Notices]:
    (workdir / "w.prompt.md").write_text(TWO_STEPS.format(extra=extra), encoding="utf-8")
    (workdir / "w.yaml").write_text(json.dumps({"replies": replies}), encoding="utf-8")
    notices = Notices()
    outcome = start_run(
        StartRequest(
            workdir / "w.prompt.md", recording=workdir / "w.yaml", progress=workdir / "r.md"
        ),
        RunOptions(reporter=notices),
    )
    return outcome.run, outcome.path, notices


def test_an_empty_reply_completes_its_step_and_the_output_and_status_say_so(
    workdir: Path,
) -> None:
    run, path, notices = run_script(workdir, ["", "Used."])
    assert run.status == "completed"
    said = [n for n in notices.lines if "was empty" in n]
    assert said == [
        "step draft: the model's reply (entry 2) was empty; the step completes with it "
        "(`${step:draft}` is that reply)."
    ]
    assert said[0] in run.attempts[-1].notes
    status = run_status(path).to_dict()
    assert status["incomplete_replies"] == [{"step": "draft", "entry": 2, "why": "was empty"}]


def test_a_reply_cut_off_is_asked_again_with_incomplete_reply_retry(workdir: Path) -> None:
    replies = [{"content": "The note is", "finish_reason": "length"}, "The note.", "Used."]
    run, path, _ = run_script(workdir, replies, "incomplete_reply: retry")
    assert run.status == "completed"
    draft = [(e.role, e.content) for e in run.transcript if e.step == "draft"]
    assert draft[1:] == [
        ("assistant", "The note is"),
        (
            "user",
            "Your reply was cut off at the token limit (max_tokens). Answer again, complete "
            "and shorter, so that it fits.",
        ),
        ("assistant", "The note."),
    ]
    use = next(e for e in run.transcript if e.step == "use" and e.role == "user")
    assert use.content.endswith("Use this: The note.")
    assert run_status(path).to_dict()["incomplete_replies"] == []


def test_a_second_incomplete_reply_stops_the_run_with_retry(workdir: Path) -> None:
    run, path, _ = run_script(workdir, ["", "  "], "incomplete_reply: retry")
    assert run.status == "failed"
    assert run.reason is not None and "(incomplete_reply: retry)" in run.reason
    assert "entry 4) was empty" in run.reason
    assert run_status(path).to_dict()["incomplete_replies"] == [
        {"step": "draft", "entry": 4, "why": "was empty"}
    ]


def test_stop_stops_for_a_person_and_a_resume_goes_on_with_the_reply(workdir: Path) -> None:
    replies = [{"content": "The note is", "finish_reason": "length"}, "Used."]
    run, path, _ = run_script(workdir, replies, "incomplete_reply: stop")
    assert run.status == "failed" and run.reason is not None
    assert "was cut off at the token limit (max_tokens) (incomplete_reply: stop)" in run.reason
    again = resume_run(path)
    assert again.run.status == "completed"
    use = next(e for e in again.run.transcript if e.step == "use" and e.role == "user")
    assert use.content.endswith("Use this: The note is")


# --- streamed replies over a real socket --------------------------------------------------

ONE_STEP = """---
description: One answer
model: local-model
---
Write the answer.
"""


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def test_a_streamed_reply_records_its_time_to_first_token_and_rate(
    workdir: Path, server: ModelServer
) -> None:
    words = " ".join(f"w{i}" for i in range(40))
    server.push(Canned(body=openai_completion(words, usage=openai_usage(10, 40)), pace=0.01))
    (workdir / "one.prompt.md").write_text(ONE_STEP, encoding="utf-8")
    outcome = start_run(
        StartRequest(workdir / "one.prompt.md", progress=workdir / "r.md"),
        RunOptions(provider="openai", base_url=server.url + "/v1", workspace=workdir),
    )
    assert outcome.run.status == "completed"
    reply = outcome.run.transcript[-1]
    meta = reply.meta
    assert meta is not None and meta.ttft is not None and meta.tps is not None
    assert 0 <= meta.ttft <= (meta.ms or 0) and meta.tps > 0
    # Written on the entry's marker, and read back as written.
    text = outcome.path.read_text(encoding="utf-8")
    assert f" ttft={meta.ttft} tps={meta.tps:.1f} " in text
    loaded, _ = load_progress(outcome.path)
    assert loaded.transcript[-1].meta == meta
    # And in the reply's trace span, as the GenAI conventions time the first token.
    (span,) = [s for s in run_spans(loaded) if s.attributes.get("flow.entry") == reply.id]
    assert span.attributes["gen_ai.response.time_to_first_token"] == meta.ttft / 1000
    assert span.attributes["flow.usage.output_tokens_per_second"] == meta.tps


def test_a_killed_attempt_is_closed_on_resume_and_status_said_what_was_in_flight(
    workdir: Path, server: ModelServer
) -> None:
    (workdir / "one.prompt.md").write_text(ONE_STEP, encoding="utf-8")
    server.push(Canned(body=openai_completion("never sent"), delay=30))
    path = workdir / "r" / "progress.md"
    args = ["run", "one.prompt.md", "--provider", "openai", "--base-url", server.url + "/v1"]
    proc = spawn(*args, "--progress", str(path), "--new", cwd=workdir, env=provider_env())
    try:
        deadline = time.monotonic() + 60
        while "request" not in read_owner(path) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        # Mid-generation: status says the run waits for the model, for which step, since when.
        state = run_status(path).state
        assert state.request is not None and state.request["step"] == "main"
        assert state.reason is not None
        assert f"waiting for the model since {state.request['since']}" in state.reason
        assert "(step main, turn 1)" in state.reason
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    server.push(Canned(body=openai_completion("The answer.")))
    outcome = resume_run(path, RunOptions(base_url=server.url + "/v1", workspace=workdir))
    assert outcome.run.status == "completed"
    first, second = outcome.run.attempts
    assert first.ended is not None and first.status == "interrupted"
    assert first.reason is not None and "without a checkpoint" in first.reason
    assert second.status == "completed"
    log = read_log(path)
    assert [a.status for a in log.attempts] == ["interrupted", "completed"]


# --- what the model is told and what the person sees ---------------------------------------

READ_ONLY = """---
description: Read a file
provider: scripted
tools: [read_file]
---
Read notes.txt.
"""


def test_a_missing_file_is_not_answered_with_a_tool_the_model_lacks(workdir: Path) -> None:
    (workdir / "r.prompt.md").write_text(READ_ONLY, encoding="utf-8")
    call = {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}
    (workdir / "r.yaml").write_text(json.dumps({"replies": [call, "No notes."]}))
    outcome = start_run(
        StartRequest(
            workdir / "r.prompt.md", recording=workdir / "r.yaml", progress=workdir / "p.md"
        )
    )
    result = next(e for e in outcome.run.transcript if e.role == "tool_result")
    assert result.content == "error: there is no file 'notes.txt'"


def test_a_model_without_a_price_shows_tokens_only(workdir: Path) -> None:
    from promptflow_resume.cli.runconsole import ConsoleReporter
    from promptflow_resume.progress.model import Usage

    _, path, _ = run_script(workdir, ["The note.", "Used."])
    assert run_status(path).to_dict()["priced"] is False
    said = flow("status", str(path), cwd=workdir)
    usage = next(line for line in said.stdout.splitlines() if line.startswith("usage"))
    assert "$" not in usage and "tokens" in usage
    logged = flow("log", str(path), cwd=workdir).stdout
    assert "$" not in logged and "tokens" in logged
    assert "$" not in ConsoleReporter._usage_text(Usage(input_tokens=5, output_tokens=3))
    priced = Usage(input_tokens=5, output_tokens=3, cost_usd=0.25)
    assert ConsoleReporter._usage_text(priced) == "8 tokens · $0.2500"


def test_the_live_line_counts_tokens_and_their_rate_as_a_reply_streams() -> None:
    from promptflow_resume.cli.runconsole import ConsoleReporter
    from promptflow_resume.providers.provider import Request

    reporter = ConsoleReporter(live=True)
    try:
        reporter.step_started("main", "Write", 1, 1)
        reporter.model_call("main", 1, Request(messages=()))
        line = reporter._generating
        assert line is not None and "waiting for the first token" in line.__rich__()
        for word in ("The", " sea", " is", " wide."):
            reporter.text(word)
        shown = line.__rich__()
        assert "4 tokens · " in shown and "tokens/s" in shown and shown.endswith("The sea is wide.")
    finally:
        reporter.close()
