"""The owner record of a live run: a reused pid does not make a dead owner look alive."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from promptflow_resume.detect import owner_alive as detect_owner_alive
from promptflow_resume.progress import ProgressStore, owner_path
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.owner import owner_alive, process_start, read_owner

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _plant(progress: Path, **fields: object) -> None:
    record = {"pid": os.getpid(), "host": socket.gethostname(), "since": "2026-01-01T00:00:00Z"}
    record.update(fields)
    owner_path(progress).write_text(json.dumps(record), encoding="utf-8")


@linux_only
def test_a_writer_records_its_start_time(tmp_path: Path) -> None:
    run = example_run()
    entry = run.transcript[4]
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    progress = tmp_path / "progress.md"
    with ProgressStore.create(progress, run):
        record = read_owner(progress)
        assert record["pid"] == os.getpid()
        assert record["pid_start"] == process_start(os.getpid())
        assert owner_alive(progress)
    assert not owner_alive(progress)  # the record goes with the writer


@linux_only
def test_a_live_pid_with_another_start_time_is_not_the_owner(tmp_path: Path) -> None:
    progress = tmp_path / "progress.md"
    mine = process_start(os.getpid())
    assert mine is not None
    boot, ticks = mine.rsplit(":", 1)
    # The pid exists (it is this test's), but the record names a process started earlier.
    _plant(progress, pid_start=f"{boot}:{int(ticks) - 1}")
    assert not owner_alive(progress)
    assert not detect_owner_alive(progress)
    _plant(progress, pid_start=mine)
    assert owner_alive(progress) and detect_owner_alive(progress)


@linux_only
def test_a_process_that_ended_is_not_the_owner(tmp_path: Path) -> None:
    progress = tmp_path / "progress.md"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _plant(progress, pid=child.pid, pid_start=process_start(child.pid))
        assert owner_alive(progress)
    finally:
        child.kill()
        child.wait()
    assert not owner_alive(progress)


def test_without_a_start_time_the_pid_alone_decides(tmp_path: Path) -> None:
    # Records written where /proc is missing (or by an older flow) carry no start time.
    progress = tmp_path / "progress.md"
    _plant(progress)
    assert owner_alive(progress)
    _plant(progress, host="another-host.invalid")
    assert not owner_alive(progress)


def test_process_start_of_a_missing_process_is_unknown() -> None:
    assert process_start(2**22 + 12345) is None


def test_a_request_is_noted_once_it_lasts_and_a_short_one_never(tmp_path: Path) -> None:
    import time

    run = example_run()
    entry = run.transcript[4]
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    progress = tmp_path / "progress.md"
    request = {"step": "inspect", "turn": 1, "since": "2026-11-21T23:25:29Z"}
    with ProgressStore.create(progress, run) as store:
        written = owner_path(progress).stat().st_ino
        store.note_delay = 3600.0  # a request over long before the note is due
        store.note_request(request)
        store.note_request(None)
        assert owner_path(progress).stat().st_ino == written  # never rewritten
        assert "request" not in read_owner(progress)
        store.note_delay = 0.0  # due at once: the timer notes it
        store.note_request(request)
        deadline = time.monotonic() + 30
        while "request" not in read_owner(progress) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert read_owner(progress)["request"] == request
        store.note_request(None)
        assert "request" not in read_owner(progress)
        store.note_delay = 3600.0
        store.note_request(request)  # pending when the store closes: never written
    assert not owner_path(progress).exists()
