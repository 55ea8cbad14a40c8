"""Readers of a live run see a consistent snapshot while its writer appends and folds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from promptflow_resume.base.errors import FlowError
from promptflow_resume.progress import journal_path, load_progress
from tests.support.flowproc import flow, flow_env

#: A writer that appends events to a run and folds every few events, until it is killed:
#: the store's own work, at the pace of a fast run.
WRITER = """
import sys, time
from pathlib import Path
from promptflow_resume.progress import Entry, ProgressStore
from promptflow_resume.progress.examples import example_run

run = example_run()
entry = run.transcript[4]
entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
run.status = "running"
store = ProgressStore.create(Path(sys.argv[1]), run)
n = 0
while True:
    n += 1
    entry = Entry(run.next_entry_id(), "assistant", f"reply {n} " + "x" * 300, step="report")
    run.transcript.append(entry)
    run.usage.turns = n
    store.save(run, [entry])
    if n % 4 == 0:
        store.checkpoint(run)
    time.sleep(0.002)
"""

#: Reader commands run as real processes now and then, between library reads.
COMMANDS = (("status", "--json"), ("validate",), ("log",), ("list",))


@pytest.mark.slow
@pytest.mark.e2e
def test_readers_polled_during_a_folding_run_never_see_a_false_error(tmp_path: Path) -> None:
    # The writer folds every fourth event, so a reader meets folds all the time (before, one
    # in a few hundred reads reported corruption and advised moving the live run's journal
    # aside).
    progress = tmp_path / "progress.md"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(progress)],
        env=flow_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    errors: list[str] = []
    reads = folds = 0
    try:
        deadline = time.monotonic() + 600
        while not journal_path(progress).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        while writer.poll() is None and time.monotonic() < deadline:
            try:
                run, report = load_progress(progress)
            except FlowError as error:
                errors.append(str(error))
                if len(errors) >= 20:
                    break
                continue
            reads += 1
            errors.extend(w for w in report.warnings if "incomplete" in w)
            folds = max(folds, run.journal_seq // 4)
            if reads % 100 == 0:
                command = COMMANDS[(reads // 100) % len(COMMANDS)]
                result = flow(*command, str(progress), cwd=tmp_path, timeout=120)
                if result.returncode != 0:
                    errors.append(f"flow {' '.join(command)}: {result.stderr.strip()}")
                elif command[0] == "status":
                    json.loads(result.stdout)
            if reads >= 1_200 and folds >= 300:
                break
    finally:
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    assert errors == [], errors[:3]
    assert reads >= 1_000, (reads, folds, writer.stderr.read() if writer.stderr else "")
    assert folds >= 300, (reads, folds)
    # Killed mid-write or not, the run loads cleanly afterwards, with every confirmed event.
    run, _ = load_progress(progress)
    assert run.usage.turns >= folds * 4
