"""Recovery decisions in recordings: a session with a ``flow resume --decide`` replays exactly.

The recorded session is real: a ``flow run --record`` SIGKILLed right after a command that is
not idempotent ran, then ``flow resume --decide --record`` whose decision comes from the
scripted provider's ``decisions:`` list. The replay runs the same session again with
``--provider replay`` in a fresh folder, killed at the same point.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from promptflow_resume.base.errors import EXIT_PROVIDER
from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import Run
from tests import support
from tests.support.flowproc import flow, flow_env

FIXTURES = support.FIXTURES / "engine"
PROGRESS = "run/progress.md"
RECORDING = "run/session.recording.jsonl"
CRASH = {"FLOW_CRASH_AT": "engine.tool_ran:1"}


def _decision(choice: str, reason: str) -> str:
    return json.dumps({"choice": choice, "reason": reason})


def _folder(where: Path, *answers: str) -> Path:
    """The counter workflow and its script, with ``decisions:`` answering in order."""
    where.mkdir()
    shutil.copy(FIXTURES / "counter.prompt.md", where / "counter.prompt.md")
    return _folder_script(where, *answers)


def _folder_script(where: Path, *answers: str) -> Path:
    """Write the counter script with these ``decisions:`` into ``where``."""
    script = (FIXTURES / "counter.script.yaml").read_text(encoding="utf-8")
    script += "decisions: " + json.dumps([{"content": a} for a in answers]) + "\n"
    (where / "counter.script.yaml").write_text(script, encoding="utf-8")
    return where


def _rows(run: Run) -> list[tuple[str, str, str | None]]:
    return [(e.role, e.content, e.step) for e in run.transcript]


def _recorded(where: Path, answer: str) -> Path:
    """Record a session: a run killed with ``bump`` in flight, resumed with ``--decide``."""
    _folder(where, answer)
    run = ("run", "counter.prompt.md", "--recording", "counter.script.yaml")
    killed = flow(*run, "--progress", PROGRESS, "--record", cwd=where, env=flow_env(**CRASH))
    assert killed.returncode == -9, killed.stderr
    resumed = flow("resume", PROGRESS, "--decide", "--record", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    return where / RECORDING


def _replay(where: Path, recording: Path) -> tuple[int, str]:
    """Replay the whole session in ``where``: killed at the same point, resumed with --decide."""
    where.mkdir()
    shutil.copy(FIXTURES / "counter.prompt.md", where / "counter.prompt.md")
    args = ("run", "counter.prompt.md", "--provider", "replay", "--recording", str(recording))
    killed = flow(*args, "--progress", PROGRESS, cwd=where, env=flow_env(**CRASH))
    assert killed.returncode == -9, killed.stderr
    resumed = flow("resume", PROGRESS, "--decide", cwd=where)
    return resumed.returncode, resumed.stderr


def test_a_recorded_decision_replays_identically(tmp_path: Path) -> None:
    recording = _recorded(tmp_path / "a", _decision("continue", "the bump only appends a line"))
    lines = [json.loads(line) for line in recording.read_text(encoding="utf-8").splitlines()]
    decision_lines = [
        line
        for line in lines[1:]
        if line["request"]["messages"][0]["content"].startswith("You decide how a stopped")
    ]
    assert len(decision_lines) == 1  # the decision's request and answer are in the recording
    assert json.loads(decision_lines[0]["reply"]["content"])["choice"] == "continue"
    code, stderr = _replay(tmp_path / "b", recording)
    assert code == 0, stderr
    assert "recovery decision: continue — the bump only appends a line" in stderr
    first, _ = load_progress(tmp_path / "a" / PROGRESS)
    second, _ = load_progress(tmp_path / "b" / PROGRESS)
    assert second.status == first.status == "completed"
    assert _rows(second) == _rows(first)
    decisions = [e.content for e in second.transcript if e.role == "decision"]
    assert len(decisions) == 1 and decisions[0].startswith("- choice: continue\n")
    assert second.usage.input_tokens == first.usage.input_tokens


def test_two_decisions_replay_in_order(tmp_path: Path) -> None:
    where = _folder(tmp_path / "a", _decision("ask", "a person should look first"))
    run = ("run", "counter.prompt.md", "--recording", "counter.script.yaml")
    killed = flow(*run, "--progress", PROGRESS, "--record", cwd=where, env=flow_env(**CRASH))
    assert killed.returncode == -9, killed.stderr
    asked = flow("resume", PROGRESS, "--decide", "--record", cwd=where)
    assert asked.returncode == 8, asked.stderr
    (where / "counter.script.yaml").unlink()
    _folder_script(where, _decision("continue", "a person looked: go on"))
    resumed = flow("resume", PROGRESS, "--decide", "--record", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    recording = where / RECORDING
    replay = tmp_path / "b"
    replay.mkdir()
    shutil.copy(FIXTURES / "counter.prompt.md", replay / "counter.prompt.md")
    args = ("run", "counter.prompt.md", "--provider", "replay", "--recording", str(recording))
    killed = flow(*args, "--progress", PROGRESS, cwd=replay, env=flow_env(**CRASH))
    assert killed.returncode == -9, killed.stderr
    assert flow("resume", PROGRESS, "--decide", cwd=replay).returncode == 8
    again = flow("resume", PROGRESS, "--decide", cwd=replay)
    assert again.returncode == 0, again.stderr
    first, _ = load_progress(where / PROGRESS)
    second, _ = load_progress(replay / PROGRESS)
    decisions = [e.content.splitlines()[0] for e in second.transcript if e.role == "decision"]
    assert decisions == ["- choice: ask", "- choice: continue"]
    assert _rows(second) == _rows(first)


def test_a_decision_the_recording_does_not_hold_is_a_replay_mismatch(tmp_path: Path) -> None:
    recording = _recorded(tmp_path / "a", _decision("retry", "bumping again is harmless"))
    where = tmp_path / "b"
    _folder(where)
    args = ("run", "counter.prompt.md", "--provider", "replay", "--recording", str(recording))
    killed = flow(*args, "--progress", PROGRESS, cwd=where, env=flow_env(**CRASH))
    assert killed.returncode == -9, killed.stderr
    # Another model is asked to decide: the decision's request is not the recorded one.
    before, _ = load_progress(where / PROGRESS)
    resumed = flow("resume", PROGRESS, "--decide", "--model", "other-model", cwd=where)
    assert resumed.returncode == EXIT_PROVIDER, resumed.stderr
    assert "recovery decision" in resumed.stderr
    assert "not in the recording" in resumed.stderr
    assert "First difference: model" in resumed.stderr
    assert "Traceback" not in resumed.stderr
    after, _ = load_progress(where / PROGRESS)
    # Nothing was decided: no decision entry, the call still in flight, the status kept.
    assert _rows(after) == _rows(before)
    assert (after.status, after.in_flight) == (before.status, before.in_flight)
