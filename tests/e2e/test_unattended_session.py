"""One unattended session through real ``flow`` processes with no terminal, against the local
OpenAI-protocol server: the run stops ``awaiting_approval`` (exit 15), ``flow approve`` records
the decision, the resumed run meets a quota window and stops ``suspended`` (exit 16),
``flow resume --wait`` waits it out and completes. Every command writes the same event file
(``--events``), and every event is valid against ``schemas/events.schema.json`` (spec 4.16,
4.17, 4.18)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.base.errors import EXIT_AWAITING_APPROVAL, EXIT_SUSPENDED
from tests.support.events import check_events
from tests.support.flowproc import flow, provider_env
from tests.support.providers_server import (
    Canned,
    ModelServer,
    openai_completion,
    openai_tool_call,
    openai_usage,
)

WORKFLOW = """\
---
provider: openai
model: test-model
commands:
  bump:
    description: Add one line to the release counter
    argv: ["sh", "-c", "echo bumped >> counter.txt && wc -l < counter.txt"]
tools: [bump]
approve: [bump]
retry:
  max_attempts: 2
  initial_delay: 0.01
  max_delay: 0.5
---
You keep the release counter.

## Step 1: Bump
Bump the counter once.

## Step 2: Report
Say what the counter is now.
"""
PROGRESS = "run/progress.md"
#: The quota window: long enough that the suspended run is seen before it opens.
WINDOW = 3.0


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _env() -> dict[str, str]:
    env = provider_env()
    env.pop("FLOW_EVENTS", None)  # this test names its own stream
    return env


def _reply(text: str = "", *calls: dict[str, Any]) -> Canned:
    return Canned(body=openai_completion(text, tool_calls=calls, usage=openai_usage(100, 10)))


def _flow(where: Path, server: ModelServer, *args: str) -> Any:
    url = ("--base-url", server.url + "/v1") if args[0] in ("run", "resume") else ()
    events = ("--events", "events.jsonl") if args[0] in ("run", "resume") else ()
    return flow(*args, *url, *events, cwd=where, env=_env())


def test_approval_then_a_quota_window_then_completion_with_one_event_stream(
    tmp_path: Path, server: ModelServer
) -> None:
    where = tmp_path
    (where / "counter.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    server.push(
        _reply("", openai_tool_call("call_1", "bump", "{}")),
        _reply("Bumped once."),
        _reply("The counter is at 1."),
    )

    started = _flow(where, server, "run", "counter.prompt.md", "--progress", PROGRESS, "--new")
    assert started.returncode == EXIT_AWAITING_APPROVAL, started.stderr
    assert "flow approve" in started.stderr
    assert not (where / "counter.txt").exists()  # nothing ran before the person said yes

    approved = _flow(where, server, "approve", PROGRESS, "--all", "--json")
    assert approved.returncode == 0, approved.stderr

    # The approved call runs once; step 2's request meets a closed quota window.
    server.close_window(WINDOW, after=1)
    suspended = _flow(where, server, "resume", PROGRESS)
    assert suspended.returncode == EXIT_SUSPENDED, suspended.stderr
    assert (where / "counter.txt").read_text() == "bumped\n"

    finished = _flow(where, server, "resume", PROGRESS, "--wait")
    assert finished.returncode == 0, finished.stderr
    assert (where / "counter.txt").read_text() == "bumped\n"  # not run again
    assert len(server.requests) == 4  # the refused request went again, nothing answered did

    events = check_events(where / "events.jsonl")
    kinds = [e["type"] for e in events]
    ends = [(e["status"], e["exit_code"]) for e in events if e["type"] == "run_finished"]
    assert ends == [
        ("awaiting_approval", EXIT_AWAITING_APPROVAL),
        ("suspended", EXIT_SUSPENDED),
        ("completed", 0),
    ]
    assert kinds.count("run_started") == 3 and kinds[0] == "run_started"
    held = next(e for e in events if e["type"] == "approval_needed")
    assert [c["call_id"] for c in held["calls"]] == ["call_1"]
    assert any(e["type"] == "suspended" for e in events)
    tools = [e for e in events if e["type"] == "tool_finished"]
    assert [(t["call_id"], t["status"]) for t in tools] == [("call_1", "ok")]
    # Every run's events name the same run, and the file holds no key.
    assert len({e["run_id"] for e in events}) == 1
    assert "sk-test-not-a-key" not in (where / "events.jsonl").read_text()
    print(json.dumps(events, indent=None))
