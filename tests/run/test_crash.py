"""Crash safety: SIGKILL at every named crash point, resume, and compare with a clean run.

Every ``faults.point("...")`` in the package is found by scanning its source, so a new write
path cannot be added without being crash-tested. For each point and pass the process kills
itself there (exactly like ``kill -9``); then ``flow resume`` is run until the run completes,
resolving a needs-review stop the way a careful person would (checking whether the command's
side effect happened). Asserted: the file always loads, the final transcript equals the
uninterrupted run's, and the non-idempotent ``bump`` command never ran twice.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from promptflow_resume.run.reconcile import PLACEHOLDER_RESULT
from tests import support
from tests.support.flowproc import flow, flow_env, transcript
from tests.support.slow import sweep

PACKAGE = support.REPO / "promptflow_resume"
FIXTURES = support.FIXTURES / "engine"
PASSES = (1, 2, 5)


def crash_points() -> list[str]:
    points: set[str] = set()
    for source in PACKAGE.rglob("*.py"):
        points.update(re.findall(r"faults\.point\(\s*\"([^\"]+)\"", source.read_text()))
    return sorted(points)


def _fresh(where: Path) -> Path:
    where.mkdir()
    for name in ("counter.prompt.md", "counter.script.yaml"):
        shutil.copy(FIXTURES / name, where / name)
    return where


RUN = (
    "run",
    "counter.prompt.md",
    "--recording",
    "counter.script.yaml",
    "--progress",
    "run/progress.md",
    "--new",
)


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory,
) -> list[tuple[str, str | None, str | None, str]]:
    where = _fresh(tmp_path_factory.mktemp("reference") / "p")
    result = flow(*RUN, cwd=where)
    assert result.returncode == 0, result.stderr
    return transcript(where / "run" / "progress.md")


def test_every_write_path_has_crash_points() -> None:
    points = crash_points()
    assert any(p.startswith("store.") for p in points)
    assert any(p.startswith("engine.") for p in points)


def _bump_count(where: Path) -> int:
    counter = where / "counter.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


#: The default run kills at one point of each kind (a tool call in flight, the journal, the
#: file's rename); --slow (and CI) at every point.
KEPT = {"engine.tool_start_recorded", "store.journal_after_append", "store.checkpoint_after_rename"}


@pytest.mark.parametrize("point", sweep(crash_points(), keep=KEPT))
def test_sigkill_at_each_point_then_resume(
    point: str, reference: list[tuple[str, str | None, str | None, str]], tmp_path: Path
) -> None:
    for n in PASSES:
        where = _fresh(tmp_path / f"pass{n}")
        progress = where / "run" / "progress.md"
        first = flow(*RUN, cwd=where, env=flow_env(FLOW_CRASH_AT=f"{point}:{n}"))
        assert first.returncode in (0, -9), first.stderr
        for _ in range(6):
            if not progress.exists():
                # Killed before the first checkpoint existed: start again, as a user would.
                result = flow(*RUN, cwd=where)
            else:
                load_progress(progress)  # the file always loads after a crash
                result = flow("resume", "run/progress.md", cwd=where)
            if result.returncode == 0:
                break
            assert result.returncode == 8, result.stderr  # needs review, nothing else
            run, _ = load_progress(progress)
            recorded = sum(
                1
                for e in run.transcript
                if e.role == "tool_result" and e.tool == "bump" and e.content != PLACEHOLDER_RESULT
            )
            if _bump_count(where) > recorded:
                # The command did run before the crash: write its real result into the file
                # (what it printed, which is what the uninterrupted run recorded for it).
                real = [
                    c for role, _, tool, c in reference if role == "tool_result" and tool == "bump"
                ]
                text = progress.read_text(encoding="utf-8")
                progress.write_text(
                    text.replace(PLACEHOLDER_RESULT, real[recorded]), encoding="utf-8"
                )
            else:
                result = flow("resume", "run/progress.md", "--rerun-unsafe", cwd=where)
                if result.returncode == 0:
                    break
        assert result.returncode == 0, result.stderr
        assert _bump_count(where) == 2, f"bump ran {_bump_count(where)} times (point {point}:{n})"
        assert transcript(progress) == reference, f"transcript differs after {point}:{n}"


@pytest.mark.parametrize(
    ("point", "signal_name"),
    [
        ("api.run_created", "INT"),
        ("api.run_created", "TERM"),
        # Inside ``ProgressStore.create``: the file is in place, the store not yet returned.
        ("store.checkpoint_after_rename", "TERM"),
        ("store.checkpoint_after_dir_fsync", "INT"),
    ],
)
def test_a_stop_just_after_the_first_checkpoint_says_interrupted(
    point: str,
    signal_name: str,
    reference: list[tuple[str, str | None, str | None, str]],
    tmp_path: Path,
) -> None:
    # Ctrl-C or SIGTERM after a new run's first checkpoint but before its run loop handles
    # signals (the engine is still being set up): the file must not be left saying `running`.
    where = _fresh(tmp_path / "p")
    progress = where / "run" / "progress.md"
    env = flow_env(FLOW_CRASH_AT=point, FLOW_CRASH_SIGNAL=signal_name)
    first = flow(*RUN, cwd=where, env=env)
    assert first.returncode == 130, first.stderr
    assert "Traceback" not in first.stderr
    run, _ = load_progress(progress)
    assert (run.status, run.reason) == ("interrupted", "stopped before its first step began")
    assert all(a.ended is not None for a in run.attempts)
    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert transcript(progress) == reference
    assert _bump_count(where) == 2
