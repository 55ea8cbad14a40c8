"""``--events FILE``: a run's durable facts as JSON Lines, valid by ``flow schema events``
(docs/spec.md 4.16). Each test runs the real ``flow`` and checks every event it wrote against
the schema, plus the order and content a consumer relies on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support import REPO
from tests.support.events import check_events
from tests.support.flowproc import FLOW, flow, flow_env

SECRET = "sk-demo-0123456789abcdefghij"

WORKFLOW = """\
---
description: Look at the token, then ask a person
provider: scripted
commands:
  show:
    description: Print the token
    argv: ["echo", "{text}"]
    idempotent: true
    parameters:
      text: {type: string, description: What to print}
tools: [show]
---
## Step 1: Look
Show the token.

## Step 2: Approve
> kind: human

Is the token right?

## Step 3: Close
Say goodbye.
"""

# The provider's error message and the model's tool arguments both quote the secret.
SCRIPT = f"""\
replies:
  - content: "Looking."
    tool_calls:
      - name: show
        arguments: {{text: "token {SECRET}"}}
    usage: {{input_tokens: 100, output_tokens: 10}}
  - content: "The token is shown."
    usage: {{input_tokens: 120, output_tokens: 6}}
  - "Goodbye."
failures:
  0: {{transient: true, status: 503, retry_after: 0.01, message: "overloaded for {SECRET}"}}
