"""SIGKILL of ``flow`` at random moments of a run that calls MCP tools, then resume until done.

The scripted model appends two notes (``append_note``: no annotations, so not idempotent) and
reads them back (``read_notes``: read-only). Each round kills ``flow`` once (even rounds in the
middle of a chosen call, which the server holds; odd rounds at a random moment), then resumes
the way a careful person would: a run that stops ``needs_review`` has its in-flight call
checked against the notes file (the note is there: its result is written into the progress
file; it is not: ``--rerun-unsafe``). Asserted every round: the notes hold each note exactly
once, the transcript equals an uninterrupted run's, and no server outlives ``flow``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from promptflow_resume.run.reconcile import PLACEHOLDER_RESULT
from tests import support
from tests.support.flowproc import flow, flow_env, spawn, transcript
from tests.support.trust import trusted

SERVER = support.SUPPORT / "mcp_servers.py"
ROUNDS = int(os.environ.get("FLOW_MCP_CRASH_ROUNDS", "4"))

WORKFLOW = """---
description: Keep the team notes
provider: scripted
tools: ['notes/*']
---
You keep the team's notes.

## Step 1: Write
Write both notes, then read them back.
"""
REPLIES = [
    {
        "content": "First note.",
        "tool_calls": [{"name": "append_note", "arguments": {"text": "one"}}],
    },
    {
        "content": "Second note.",
        "tool_calls": [{"name": "append_note", "arguments": {"text": "two"}}],
    },
    {"content": "Reading.", "tool_calls": [{"name": "read_notes", "arguments": {}}]},
    "The notes hold: one, two.",
]
RUN = ("run", "notes.prompt.md", "--recording", "s.json", "--progress", "run/progress.md", "--new")


def _workspace(where: Path) -> Path:
    (where / ".vscode").mkdir(parents=True)
    (where / "notes.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (where / "s.json").write_text(json.dumps({"replies": REPLIES}), encoding="utf-8")
    entry = {"command": sys.executable, "args": [str(SERVER), str(where / "state")]}
    (where / ".vscode" / "mcp.json").write_text(json.dumps({"servers": {"notes": entry}}))
    trusted(where)
    return where


def _notes(where: Path) -> list[str]:
    path = where / "state" / "notes.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _servers_gone(where: Path) -> bool:
    starts = where / "state" / "starts"
    pids = [int(p) for p in starts.read_text().split()] if starts.exists() else []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.05)
    return False


def _settle_review(where: Path) -> list[str]:
    """Resolve a needs_review stop like a person: returns the extra resume flags."""
    progress = where / "run" / "progress.md"
    run, _ = load_progress(progress)
    text = progress.read_text(encoding="utf-8")
    for flight in run.in_flight:
        call = run.entry(flight.entry)
        assert call is not None and flight.tool == "append_note"
        note = json.loads(call.content)["text"]
        if note in _notes(where):
            text = text.replace(PLACEHOLDER_RESULT, f"appended: {note}", 1)
        else:
            return ["--rerun-unsafe"]
    progress.write_text(text, encoding="utf-8")
    return []


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory,
) -> list[tuple[str, str | None, str | None, str]]:
    where = _workspace(tmp_path_factory.mktemp("mcp-reference"))
    result = flow(*RUN, cwd=where, env=flow_env())
    assert result.returncode == 0, result.stderr
    return transcript(where / "run" / "progress.md")


@pytest.mark.slow
def test_random_sigkills_during_mcp_calls(
    tmp_path: Path, reference: list[tuple[str, str | None, str | None, str]]
) -> None:
    rng = random.Random(1313)
    counts = {"kills": 0, "resumes": 0, "reviews": 0, "rerun_unsafe": 0}
    for round_no in range(ROUNDS):
        where = _workspace(tmp_path / f"r{round_no}")
        state = where / "state"
        held = round_no % 2 == 0
        if held:  # kill in the middle of a chosen call (the server holds it)
            state.mkdir()
            (state / "hold-call").write_text(str(rng.randint(1, 3)), encoding="utf-8")
        proc = spawn(*RUN, cwd=where, env=flow_env())
        deadline = time.monotonic() + 60
        if held:
            while not (state / "holding").exists():
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.01)
        else:  # kill at a random moment of the calls (the run file exists once servers run)
            while not (where / "run" / "progress.md").exists() and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.08))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        (state / "hold-call").unlink(missing_ok=True)
        counts["kills"] += 1
        assert _servers_gone(where), f"a server outlived flow (round {round_no})"
        progress = where / "run" / "progress.md"
        extra: list[str] = []
        for _ in range(6):
            if not progress.exists():
                result = flow(*RUN, cwd=where, env=flow_env())
            else:
                result = flow("resume", "run/progress.md", *extra, cwd=where, env=flow_env())
                counts["resumes"] += 1
            if result.returncode == 0:
                break
            assert result.returncode == 8, result.stderr
            counts["reviews"] += 1
            extra = _settle_review(where)
            counts["rerun_unsafe"] += bool(extra)
        assert result.returncode == 0, result.stderr
        assert _notes(where) == ["one", "two"], f"round {round_no}: notes {_notes(where)}"
        assert transcript(progress) == reference, f"round {round_no}: transcript differs"
        assert _servers_gone(where)
    print(f"\nMCP crash rounds: {counts}")
