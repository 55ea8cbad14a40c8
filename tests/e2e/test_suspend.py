"""Suspension at quota windows through ``flow``'s command line (no terminal), the real SDKs
and the local server answering 429s with each provider's own headers (docs/spec.md 4.18).

flow runs in this process, on a ``SteppedClock`` it shares with the server: a window of an
hour passes as soon as ``flow resume --wait`` sleeps, however loaded the machine. The kill
during the wait is a process of its own, on the system's clock.

A window longer than the retry policy's ``max_delay`` stops the run ``suspended`` with
``until`` in the front matter (exit 16); ``flow resume`` before then sends nothing and exits
16; ``flow resume --wait`` sleeps until the window opens and continues, sending only the
request that was refused; ``--max-suspensions`` bounds how many windows a run may use.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from promptflow_resume.base import clock
from promptflow_resume.base.errors import EXIT_PROVIDER, EXIT_SUSPENDED
from tests.support.flowproc import FLOW, flow, provider_env, transcript
from tests.support.providers_server import (
    Canned,
    ModelServer,
    anthropic_message,
    anthropic_usage,
    anthropic_usage_limit,
    openai_completion,
    openai_insufficient_quota,
    openai_usage,
)

WORKFLOW = """\
---
provider: {provider}
model: test-model
retry:
  max_attempts: 3
  initial_delay: 0.01
  max_delay: 0.5
---
You name bees.

## Step 1: Name
Name one bee.

