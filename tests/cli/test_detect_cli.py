"""``flow list`` and ``flow detect``: what a user sees, and the exit codes."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from promptflow_resume.cli import main
from promptflow_resume.workflow import load_workflow, resolve_inputs
from tests.support.detect import write_run
from tests.support.flowproc import FLOW, flow_env

NOW = datetime.now(timezone.utc)

WORKFLOW = """\
---
description: Build a REST API with JWT login
inputs:
  framework:
    type: string
    default: fastapi
---
You are a careful engineer.

## Step 1: Endpoints
Write the ${input:framework} routes for login and sessions.

## Step 2: Tests
Cover the endpoints with pytest.
"""


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def runs_dir(root: Path) -> Path:
    return root / ".flow" / "runs"


def test_list_without_runs(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    assert out.strip() == "No unfinished runs in .flow/runs (--all includes completed runs)."


def test_list_table(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = runs_dir(workdir)
    write_run(runs, "run-failed", status="failed", reason="provider error", steps_done=2)
    write_run(runs, "run-done", status="completed", steps_done=3, cost=1.5)
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    header = out.splitlines()[0].split()
    assert header == ["id", "workflow", "status", "steps", "cost", "updated", "path"]
    assert "run-failed" in out and "failed (provider error)" in out
    assert "2/3" in out and "$0.12" in out and "api-server" in out
    assert str(Path(".flow/runs/run-failed/progress.md")) in out
    assert "run-done" not in out

    code, out, _ = run_cli(capsys, "list", "--all")
    lines = out.splitlines()
    assert code == 0 and "run-done" in lines[-1]  # completed runs come last
    assert "$1.50" in lines[-1]


def test_list_json(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(runs_dir(workdir), "r1", status="paused", inputs={"framework": "flask"})
    code, out, _ = run_cli(capsys, "list", "--json")
    assert code == 0
    (item,) = json.loads(out)
    assert item["run_id"] == "r1" and item["status"] == "paused" and item["resumable"]
    assert item["inputs"] == {"framework": "flask"}
    assert item["workflow"]["name"] == "api-server"
    assert item["steps_done"] == 1 and item["steps_total"] == 3


def test_list_status_filter_and_folders(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(runs_dir(workdir), "a", status="failed")
    write_run(runs_dir(workdir), "b", status="paused")
    write_run(workdir / "elsewhere", "c", status="timeout")
    code, out, _ = run_cli(capsys, "list", "--status", "paused", "--json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == ["b"]
    code, out, _ = run_cli(capsys, "list", "elsewhere", "--json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == ["c"]


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["list", "--status", "sleeping"], 9, "--status 'sleeping' is not a run status"),
        (["list", "no-such-dir"], 5, "no-such-dir: no such file or folder"),
        (["detect", "missing.prompt.md"], 5, "missing.prompt.md"),
    ],
)
def test_errors(
    workdir: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int, words: str
) -> None:
    got, _, err = run_cli(capsys, *args)
    assert got == code
    assert words in err and "Traceback" not in err


def write_workflow(root: Path) -> Path:
    path = root / "api.prompt.md"
    path.write_text(WORKFLOW, encoding="utf-8")
    return path


def test_detect_shows_candidates_with_scores_and_matched_words(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from promptflow_resume.detect import keywords_for

    path = write_workflow(workdir)
    wf = load_workflow(path)
    words = keywords_for(wf, resolve_inputs(wf, {}))
    runs = runs_dir(workdir)
    write_run(runs, "close", keywords=words, updated=NOW - timedelta(hours=1))
    write_run(runs, "far", keywords=["frontend", "css"], updated=NOW - timedelta(hours=1))

    code, out, _ = run_cli(capsys, "detect", str(path), "--json")
    assert code == 0
    result = json.loads(out)
    assert result["keywords"] == words
    assert [c["run_id"] for c in result["candidates"]] == ["close"]
    assert result["candidates"][0]["score"] == 1.0
    assert result["candidates"][0]["matched"] == words
    assert result["would"] == "ask: Resume it? [Y/n]"

    code, out, _ = run_cli(capsys, "detect", str(path))
    assert code == 0
    assert "keywords: " + ", ".join(words) in out
    assert "close" in out and "1.00" in out
    assert "flow run would ask: Resume it? [Y/n]." in out


def test_detect_reports_an_exact_match(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workflow(workdir)
    wf = load_workflow(path)
    twin = {
        "workflow_hash": wf.hash,
        "inputs": {"framework": "flask"},
        "updated": NOW - timedelta(hours=1),
    }
    would = {
        # Written by hand, not by flow on this machine: offered, never taken without asking.
        False: "ask: Resume it? [Y/n]",
        True: "resume twin without asking (identical run)",
    }
    for sealed, expected in would.items():
        write_run(runs_dir(workdir), "twin", sealed=sealed, **twin)
        args = ("detect", str(path), "--input", "framework=flask", "--json")
        code, out, _ = run_cli(capsys, *args)
        assert code == 0
        assert json.loads(out)["would"] == expected
        assert json.loads(out)["exact"]["written_here"] is sealed
    code, out, _ = run_cli(capsys, "detect", str(path), "--json")  # default input: not identical
    assert json.loads(out)["exact"] is None


def test_detect_without_similar_runs(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_workflow(workdir)
    code, out, _ = run_cli(capsys, "detect", str(path))
    assert code == 0
    assert "flow run would start fresh (no similar unfinished run)." in out


@pytest.mark.e2e
def test_installed_flow_list(workdir: Path) -> None:
    write_run(runs_dir(workdir), "r1", status="interrupted")
    done = subprocess.run(
        [*FLOW, "list", "--json"],
        env=flow_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert [r["run_id"] for r in json.loads(done.stdout)] == ["r1"]


def flow(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOW, *args],
        env=flow_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.e2e
def test_flow_run_resumes_an_identical_run_and_new_starts_fresh(workdir: Path) -> None:
    path = write_workflow(workdir)
    first = flow("run", str(path), "-p", "echo", "--max-turns", "1")
    assert first.returncode == 1, first.stderr  # stopped: turn budget used up
    (stopped,) = json.loads(flow("list", "--json").stdout)
    assert stopped["status"] == "budget_exhausted"

    again = flow("run", str(path), "-p", "echo", "--max-turns", "1")
    assert f"resuming identical incomplete run {stopped['run_id']}" in again.stderr
    assert "--new" in again.stderr
    assert [r["run_id"] for r in json.loads(flow("list", "--all", "--json").stdout)] == [
        stopped["run_id"]
    ]

    fresh = flow("run", str(path), "-p", "echo", "--new")
    assert fresh.returncode == 0, fresh.stderr
    assert "resuming" not in fresh.stderr
    listed = json.loads(flow("list", "--all", "--json").stdout)
    assert len(listed) == 2 and listed[-1]["status"] == "completed"
