"""Whole workflows through the real openai and anthropic SDKs, against the local servers.

These go through the library API (``start_run``/``resume_run``) exactly as ``flow run`` does:
workflow file, engine, tools, progress file, retries, usage and cost.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptflow_resume.api import RunOptions, StartRequest, resume_run, start_run
from promptflow_resume.providers.pricing import cost_usd
from promptflow_resume.providers.provider import ReplyUsage
from tests.support.providers_server import (
    Canned,
    ModelServer,
    anthropic_error,
    anthropic_message,
    anthropic_usage,
    error_body,
    openai_stream,
    openai_usage,
)

WORKFLOW = """\
---
description: Summarise the release notes
provider: {provider}
model: {model}
tools: [read_file]
retry:
  max_attempts: 3
  initial_delay: 0.01
  max_delay: 1
---
You summarise files for the team.

## Step 1: Read
Read notes.txt and say what it is about.

## Step 2: Summarise
Summarise it in one line.
"""

ENV_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def workflow(workdir: Path, provider: str, model: str) -> Path:
    (workdir / "notes.txt").write_text("Release 2.0 adds resumable runs.\n", encoding="utf-8")
    path = workdir / "summarise.prompt.md"
    path.write_text(WORKFLOW.format(provider=provider, model=model), encoding="utf-8")
    return path


def test_openai_workflow_end_to_end(workdir: Path, server: ModelServer) -> None:
    # Streamed, as on a terminal: every reply arrives as server-sent events.
    server.push(
        Canned(
            events=openai_stream(
                [],
                [("call_1", "read_file", ['{"path": ', '"notes.txt"}'])],
                usage=openai_usage(200, 20),
            )
        ),
        Canned(status=503, body=error_body("The engine is currently overloaded")),
        Canned(
            events=openai_stream(
                ["It is about ", "release 2.0."], usage=openai_usage(300, 10, cached=128)
            )
        ),
        Canned(
            events=openai_stream(["Release 2.0: ", "resumable runs."], usage=openai_usage(350, 8))
        ),
    )
    outcome = start_run(
        StartRequest(
            workflow(workdir, "openai", "gpt-4o"), progress=workdir / "run" / "progress.md"
        ),
        RunOptions(base_url=server.url + "/v1", workspace=workdir, stream=True),
    )
    run = outcome.run
    assert outcome.exit_code == 0, run.last_error
    assert run.status == "completed"
    assert server.pending == 0

    # The tool result reached the model, after the call, in the second request of step 1.
    second = server.requests[2].body["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_1"
    assert "resumable runs" in second[-1]["content"]
    assert [t["function"]["name"] for t in server.requests[0].body["tools"]] == ["read_file"]

    # Usage is summed over the three replies; the 503 cost nothing.
    assert (run.usage.input_tokens, run.usage.output_tokens) == (850, 38)
    assert run.usage.cached_tokens == 128
    expected = sum(
        cost_usd("gpt-4o", ReplyUsage(i, o, c)) or 0.0
        for i, o, c in ((200, 20, 0), (300, 10, 128), (350, 8, 0))
    )
    assert run.usage.cost_usd == pytest.approx(expected, abs=1e-6)
    # The retry is in the attempt history.
    assert any("retry 1" in note for note in run.attempts[-1].notes)
    text = (workdir / "run" / "progress.md").read_text(encoding="utf-8")
    assert "Release 2.0: resumable runs." in text
    assert "no-key-required" not in text


def test_anthropic_auth_failure_then_resume_after_the_fix(
    workdir: Path, server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-revoked")
    server.push(
        Canned(status=401, body=anthropic_error("invalid x-api-key", "authentication_error"))
    )
    progress = workdir / "run" / "progress.md"
    first = start_run(
        StartRequest(workflow(workdir, "anthropic", "claude-sonnet-4-6"), progress=progress),
        RunOptions(base_url=server.url, workspace=workdir),
    )
    assert first.run.status == "failed"
    assert first.exit_code != 0
    assert first.run.last_error is not None
    assert "ANTHROPIC_API_KEY" in first.run.last_error.message or "invalid x-api-key" in (
        first.run.last_error.message
    )
    assert "sk-ant-revoked" not in progress.read_text(encoding="utf-8")

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-good")
    server.push(
        Canned(
            body=anthropic_message(
                "Reading it.",
                [("toolu_1", "read_file", {"path": "notes.txt"})],
                usage=anthropic_usage(input=100, output=20, cache_read=50),
            )
        ),
        Canned(status=529, body=anthropic_error("Overloaded", "overloaded_error")),
        Canned(body=anthropic_message("It is about release 2.0.")),
        Canned(body=anthropic_message("Release 2.0 adds resumable runs.")),
    )
    second = resume_run(progress, RunOptions(base_url=server.url, workspace=workdir))
    run = second.run
    assert second.exit_code == 0, run.last_error
    assert run.status == "completed"
    assert server.pending == 0

    # System prompt separate; the tool result went back as a user tool_result block.
    after_tool = server.requests[3].body
    assert "You summarise files for the team." in after_tool["system"]
    last = after_tool["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][0]["type"] == "tool_result"
    assert last["content"][0]["tool_use_id"] == "toolu_1"
    assert "resumable runs" in str(last["content"][0]["content"])
    roles = [m["role"] for m in after_tool["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles)), "roles must alternate"
    assert run.usage.input_tokens >= 150 and run.usage.cached_tokens >= 50
    assert run.usage.cost_usd > 0