## Step 2: Again
Name another.
"""

PROGRESS = "run/progress.md"
WINDOW = 3600.0


@dataclass(frozen=True)
class Protocol:
    name: str
    suffix: str

    def reply(self, text: str) -> Canned:
        if self.name == "openai":
            return Canned(body=openai_completion(text, usage=openai_usage(100, 10)))
        return Canned(body=anthropic_message(text, usage=anthropic_usage(input=100, output=10)))


PROTOCOLS = {"openai": Protocol("openai", "/v1"), "anthropic": Protocol("anthropic", "")}


@pytest.fixture(params=sorted(PROTOCOLS))
def protocol(request: pytest.FixtureRequest) -> Protocol:
    return PROTOCOLS[request.param]


@pytest.fixture
def now() -> Iterator[clock.SteppedClock]:
    """The clock flow and the server read within the test: it moves on when flow sleeps."""
    with clock.using(clock.SteppedClock()) as stepped:
        assert isinstance(stepped, clock.SteppedClock)
        yield stepped


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _project(where: Path, protocol: Protocol) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    text = WORKFLOW.format(provider=protocol.name)
    (where / "bees.prompt.md").write_text(text, encoding="utf-8")
    return where


def _run(where: Path, server: ModelServer, protocol: Protocol, *more: str) -> Any:
    url = server.url + protocol.suffix
    args = ("run", "bees.prompt.md", "--base-url", url, "--progress", PROGRESS, "--new", *more)
    return flow(*args, cwd=where, env=provider_env())


def _resume(where: Path, server: ModelServer, protocol: Protocol, *more: str) -> Any:
    url = server.url + protocol.suffix
    return flow("resume", PROGRESS, "--base-url", url, *more, cwd=where, env=provider_env())


def _front(where: Path) -> dict[str, Any]:
    text = (where / PROGRESS).read_text(encoding="utf-8")
    loaded = yaml.safe_load(text.split("---\n", 2)[1])
    assert isinstance(loaded, dict)
    return loaded


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _sent(body: dict[str, Any]) -> str:
    """Every text of a request in order (system, messages), however the protocol nests it."""
    texts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            for item in value:
                walk(item.get("text") or item.get("content") if isinstance(item, dict) else item)

    walk(body.get("system") or "")
    for message in body["messages"]:
        walk(message["content"])
    return "\n".join(texts)


def _reference(tmp_path: Path, protocol: Protocol) -> Any:
    """The transcript of the same run with no window."""
    where = _project(tmp_path / "reference", protocol)
    with ModelServer() as srv:
        srv.push(protocol.reply("Bee one."), protocol.reply("Bee two."))
        assert _run(where, srv, protocol).returncode == 0
    return transcript(where / PROGRESS)


def test_a_window_suspends_the_run_and_wait_continues_it(
    tmp_path: Path, server: ModelServer, protocol: Protocol, now: clock.SteppedClock
) -> None:
    expected = _reference(tmp_path, protocol)
    where = _project(tmp_path / "suspended", protocol)
    server.close_window(WINDOW, after=1)  # step 1 is answered, step 2 meets the window
    server.push(protocol.reply("Bee one."), protocol.reply("Bee two."))
    before = now.time()
    result = _run(where, server, protocol)
    assert result.returncode == EXIT_SUSPENDED, result.stderr
    assert "Traceback" not in result.stderr
    assert "flow resume --wait" in result.stderr
    assert len(server.requests) == 2 and server.refused == 1

    front = _front(where)
    assert front["status"] == "suspended"
    # Before the window opens: nothing is sent and the file is not touched.
    saved = (where / PROGRESS).read_bytes()
    early = _resume(where, server, protocol)
    assert early.returncode == EXIT_SUSPENDED, early.stderr
    assert f"suspended until {front['until']}" in early.stderr
    assert "--wait" in early.stderr and "Traceback" not in early.stderr
    assert len(server.requests) == 2
    assert (where / PROGRESS).read_bytes() == saved

    until = _epoch(front["until"])
    assert before + WINDOW - 1 <= until <= now.time() + WINDOW + 1
    assert front["reason"].startswith(f"until {front['until']}: ")
    assert front["attempts"][0]["until"] == front["until"]
    assert front["attempts"][0]["status"] == "suspended"
    assert [s["status"] for s in front["steps"].values()] == ["completed", "running"]

    status = json.loads(flow("status", PROGRESS, "--json", cwd=where, env=provider_env()).stdout)
    assert (status["status"], status["until"], status["suspensions"]) == (
        "suspended",
        front["until"],
        1,
    )
    shown = flow("status", PROGRESS, cwd=where, env=provider_env())
    assert f"until    {front['until']}" in shown.stdout

    waited = _resume(where, server, protocol, "--wait")
    assert waited.returncode == 0, waited.stderr
    assert now.time() >= until  # --wait slept until the window opened
    assert f"suspended until {front['until']}" in waited.stderr
    # Only the refused request went again: three requests in all, two answered.
    assert len(server.requests) == 3 and server.pending == 0
    # It went as it was, with only the resume note to the model added at its end.
    assert _sent(server.requests[2].body).startswith(_sent(server.requests[1].body))
    assert transcript(where / PROGRESS) == expected
    after = _front(where)
    assert after["status"] == "completed" and "until" not in after
    assert [a.get("until") for a in after["attempts"]] == [front["until"], None]


def test_max_suspensions_zero_fails_at_the_first_window(
    tmp_path: Path, server: ModelServer, protocol: Protocol
) -> None:
    where = _project(tmp_path, protocol)
    server.close_window(WINDOW)
    result = _run(where, server, protocol, "--max-suspensions", "0")
    assert result.returncode == EXIT_PROVIDER, result.stderr
    assert "--max-suspensions allows (0)" in result.stderr
    front = _front(where)
    assert front["status"] == "failed" and front["reason"] == "max_suspensions"
    assert "until" not in front and "until" not in front["attempts"][0]
    assert len(server.requests) == 1


def test_suspensions_are_counted_across_attempts(
    tmp_path: Path, server: ModelServer, protocol: Protocol, now: clock.SteppedClock
) -> None:
    where = _project(tmp_path, protocol)
    server.close_window(WINDOW)
    server.push(protocol.reply("Bee one."), protocol.reply("Bee two."))
    first = _run(where, server, protocol, "--max-suspensions", "1")
    assert first.returncode == EXIT_SUSPENDED, first.stderr
    # The window opens, step 1 is answered, and a second window meets step 2.
    server.close_window(WINDOW, after=1)
    second = _resume(where, server, protocol, "--wait", "--max-suspensions", "1")
    assert second.returncode == EXIT_PROVIDER, second.stderr
    assert "already been suspended 1 time" in second.stderr
    front = _front(where)
    assert front["status"] == "failed" and front["reason"] == "max_suspensions"
    assert next(s["status"] for s in front["steps"].values()) == "completed"
    # The default (3) lets it go on once the window opens.
    now.sleep(WINDOW)
    third = _resume(where, server, protocol)
    assert third.returncode == 0, third.stderr
    # Step 1: refused, answered; step 2: refused, answered. Nothing answered went twice.
    sent = [_sent(r.body) for r in server.requests]
    assert sent[1].startswith(sent[0]) and sent[3].startswith(sent[2])
    assert sent[2].startswith(sent[1].split("\n")[0]) and len(set(sent)) == 4
    assert len(server.requests) == 4


def test_a_kill_during_the_wait_leaves_the_file_as_it_was(
    tmp_path: Path, server: ModelServer
) -> None:
    protocol = PROTOCOLS["anthropic"]
    where = _project(tmp_path, protocol)
    server.close_window(WINDOW)
    server.push(protocol.reply("Bee one."), protocol.reply("Bee two."))
    assert _run(where, server, protocol).returncode == EXIT_SUSPENDED
    saved = (where / PROGRESS).read_bytes()
    url = server.url + protocol.suffix
    import subprocess

    proc = subprocess.Popen(
        [*FLOW, "resume", PROGRESS, "--base-url", url, "--wait"],
        cwd=where,
        env=provider_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "waiting" in line
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    proc.stderr.close()
    assert proc.stdout is not None
    proc.stdout.close()
    assert (where / PROGRESS).read_bytes() == saved
    assert len(server.requests) == 1
    with clock.using(clock.SteppedClock()):  # the hour passes at once
        resumed = _resume(where, server, protocol, "--wait")
    assert resumed.returncode == 0, resumed.stderr
    assert len(server.requests) == 3


def test_an_anthropic_usage_limit_suspends_until_access_returns(
    tmp_path: Path, server: ModelServer
) -> None:
    protocol = PROTOCOLS["anthropic"]
    where = _project(tmp_path, protocol)
    back = (datetime.now(timezone.utc) + timedelta(hours=2)).replace(second=0, microsecond=0)
    server.push(anthropic_usage_limit(back))
    result = _run(where, server, protocol, "--json")
    assert result.returncode == EXIT_SUSPENDED, result.stderr
    front = _front(where)
    assert front["until"] == back.strftime("%Y-%m-%dT%H:%M:%SZ")
    summary = json.loads(result.stdout)
    assert (summary["status"], summary["until"], summary["exit_code"]) == (
        "suspended",
        front["until"],
        EXIT_SUSPENDED,
    )
    assert "regain access" in front["reason"]
    early = _resume(where, server, protocol)
    assert early.returncode == EXIT_SUSPENDED
    assert len(server.requests) == 1


def test_insufficient_quota_fails_without_a_window(tmp_path: Path, server: ModelServer) -> None:
    protocol = PROTOCOLS["openai"]
    where = _project(tmp_path, protocol)
    server.push(openai_insufficient_quota())
    result = _run(where, server, protocol)
    assert result.returncode == EXIT_PROVIDER, result.stderr
    front = _front(where)
    assert front["status"] == "failed" and front["reason"] == "insufficient_quota"
    assert "until" not in front