"""


def _workspace(tmp_path: Path) -> Path:
    (tmp_path / "look.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (tmp_path / "look.script.yaml").write_text(SCRIPT, encoding="utf-8")
    return tmp_path


def _env() -> dict[str, str]:
    env = flow_env(DEMO_API_KEY=SECRET)
    env.pop("FLOW_EVENTS", None)
    return env


def _start(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return flow(
        "run",
        "look.prompt.md",
        "--recording",
        "look.script.yaml",
        "--progress",
        "run/progress.md",
        "--new",
        *extra,
        cwd=tmp_path,
        env=_env(),
    )


def _answer(progress: Path) -> None:
    text = progress.read_text(encoding="utf-8")
    progress.write_text(
        text.replace("WRITE YOUR ANSWER HERE, then run flow resume", "yes"), encoding="utf-8"
    )


def test_a_run_and_its_resume_append_one_stream_of_valid_events(tmp_path: Path) -> None:
    work = _workspace(tmp_path)
    first = _start(work, "--events", "events.jsonl")
    assert first.returncode == 11, first.stderr  # awaiting_input
    events = check_events(work / "events.jsonl")
    kinds = [e["type"] for e in events]
    started, finished = events[0], events[-1]
    assert started["type"] == "run_started"
    assert started["progress"] == str(work / "run" / "progress.md")
    assert started["attempt"] == 1 and started["resumed"] is False
    assert started["workflow"] == str(work / "look.prompt.md")
    # Every event names the run, and the stream is numbered in order.
    assert {e["run_id"] for e in events} == {started["run_id"]}
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    # The facts of the first attempt, in the order they became durable.
    assert kinds.index("retry") < kinds.index("model_reply") < kinds.index("tool_started")
    assert kinds.index("tool_started") < kinds.index("tool_finished")
    assert kinds.index("tool_finished") < kinds.index("step_finished")
    assert kinds[-2:] == ["question_asked", "run_finished"]
    tool = next(e for e in events if e["type"] == "tool_finished")
    tool_start = next(e for e in events if e["type"] == "tool_started")
    assert tool["tool"] == "show" and tool["status"] == "ok" and tool["call_id"]
    assert tool["step"] == "look"
    assert tool["call_id"] == next(e for e in events if e["type"] == "tool_started")["call_id"]
    reply = next(e for e in events if e["type"] == "model_reply")
    assert reply["usage"]["input_tokens"] == 100 and reply["usage"]["output_tokens"] == 10
    asked = next(e for e in events if e["type"] == "question_asked")
    assert asked["step"] == "approve" and "Is the token right?" in asked["question"]
    assert finished["status"] == "awaiting_input" and finished["exit_code"] == 11
    assert finished["usage"]["input_tokens"] == 220
    assert finished["steps_done"] == 1 and finished["steps_total"] == 3
    # The secret is redacted in the stream as in the file (a retry's message is not
    # recorded in the transcript but in the attempt's notes: redacted there too).
    raw = (work / "events.jsonl").read_text(encoding="utf-8")
    assert SECRET not in raw
    assert "[REDACTED:DEMO_API_KEY]" in next(e for e in events if e["type"] == "retry")["message"]
    assert "[REDACTED:DEMO_API_KEY]" in tool_start["arguments"]
    assert SECRET not in (work / "run" / "progress.md").read_text(encoding="utf-8")

    _answer(work / "run" / "progress.md")
    again = flow("resume", "run/progress.md", "--events", "events.jsonl", cwd=work, env=_env())
    assert again.returncode == 0, again.stderr
    events = check_events(work / "events.jsonl")
    starts = [e for e in events if e["type"] == "run_started"]
    assert [(s["attempt"], s["resumed"]) for s in starts] == [(1, False), (2, True)]
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
    assert events[-1]["exit_code"] == 0 and events[-1]["steps_done"] == 3
    second = events[events.index(starts[1]) :]
    # What the resume told before the run opened (its decisions) follows run_started.
    assert second[0]["type"] == "run_started"
    assert [e["step"] for e in second if e["type"] == "step_finished"] == ["approve", "close"]


def test_events_on_stdout_leave_every_other_output_to_stderr(tmp_path: Path) -> None:
    work = _workspace(tmp_path)
    done = _start(work, "--events", "-", "--json")
    assert done.returncode == 11, done.stderr
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    (work / "stdout.jsonl").write_text(done.stdout, encoding="utf-8")
    events = check_events(work / "stdout.jsonl")
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    # The --json summary went to stderr, whole.
    summary = json.loads(done.stderr[done.stderr.index("{") :])
    assert summary["run_id"] == events[0]["run_id"]


def test_the_flow_events_variable_names_the_file_when_the_option_is_absent(
    tmp_path: Path,
) -> None:
    work = _workspace(tmp_path)
    env = _env()
    env["FLOW_EVENTS"] = str(work / "from-env.jsonl")
    done = flow(
        "run",
        "look.prompt.md",
        "--recording",
        "look.script.yaml",
        "--new",
        cwd=work,
        env=env,
    )
    assert done.returncode == 11, done.stderr
    events = check_events(work / "from-env.jsonl")
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"


def test_an_interrupted_run_ends_its_stream_with_run_finished(tmp_path: Path) -> None:
    fixtures = REPO / "tests" / "fixtures" / "engine"
    for name in ("slow.prompt.md", "slow.script.yaml"):
        (tmp_path / name).write_text((fixtures / name).read_text(encoding="utf-8"))
    events_file = tmp_path / "events.jsonl"
    args = ("run", "slow.prompt.md", "--recording", "slow.script.yaml", "--new")
    proc = subprocess.Popen(
        [*FLOW, *args, "--events", str(events_file)],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if events_file.exists() and '"tool_started"' in events_file.read_text():
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    events = check_events(events_file)
    assert events[0]["type"] == "run_started"
    last = events[-1]
    assert last["type"] == "run_finished"
    assert last["status"] == "interrupted" and last["exit_code"] == 130


def test_flow_schema_events_prints_the_published_schema() -> None:
    done = flow("schema", "events", cwd=REPO / "tests")
    assert done.returncode == 0, done.stderr
    published = json.loads((REPO / "schemas" / "events.schema.json").read_text(encoding="utf-8"))
    assert json.loads(done.stdout) == published
    assert published["$defs"]["run_started"]["properties"]["v"] == {
        "const": 1,
        "description": "the event format version 1",
    }


def test_the_package_ships_the_events_schema() -> None:
    packaged = REPO / "promptflow_resume" / "schemas" / "events.schema.json"
    assert packaged.exists() and os.path.samefile(packaged.parent, REPO / "schemas")


def test_a_child_runs_question_reaches_the_parents_stream(tmp_path: Path) -> None:
    (tmp_path / "parent.prompt.md").write_text(
        "---\ndescription: Delegate\nprovider: scripted\n---\n"
        "## Step 1: Delegate {#delegate}\n> workflow: child.prompt.md\n\n",
        encoding="utf-8",
    )
    (tmp_path / "child.prompt.md").write_text(
        "---\ndescription: Ask a person\nprovider: scripted\n---\n"
        "## Step 1: Ask {#ask}\n> kind: human\n\nWhich colour?\n",
        encoding="utf-8",
    )
    (tmp_path / "s.yaml").write_text("replies: []\n", encoding="utf-8")
    done = flow(
        "run",
        "parent.prompt.md",
        "--recording",
        "s.yaml",
        "--new",
        "--events",
        "events.jsonl",
        cwd=tmp_path,
        env=_env(),
    )
    assert done.returncode == 11, done.stderr
    events = check_events(tmp_path / "events.jsonl")
    # One run_started / run_finished pair: the child reports through its parent's stream.
    assert [e["type"] for e in events].count("run_started") == 1
    asked = next(e for e in events if e["type"] == "question_asked")
    assert asked["step"] == "delegate/ask" and "Which colour?" in asked["question"]
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "awaiting_input"


def test_an_events_file_that_cannot_be_opened_stops_before_the_run(tmp_path: Path) -> None:
    work = _workspace(tmp_path)
    (work / "blocked").write_text("a file, not a folder", encoding="utf-8")
    done = _start(work, "--events", "blocked/events.jsonl")
    assert done.returncode == 12, done.stderr
    assert "cannot open the events file blocked/events.jsonl" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (work / "run").exists()
