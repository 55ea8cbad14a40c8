"""A full disk, a file size limit and a read-only folder in the middle of a run.

Each time the run must stop with one clear paragraph (exit 12), leave the last checkpoint
loadable and intact (its transcript a prefix of an uninterrupted run's, no temp files left),
and complete once space is back — with the uninterrupted transcript and the non-idempotent
``bump`` run exactly twice.

The size limit (RLIMIT_FSIZE, SIGXFSZ ignored) needs no privileges and fails writes with EFBIG
exactly where a full disk fails them with ENOSPC; a real full tmpfs and a read-only folder are
used too where this machine allows (see ``tests/support/faults.py``, ``read_only``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from promptflow_resume.progress import journal_path, load_progress
from tests.support.faults import (
    ENGINE,
    HOSTILE,
    Transcript,
    assert_clean_error,
    copy_fixtures,
    finish,
    flow,
    read_only,
    size_limit,
    small_disk,
    snapshot,
    spawn,
    transcript,
    wait_for,
)

RUN = (
    "run",
    "counter.prompt.md",
    "--recording",
    "counter.script.yaml",
    "--progress",
    "run/progress.md",
    "--new",
)

#: File size limits (bytes) that stop the counter run at different writes: the first
#: checkpoint, an early fold, writes near the end (journal events carry only what changed, so
#: the whole run stays under 6 KB; the slow sweep tries every limit).
LIMITS = (1_000, 3_300, 4_000, 5_000)
#: The slow sweep: every 100 bytes from here up to the largest file the run writes (a larger
#: limit stops nothing).
SWEEP_FROM = 1_000


def _fresh(where: Path) -> Path:
    return copy_fixtures(where, "counter.prompt.md", "counter.script.yaml")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Transcript:
    where = _fresh(tmp_path_factory.mktemp("reference"))
    result = flow(*RUN, cwd=where)
    assert result.returncode == 0, result.stderr
    return transcript(where / "run" / "progress.md")


def _bumps(where: Path) -> int:
    counter = where / "counter.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _is_prefix(part: Transcript, whole: Transcript) -> bool:
    return part == whole[: len(part)]


def _no_temp_files(folder: Path) -> None:
    if folder.exists():
        assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def _stop_then_finish(where: Path, reference: Transcript, limit: int) -> None:
    """Run under a size limit, check the stop, then finish without one."""
    progress = where / "run" / "progress.md"
    stopped = flow(*RUN, cwd=where, preexec_fn=size_limit(limit))
    message = assert_clean_error(stopped, 12, "the file size limit was reached")
    _no_temp_files(progress.parent)
    if progress.exists():
        assert "flow resume" in message
        kept = transcript(progress)
        assert _is_prefix(kept, reference), f"limit {limit}: the checkpoint is not a prefix"
    else:
        assert "run again" in message
    result = finish(
        where,
        progress,
        reference,
        "bump",
        ran=lambda k: _bumps(where) > k,
        restart=lambda: flow(*RUN, cwd=where),
    )
    assert result.returncode == 0, result.stderr
    assert _bumps(where) == 2, f"limit {limit}: bump ran {_bumps(where)} times"
    assert transcript(progress) == reference
    assert not journal_path(progress).exists()


@pytest.mark.parametrize("limit", LIMITS)
def test_a_size_limit_stops_the_run_cleanly_and_it_resumes(
    limit: int, reference: Transcript, tmp_path: Path
) -> None:
    _stop_then_finish(_fresh(tmp_path / "p"), reference, limit)


@pytest.mark.slow
def test_every_size_limit_across_the_run(reference: Transcript, tmp_path: Path) -> None:
    whole = _fresh(tmp_path / "whole")
    assert flow(*RUN, cwd=whole).returncode == 0
    # The finished file is the largest the run writes: every smaller limit stops a write.
    largest = (whole / "run" / "progress.md").stat().st_size
    # A limit every 250 bytes up to the finished size: the file is stopped at every stage of
    # the run (the default run tries the limits in LIMITS).
    for limit in range(SWEEP_FROM, largest, 250):
        _stop_then_finish(_fresh(tmp_path / str(limit)), reference, limit)


def test_a_sidecar_that_does_not_fit_stops_the_run(tmp_path: Path) -> None:
    where = copy_fixtures(tmp_path / "p", "bigout.prompt.md", "bigout.script.yaml", source=HOSTILE)
    args = ("run", "bigout.prompt.md", "--recording", "bigout.script.yaml", "--new")
    reference = flow(*args, "--progress", "ref/progress.md", cwd=where)
    assert reference.returncode == 0, reference.stderr
    # The 92 KB sidecar does not fit under 80 KB; the 70 KB progress file does.
    stopped = flow(*args, "--progress", "run/progress.md", cwd=where, preexec_fn=size_limit(80_000))
    assert_clean_error(stopped, 12, "could not write a sidecar file", "flow resume")
    folder = where / "run" / "progress.files"
    assert not folder.exists() or not [p for p in folder.iterdir() if not p.name.startswith(".")]
    _no_temp_files(folder)
    load_progress(where / "run" / "progress.md")
    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert transcript(where / "run" / "progress.md") == transcript(where / "ref" / "progress.md")
    run = load_progress(where / "run" / "progress.md")[0]
    assert [e.sidecar for e in run.transcript if e.sidecar]  # the output went to its sidecar


@pytest.mark.parametrize("free_pages", [2])
def test_a_full_disk_stops_the_run_and_it_resumes_once_space_is_back(
    free_pages: int, reference: Transcript, tmp_path: Path
) -> None:
    # Only the runs folder is on the tiny disk: the tool's own counter file is not, so the
    # command itself never fails for want of space (that would be its result, not flow's).
    where = _fresh(tmp_path / "p")
    with small_disk(where / "run") as disk:
        filler = disk / "filler"
        stat = os.statvfs(disk)
        filler.write_bytes(b"\0" * max(stat.f_bavail * stat.f_frsize - free_pages * 4096, 0))
        progress = disk / "progress.md"
        stopped = flow(*RUN, cwd=where)
        assert_clean_error(stopped, 12, "the disk is full")
        _no_temp_files(disk)
        if progress.exists():
            assert _is_prefix(transcript(progress), reference)
        filler.unlink()  # space is back
        result = finish(
            where,
            progress,
            reference,
            "bump",
            ran=lambda k: _bumps(where) > k,
            restart=lambda: flow(*RUN, cwd=where),
        )
        assert result.returncode == 0
        assert _bumps(where) == 2
        assert transcript(progress) == reference


def test_a_folder_made_read_only_during_a_run_stops_it_at_the_checkpoint(
    tmp_path: Path,
) -> None:
    where = copy_fixtures(tmp_path / "p", "slow.prompt.md", "slow.script.yaml", source=ENGINE)
    args = ("run", "slow.prompt.md", "--recording", "slow.script.yaml", "--new")
    reference = flow(*args, "--progress", "ref/progress.md", cwd=where)
    assert reference.returncode == 0, reference.stderr
    progress = where / "run" / "progress.md"
    proc = spawn(*args, "--progress", "run/progress.md", cwd=where)
    journal = journal_path(progress)
    # Wait until the first nap is under way (its start is journaled), then take the folder's
    # write permission away: the next checkpoint (the step boundary) cannot be written.
    wait_for(lambda: journal.exists() and b'"in_flight"' in journal.read_bytes())
    with read_only(progress.parent):
        _, stderr = proc.communicate(timeout=60)
        stopped = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
        assert_clean_error(stopped, 12, "flow resume")
        before = snapshot(progress.parent)
        assert _is_prefix(transcript(progress), transcript(where / "ref" / "progress.md"))
        # Reading works on a read-only folder; resuming is refused without touching anything.
        status = flow("status", "run/progress.md", cwd=where)
        assert status.returncode == 0, status.stderr
        refused = flow("resume", "run/progress.md", cwd=where)
        assert_clean_error(refused, 12, "take the run's lock")
        assert snapshot(progress.parent) == before
    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert transcript(progress) == transcript(where / "ref" / "progress.md")


def test_a_run_cannot_start_in_a_read_only_folder(tmp_path: Path) -> None:
    where = copy_fixtures(tmp_path / "p", "counter.prompt.md", "counter.script.yaml")
    (where / "run").mkdir()
    with read_only(where / "run"):
        result = flow(*RUN, cwd=where)
    assert_clean_error(result, 12, "run again")
    assert not (where / "run" / "progress.md").exists()
    assert not (where / "counter.txt").exists()  # no tool ran


def test_an_unreadable_progress_file_is_a_clear_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can read any file")
    where = copy_fixtures(tmp_path / "p", "counter.prompt.md", "counter.script.yaml")
    assert flow(*RUN, cwd=where).returncode == 0
    progress = where / "run" / "progress.md"
    progress.chmod(0)
    try:
        result = flow("validate", "run/progress.md", cwd=where)
    finally:
        progress.chmod(0o600)
    assert_clean_error(result, 12, "permission was denied")
