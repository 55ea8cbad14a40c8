"""Shared helpers of the fault tests (``test_faults_*.py``). That the faults they simulate are
real (a size limit that does stop writes, a folder that does refuse them) is checked by
``tests/run/test_faults_simulated.py``.

The fault tests run the ``flow`` command as a subprocess of the checkout they live in
(``PYTHONPATH`` points at it), so what they break is the code under test and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import Run
from promptflow_resume.run.reconcile import PLACEHOLDER_RESULT
from tests.support import flowproc
from tests.support.flowproc import REPO as REPO
from tests.support.flowproc import Transcript as Transcript
from tests.support.flowproc import flow_env as flow_env
from tests.support.flowproc import spawn as spawn
from tests.support.flowproc import transcript as transcript

ENGINE = REPO / "tests" / "fixtures" / "engine"
HOSTILE = REPO / "tests" / "fixtures" / "hostile"


def flow(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``flowproc.flow`` with the longer default timeout the fault tests need."""
    return flowproc.flow(*args, cwd=cwd, env=env, timeout=timeout, preexec_fn=preexec_fn)


def flow_here(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``flow ARGS`` inside this process (much faster than a subprocess), from ``cwd``."""
    return flowproc.flow_in_process(*args, cwd=cwd)


def copy_fixtures(where: Path, *names: str, source: Path = ENGINE) -> Path:
    """Copy fixture files into ``where`` (created); return ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(source / name, where / name)
    return where


def guarded_run_stopped(where: Path, progress: str) -> Run:
    """A real run of ``fixtures/hostile/guarded.prompt.md`` in ``where``, stopped by its turn
    budget after one note, loaded from ``progress`` with its budget cleared."""
    copy_fixtures(where, "guarded.prompt.md", "guarded.script.yaml", source=HOSTILE)
    result = flow(
        "run",
        "guarded.prompt.md",
        "--recording",
        "guarded.script.yaml",
        "--progress",
        progress,
        "--max-turns",
        "1",
        "--new",
        cwd=where,
    )
    assert result.returncode == 1, result.stderr
    run, _ = load_progress(where / progress)
    run.config.budget = {}
    return run


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path → bytes), to prove nothing changed.

    Empty ``*.lock`` files are left out: taking a run's lock creates one, and it holds nothing.
    """
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and not p.is_symlink()
        and not (p.name.endswith(".lock") and p.stat().st_size == 0)
    }


def assert_clean_error(result: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The process failed with ``code`` and one paragraph that says ``words``; return it."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    last = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
    assert last.startswith("error: "), result.stderr
    assert "internal error" not in last, last
    for word in words:
        assert word in last, (word, last)
    return last


def wait_for(condition: Callable[[], bool], timeout: float = 30, step: float = 0.01) -> None:
    """Poll ``condition`` until it holds (fail after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for a condition"
        time.sleep(step)


# --- simulated faults ------------------------------------------------------------------------


def size_limit(nbytes: int) -> Callable[[], None]:
    """A ``preexec_fn`` giving the child a file size limit: writes past it fail with EFBIG.

    SIGXFSZ is ignored so the write returns an error instead of killing the process: the
    same error path a full disk takes, and it needs no privileges.
    """

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return limit


def _run_quiet(*argv: str) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[str]:
    """Make ``folder`` refuse new files until the block ends; yields how.

    Not root: ``chmod 555``. Root ignores permissions, so: a read-only bind mount of the folder
    (EROFS, what a read-only checkout gives), else the immutable attribute. Skips the test when
    none of these is possible here.
    """
    if os.geteuid() != 0:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            yield "chmod"
        finally:
            folder.chmod(mode)
        return
    target = str(folder)
    if _run_quiet("mount", "--bind", target, target):
        if _run_quiet("mount", "-o", "remount,ro,bind", target, target):
            try:
                yield "read-only mount"
            finally:
                _run_quiet("umount", target)
            return
        _run_quiet("umount", target)
    if _run_quiet("chattr", "+i", target):
        try:
            yield "immutable"
        finally:
            _run_quiet("chattr", "-i", target)
        return
    pytest.skip("running as root without mount or chattr: no way to make a folder read-only")


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "256k") -> Iterator[Path]:
    """A tiny tmpfs mounted on ``folder`` (root only; skips the test otherwise)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not _run_quiet(
        "mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder)
    ):
        pytest.skip(
            "cannot mount a tmpfs here (needs root): the size-limit tests cover ENOSPC's path"
        )
    try:
        yield folder
    finally:
        _run_quiet("umount", str(folder))


# --- finishing a run the way a careful person would ------------------------------------------


def finish(
    where: Path,
    progress: Path,
    reference: Transcript,
    tool: str,
    ran: Callable[[int], bool],
    restart: Callable[[], subprocess.CompletedProcess[str]] | None = None,
    attempts: int = 12,
) -> subprocess.CompletedProcess[str]:
    """Resume until the run completes; settle a needs-review stop as a person would.

    A ``tool`` call left in flight gets the placeholder result; ``ran(k)`` says whether the
    k-th (0-based) recorded call of ``tool`` took effect (its side effect is visible). If it
    did, its real result (the reference run's) is written in place of the placeholder;
    otherwise the run resumes with ``--rerun-unsafe``. ``restart`` starts the run again when it
    was killed before its first checkpoint.
    """
    real = [c for role, _, name, c in reference if role == "tool_result" and name == tool]
    relative = str(progress.relative_to(where))
    result: subprocess.CompletedProcess[str] | None = None
    for _ in range(attempts):
        if not progress.exists():
            assert restart is not None, "the run left no progress file"
            result = restart()
        else:
            load_progress(progress)  # the file always loads
            result = flow("resume", relative, cwd=where)
        if result.returncode == 0:
            return result
        assert result.returncode == 8, (result.returncode, result.stderr)
        run, _ = load_progress(progress)
        recorded = sum(
            1
            for e in run.transcript
            if e.role == "tool_result" and e.tool == tool and e.content != PLACEHOLDER_RESULT
        )
        if ran(recorded):
            text = progress.read_text(encoding="utf-8")
            assert text.count(PLACEHOLDER_RESULT) == 1
            progress.write_text(text.replace(PLACEHOLDER_RESULT, real[recorded]), encoding="utf-8")
        else:
            result = flow("resume", relative, "--rerun-unsafe", cwd=where)
            if result.returncode == 0:
                return result
            assert result.returncode == 8, (result.returncode, result.stderr)
    raise AssertionError(f"the run did not complete: {result.stderr if result else ''}")
