"""Crash safety: a writer killed (SIGKILL) at every named point leaves a loadable file whose state
is the previous or the next checkpoint, and a journal is never applied twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from promptflow_resume.progress import ProgressStore, journal_path, load_progress
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Entry, Run
from tests.support.flowproc import flow_env

# The writer: one event (entry A, status running), a fold with status paused, one more event.
WRITER = """
import sys
from promptflow_resume.progress import ProgressStore
from promptflow_resume.progress.model import Entry
store, run, _ = ProgressStore.open(sys.argv[1])
run.status = "running"
entry = Entry(run.next_entry_id(), "assistant", "A", step="report")
run.transcript.append(entry)
store.save(run, [entry])
run.status = "paused"
store.checkpoint(run)
entry = Entry(run.next_entry_id(), "assistant", "B", step="report")
run.transcript.append(entry)
store.save(run, [entry])
store.close()
"""


def _base() -> Run:
    run = example_run()
    entry = run.transcript[4]
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    return run


def _expected(status: str, contents: list[str]) -> Run:
    run = _base()
    run.status = status  # type: ignore[assignment]
    for text in contents:
        run.transcript.append(Entry(run.next_entry_id(), "assistant", text, step="report"))
    return run


@pytest.mark.parametrize(
    ("point", "status", "contents"),
    [
        ("store.journal_before_append", "interrupted", []),
        ("store.journal_after_append", "running", ["A"]),
        ("store.journal_after_fsync", "running", ["A"]),
        ("store.checkpoint_before_temp", "running", ["A"]),
        ("store.checkpoint_after_temp", "running", ["A"]),
        ("store.checkpoint_after_fsync", "running", ["A"]),
        ("store.checkpoint_after_rename", "paused", ["A"]),
        ("store.checkpoint_after_dir_fsync", "paused", ["A"]),
        ("store.checkpoint_before_journal_remove", "paused", ["A"]),
    ],
)
def test_a_kill_at_each_point_leaves_the_previous_or_next_checkpoint(
    tmp_path: Path, point: str, status: str, contents: list[str]
) -> None:
    path = tmp_path / "progress.md"
    ProgressStore.create(path, _base()).close()
    env = flow_env(FLOW_CRASH_AT=point)
    proc = subprocess.run([sys.executable, "-c", WRITER, str(path)], env=env, check=False)
    assert proc.returncode == -9, "the writer should have been killed at the crash point"
    expected = _expected(status, contents)
    loaded, _ = load_progress(path)
    assert loaded == expected
    # The next writer takes the lock over, folds what is left, and sees the same state.
    store, opened, _ = ProgressStore.open(path)
    assert opened == expected
    store.close()
    assert not journal_path(path).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert load_progress(path)[0] == expected


def test_the_writer_without_a_crash_ends_with_both_events(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    ProgressStore.create(path, _base()).close()
    env = flow_env()
    subprocess.run([sys.executable, "-c", WRITER, str(path)], env=env, check=True)
    assert load_progress(path)[0] == _expected("paused", ["A", "B"])
