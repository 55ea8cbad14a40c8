"""What a command imports: the paths that do not need a part never load it (start-up time),
and the one process-wide setting a run changes, the collector's thresholds, is restored."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from promptflow_resume.api import start_run
from promptflow_resume.base.collector import RUN_GEN2_THRESHOLD
from promptflow_resume.events import Reporter
from tests.support.flowproc import flow_env

WORKFLOW = """---
description: Two steps
commands:
  probe:
    description: Look at something
    argv: ["true"]
    idempotent: true
tools: [probe, read_file]
---
Be brief.

## Step 1: First
Say one thing.

## Step 2: Second
Say another.
"""

#: Runs ``flow ARGS`` in this process; as it exits (exit handlers run however flow ends the
#: process), prints which of the watched modules it imported.
PROBE = """
import atexit, json, sys
from promptflow_resume.cli import _console_script
sys.argv = ["flow", *json.loads(sys.argv[1])]
atexit.register(
    lambda: print(json.dumps(sorted(m for m in WATCHED if m in sys.modules)), flush=True)
)
_console_script()
"""

WATCHED = [
    "pydantic",
    "promptflow_resume.tools",
    "promptflow_resume.tools.mcp",
    "promptflow_resume.engine",
    "promptflow_resume.subworkflows",
    "promptflow_resume.recovery",
    "importlib.resources",
]


def _imported_by(tmp_path: Path, *args: str) -> tuple[int, list[str]]:
    code = PROBE.replace("WATCHED", repr(WATCHED))
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(args))],
        env=flow_env(),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return done.returncode, loaded


def _completed_run(tmp_path: Path, reporter: Reporter | None = None) -> Path:
    wf = tmp_path / "two.prompt.md"
    wf.write_text(WORKFLOW, encoding="utf-8")
    progress = tmp_path / "run" / "progress.md"
    outcome = start_run(
        wf, provider="echo", workspace=tmp_path, progress=progress, reporter=reporter
    )
    assert outcome.run.status == "completed"
    return outcome.path


def test_status_of_a_run_with_nothing_in_flight_loads_no_tool_engine_recovery_or_pydantic(
    tmp_path: Path,
) -> None:
    progress = _completed_run(tmp_path)
    code, loaded = _imported_by(tmp_path, "status", str(progress), "--json")
    assert code == 0
    assert loaded == []


def test_status_still_reports_what_resume_would_do(tmp_path: Path) -> None:
    progress = _completed_run(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "promptflow_resume", "status", str(progress), "--json"],
        env=flow_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["status"] == "completed"
    assert data["workflow_error"] is None
    assert data["children"] == []


def test_a_run_of_a_workflow_without_mcp_tools_does_not_load_the_mcp_client(
    tmp_path: Path,
) -> None:
    wf = tmp_path / "two.prompt.md"
    wf.write_text(WORKFLOW, encoding="utf-8")
    code, loaded = _imported_by(tmp_path, "run", str(wf), "--provider", "echo", "--yes")
    assert code == 0
    assert "promptflow_resume.tools.mcp" not in loaded
    assert "promptflow_resume.engine" in loaded  # the run did run


class _Thresholds(Reporter):
    """Notes the collector's thresholds as each step starts."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, int]] = []

    def step_started(self, step_id: str, title: str, index: int, total: int) -> None:
        self.seen.append(gc.get_threshold())


def test_a_run_collects_the_oldest_generation_less_often_then_restores_the_thresholds(
    tmp_path: Path,
) -> None:
    before = gc.get_threshold()
    reporter = _Thresholds()
    _completed_run(tmp_path, reporter)
    assert reporter.seen == [(before[0], before[1], max(before[2], RUN_GEN2_THRESHOLD))] * 2
    assert gc.get_threshold() == before
