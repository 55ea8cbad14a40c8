"""Signals: SIGHUP, Ctrl-C twice, Ctrl-C from a terminal (the whole process group), storms.

The first SIGINT, SIGTERM or SIGHUP checkpoints the run as ``interrupted`` and exits 130; a
second one while that happens exits at once, and the file is still the previous or the next
checkpoint. Whatever the timing: the file loads, the command the run was waiting for is gone,
and ``flow resume`` finishes with the transcript of a run that was never interrupted.
(SIGTERM once and SIGINT once are in ``test_e2e.py``.)
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from functools import partial
from pathlib import Path

import pytest

from promptflow_resume.progress import journal_path, load_progress
from tests.support.faults import (
    HOSTILE,
    Transcript,
    copy_fixtures,
    flow,
    spawn,
    transcript,
    wait_for,
)
from tests.support.slow import sweep

ARGS = ("run", "napper.prompt.md", "--recording", "napper.script.yaml", "--new")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Transcript:
    where = copy_fixtures(
        tmp_path_factory.mktemp("ref"), "napper.prompt.md", "napper.script.yaml", source=HOSTILE
    )
    result = flow(*ARGS, "--progress", "run/progress.md", cwd=where)
    assert result.returncode == 0, result.stderr
    return transcript(where / "run" / "progress.md")


def _start(where: Path, *, session: bool = False) -> subprocess.Popen[str]:
    copy_fixtures(where, "napper.prompt.md", "napper.script.yaml", source=HOSTILE)
    return spawn(*ARGS, "--progress", "run/progress.md", cwd=where, session=session)


def _napping(where: Path) -> bool:
    """True once a nap command is running (it wrote its pid)."""
    pids = where / "naps.pid"
    return pids.exists() and bool(pids.read_text().strip())


def _gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie waiting for init to reap it has ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc: ask the kernel directly
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def _after(proc: subprocess.Popen[str], where: Path, reference: Transcript) -> str:
    """Common checks after the process stopped; returns its stderr."""
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert "Traceback" not in stderr and "internal error" not in stderr
    progress = where / "run" / "progress.md"
    run, _ = load_progress(progress)  # previous or next checkpoint, never a torn one
    assert run.status in ("interrupted", "running"), run.status
    for pid in (int(p) for p in (where / "naps.pid").read_text().split()):
        wait_for(partial(_gone, pid), timeout=10)  # SIGKILL lands asynchronously
    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert transcript(progress) == reference
    assert not journal_path(progress).exists()
    return stderr


def test_sighup_checkpoints_interrupted_and_resumes(tmp_path: Path, reference: Transcript) -> None:
    proc = _start(tmp_path)
    wait_for(lambda: _napping(tmp_path))
    proc.send_signal(signal.SIGHUP)
    stderr = _after(proc, tmp_path, reference)
    assert "Progress saved" in stderr and "flow resume" in stderr


@pytest.mark.parametrize("gap", sweep([0.0, 0.02]))
def test_ctrl_c_twice_exits_at_once_and_the_file_stays_consistent(
    tmp_path: Path, reference: Transcript, gap: float
) -> None:
    proc = _start(tmp_path)
    wait_for(lambda: _napping(tmp_path))
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _after(proc, tmp_path, reference)


def test_ctrl_c_on_a_terminal_reaches_the_whole_group(
    tmp_path: Path, reference: Transcript
) -> None:
    # A terminal sends SIGINT to the foreground process group: flow and anything it started
    # in that group. Commands run in their own group and are stopped by flow itself.
    proc = _start(tmp_path, session=True)
    wait_for(lambda: _napping(tmp_path))
    os.killpg(proc.pid, signal.SIGINT)
    stderr = _after(proc, tmp_path, reference)
    assert "Progress saved" in stderr


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0])
def test_a_storm_of_signals_at_random_moments(
    tmp_path: Path, reference: Transcript, seed: int
) -> None:
    rng = random.Random(seed)
    proc = _start(tmp_path)
    wait_for(lambda: (tmp_path / "run" / "progress.md").exists())
    time.sleep(rng.uniform(0.0, 1.5))
    sent = 0
    while proc.poll() is None and sent < 50:
        proc.send_signal(rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGHUP]))
        sent += 1
        time.sleep(rng.uniform(0.0, 0.02))
    _, stderr = proc.communicate(timeout=60)
    if proc.returncode == 0:
        # The run finished before the storm reached it: nothing to resume.
        assert transcript(tmp_path / "run" / "progress.md") == reference
        return
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert "Traceback" not in stderr and "internal error" not in stderr
    progress = tmp_path / "run" / "progress.md"
    load_progress(progress)
    resumed = flow("resume", "run/progress.md", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert transcript(progress) == reference
