"""End to end: the installed command as a subprocess — run, Ctrl-C, resume, finish."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests import support
from tests.support.flowproc import flow, start_flow, transcript

FIXTURES = support.FIXTURES / "engine"

pytestmark = pytest.mark.e2e


def _copy(workdir: Path, *names: str) -> None:
    for name in names:
        shutil.copy(FIXTURES / name, workdir / name)


def _run_args(name: str, progress: str) -> list[str]:
    return [
        "run",
        f"{name}.prompt.md",
        "--recording",
        f"{name}.script.yaml",
        "--progress",
        progress,
        "--new",
    ]


def test_the_console_script_is_installed(workdir: Path) -> None:
    exe = shutil.which("flow")
    assert exe is not None, "pip install -e . must install the `flow` command"
    result = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for command in ("run", "resume", "status", "validate", "check"):
        assert command in result.stdout


def _in_first_nap(progress: Path, proc: subprocess.Popen[str]) -> None:
    """Wait until the run has recorded its first call of the ``nap`` tool (the call is durable
    before the tool runs): what follows is inside the nap."""
    journal = Path(f"{progress}.journal")
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        if journal.exists() and b'"nap"' in journal.read_bytes():
            return
        time.sleep(0.02)
    raise AssertionError(f"the run never called nap: {progress.read_text(encoding='utf-8')}")


def test_ctrl_c_then_resume_gives_the_uninterrupted_transcript(workdir: Path) -> None:
    _copy(workdir, "slow.prompt.md", "slow.script.yaml")
    reference = flow(*_run_args("slow", "ref/progress.md"), cwd=workdir)
    assert reference.returncode == 0, reference.stderr

    progress = workdir / "cut" / "progress.md"
    proc = start_flow(*_run_args("slow", "cut/progress.md"), cwd=workdir, wait_for=progress)
    _in_first_nap(progress, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "Progress saved" in stderr and "flow resume" in stderr
    assert "Traceback" not in stderr

    status = flow("status", "cut/progress.md", "--json", cwd=workdir)
    assert status.returncode == 0, status.stderr
    assert '"status": "interrupted"' in status.stdout
    assert '"can_resume": true' in status.stdout

    resumed = flow("resume", "cut/progress.md", cwd=workdir)
    assert resumed.returncode == 0, resumed.stderr
    assert transcript(progress) == transcript(workdir / "ref" / "progress.md")


def test_sigterm_checkpoints_interrupted(workdir: Path) -> None:
    _copy(workdir, "slow.prompt.md", "slow.script.yaml")
    progress = workdir / "t" / "progress.md"
    proc = start_flow(*_run_args("slow", "t/progress.md"), cwd=workdir, wait_for=progress)
    _in_first_nap(progress, proc)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "interrupted" in progress.read_text(encoding="utf-8")
    assert flow("resume", "t/progress.md", cwd=workdir).returncode == 0


def test_a_missing_workflow_is_one_clear_paragraph(workdir: Path) -> None:
    result = flow("run", "nope.prompt.md", cwd=workdir)
    assert result.returncode == 5
    assert "nope.prompt.md" in result.stderr
    assert "Traceback" not in result.stderr
