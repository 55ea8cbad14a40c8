"""Several processes on one run: exactly one works, the others are refused with the owner."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests import support
from tests.support.flowproc import flow, start_flow, transcript
from tests.support.slow import sweep

FIXTURES = support.FIXTURES / "engine"


@pytest.mark.parametrize("processes", sweep([2, 4, 8]))
def test_concurrent_resumes_run_exactly_once(workdir: Path, processes: int) -> None:
    for name in ("slow.prompt.md", "slow.script.yaml"):
        shutil.copy(FIXTURES / name, workdir / name)
    common = ["--recording", "slow.script.yaml", "--new"]
    reference = flow("run", "slow.prompt.md", "--progress", "ref/progress.md", *common, cwd=workdir)
    assert reference.returncode == 0, reference.stderr
    first = flow(
        "run",
        "slow.prompt.md",
        "--progress",
        "run/progress.md",
        "--max-turns",
        "1",
        *common,
        cwd=workdir,
    )
    assert first.returncode == 1 and "budget_exhausted" in first.stderr

    procs = [
        start_flow("resume", "run/progress.md", "--max-turns", "10", cwd=workdir)
        for _ in range(processes)
    ]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    ran = [r for r in results if r[0] == 0 and r[1].startswith("completed:")]
    refused = [r for r in results if r[0] == 6]
    assert len(ran) == 1, results
    assert len(ran) + len(refused) == processes, results
    for _, _, stderr in refused:
        assert "in use by another flow process (pid" in stderr
        assert "Traceback" not in stderr
    assert transcript(workdir / "run" / "progress.md") == transcript(
        workdir / "ref" / "progress.md"
    )
