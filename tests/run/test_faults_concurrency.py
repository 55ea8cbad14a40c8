"""Concurrent runs of different workflows in one runs folder, while ``flow list`` reads it.

Eight ``flow run`` processes (four workflows, two runs each) write into the default
``.flow/runs`` at once, and ``flow list`` reads the folder (and its SQLite index) over and over
meanwhile. Every run completes in its own folder; no reader ever sees a torn or invalid file;
the index agrees with a fresh scan afterwards. (Concurrent resumes of one run are in
``test_concurrency.py``.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import RUN_STATUSES
from tests.support.faults import flow, spawn

NAMES = ("alpha", "bravo", "charlie", "delta")

WORKFLOW = """---
description: The {name} chores, done one nap at a time
provider: scripted
commands:
  nap:
    description: Rest briefly
    argv: ["sh", "-c", "sleep 0.2 && echo rested"]
    idempotent: true
tools: [nap]
---
You do the {name} chores.

## Step 1: Start {name}
Take a nap.

## Step 2: Finish {name}
Say you are done.
"""

SCRIPT = """replies:
  - content: "Napping for {name}."
    tool_calls:
      - {{name: nap, arguments: {{}}}}
  - content: "{name} started."
  - content: "{name} done."
"""


def _rows(result: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    return rows


def test_concurrent_runs_and_listing_do_not_interfere(tmp_path: Path) -> None:
    for name in NAMES:
        (tmp_path / f"{name}.prompt.md").write_text(WORKFLOW.format(name=name), encoding="utf-8")
        (tmp_path / f"{name}.script.yaml").write_text(SCRIPT.format(name=name), encoding="utf-8")
    runs = [
        spawn(
            "run", f"{name}.prompt.md", "--recording", f"{name}.script.yaml", "--new", cwd=tmp_path
        )
        for name in NAMES
        for _ in range(2)
    ]
    listings = 0
    while any(p.poll() is None for p in runs):
        for row in _rows(flow("list", "--all", "--json", cwd=tmp_path)):
            assert row["status"] in RUN_STATUSES, row  # never "invalid": no torn file is seen
        listings += 1
    outcomes = [(p.returncode, *p.communicate()) for p in runs]
    assert all(code == 0 for code, _, _ in outcomes), outcomes
    assert listings >= 2  # the folder was read while the runs were writing it

    folders = sorted((tmp_path / ".flow" / "runs").glob("*/progress.md"))
    assert len(folders) == 8
    ids = set()
    for path in folders:
        run, _ = load_progress(path)
        assert run.status == "completed"
        assert run.run_id == path.parent.name
        name = run.workflow.name or ""
        assert name in NAMES and run.run_id.split("-")[2] == name
        # Each run's transcript is its own workflow's, start to end.
        assert all(name in e.content for e in run.transcript if e.role == "assistant")
        ids.add(run.run_id)
    assert len(ids) == 8

    listed = _rows(flow("list", "--all", "--json", cwd=tmp_path))
    assert sorted(str(r["run_id"]) for r in listed) == sorted(ids)
    assert {r["status"] for r in listed} == {"completed"}
    (tmp_path / ".flow" / "runs" / ".index.sqlite").unlink()  # a cache: a fresh scan agrees
    fresh = _rows(flow("list", "--all", "--json", cwd=tmp_path))
    assert fresh == listed


def test_two_runs_racing_for_one_progress_path_never_share_it(tmp_path: Path) -> None:
    name = "alpha"
    (tmp_path / f"{name}.prompt.md").write_text(WORKFLOW.format(name=name), encoding="utf-8")
    (tmp_path / f"{name}.script.yaml").write_text(SCRIPT.format(name=name), encoding="utf-8")
    args = ("run", "alpha.prompt.md", "--recording", "alpha.script.yaml", "--progress", "p/x.md")
    procs = [spawn(*args, cwd=tmp_path) for _ in range(4)]
    results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    winners = [r for r in results if r[0] == 0]
    assert len(winners) == 1, results
    for code, _, stderr in results:
        if code != 0:
            # Refused cleanly: the file exists already (9), or its lock is held (6).
            assert code in (6, 9), (code, stderr)
            assert "Traceback" not in stderr and stderr.startswith("error: ")
    assert load_progress(tmp_path / "p" / "x.md")[0].status == "completed"
