"""The journal carries deltas: its size follows the payload, and a long run stays resumable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.base.errors import ProgressFormatError
from promptflow_resume.progress import (
    MAX_FILE_BYTES,
    MAX_JOURNAL_BYTES,
    Entry,
    ProgressStore,
    journal_path,
    load_progress,
    to_front_matter,
)
from promptflow_resume.progress import journal as journal_format
from promptflow_resume.progress import store as store_module
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.journalreplay import entry_to_dict
from promptflow_resume.progress.model import Run
from tests import support
from tests.support.flowproc import REPO, flow, flow_env
from tests.support.long_run import run_loop

LONG_RUN = str(support.SUPPORT / "long_run.py")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"a": 1}, {"a": 2}),
        ({"a": 1}, {"a": True}),  # True == 1 in Python, but it is a change
        ({"a": 1.0}, {"a": 1}),
        ({"a": 1, "b": 2}, {"a": 1}),
        ({"a": {"x": [1, 2]}}, {"a": {"x": [1, 2, 3]}}),
        ({"a": [1, 2, 3]}, {"a": [1]}),
        ({"a": [{"n": 1}]}, {"a": [{"n": 1, "u": {"t": 5}}, {"n": 2}]}),
        ({"a": {"k": "v"}}, {"a": "flat"}),
        ({"a": None}, {"a": {"deep": {"er": [None]}}}),
        ({"s": {f"k{i}": i for i in range(9)}}, {"s": {f"k{i}": -i for i in range(9)}}),
    ],
)
def test_a_delta_turns_the_old_state_into_the_new(old: dict[str, Any], new: dict[str, Any]) -> None:
    sets, deletes = journal_format.diff(old, new)
    # Through JSON, as the journal stores it.
    line = journal_format.event_line(1, sets, deletes, [])
    event = journal_format.parse_events(
        journal_format.header_line("r") + line, Path("j"), "r", _report()
    )[0]
    state = json.loads(json.dumps(old))
    journal_format.apply(state, event.sets, event.deletes)
    assert state == new
    assert json.dumps(state) == json.dumps(new)  # types too: 1 is not True, 1.0 is not 1


def test_an_unchanged_state_needs_no_change() -> None:
    state = {"a": [1, {"b": 2}], "c": "d"}
    assert journal_format.diff(state, json.loads(json.dumps(state))) == ([], [])


def _report() -> Any:
    from promptflow_resume.progress import LoadReport

    return LoadReport()


def _run() -> Run:
    """The example run without its (absent) sidecar file."""
    run = example_run()
    entry = run.transcript[4]
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    return run


def _add(run: Run, content: str) -> Entry:
    entry = Entry(id=run.next_entry_id(), role="assistant", content=content, step="report")
    run.transcript.append(entry)
    return entry


def test_a_long_run_folds_before_its_journal_nears_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A small threshold stands for the real one; the rule is the same.
    monkeypatch.setattr(store_module, "FOLD_JOURNAL_BYTES", 20_000)
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    largest = 0
    for n in range(400):
        run.usage.turns = n
        store.save(run, [_add(run, f"reply {n} " + "x" * 200)])
        if journal_path(path).exists():
            largest = max(largest, journal_path(path).stat().st_size)
    store.close()
    # Each fold rewrites at most as many bytes as the journal grew by: the threshold follows
    # the file's size, so the journal stays below the larger of the two.
    assert largest <= max(20_000, path.stat().st_size) + 1_000
    assert run.journal_seq > 0  # folded mid-run, without a checkpoint call
    loaded, report = load_progress(path)
    assert loaded == run and report.replayed_events > 0


def test_a_version_1_journal_left_by_an_older_flow_is_replayed(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    ProgressStore.create(path, run).close()
    entry = _add(run, "written by an older flow")
    run.status = "interrupted"
    header = json.dumps({"flow_journal": 1, "run_id": run.run_id})
    event = json.dumps({"seq": 1, "fm": to_front_matter(run), "entries": [entry_to_dict(entry)]})
    journal_path(path).write_text(f"{header}\n{event}\n", encoding="utf-8")
    loaded, report = load_progress(path)
    assert loaded == run and report.replayed_events == 1


def _payload(run: Run) -> int:
    return sum(len(e.content.encode()) for e in run.transcript)


def test_journal_grows_at_most_twice_the_payload_per_turn(tmp_path: Path) -> None:
    # Killed mid-step, so everything after the first step boundary is in the journal.
    result = subprocess.run(
        [sys.executable, LONG_RUN, str(tmp_path), "300", "--reply", "300", "--result", "1024"],
        env=flow_env(FLOW_CRASH_AT="engine.model_replied:301"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == -9, result.stderr
    progress = tmp_path / "run" / "progress.md"
    run, _ = load_progress(progress)
    assert len(run.transcript) == 2 + 3 * 300  # context, prompt, then reply/call/result
    on_disk = progress.stat().st_size + journal_path(progress).stat().st_size
    assert journal_path(progress).stat().st_size > 100_000  # the turns are in the journal
    assert on_disk <= 2 * _payload(run), (on_disk, _payload(run))


@pytest.mark.slow
def test_a_run_killed_after_10000_turns_of_one_step_resumes(tmp_path: Path) -> None:
    # Before events carried deltas, each repeated the whole front matter and this journal
    # passed the 32 MiB limit near turn 8,700; status and resume then refused the run.
    # (tests/slow/test_pr_long_run.py reads a 20,000-turn run.)
    result = subprocess.run(
        [sys.executable, LONG_RUN, str(tmp_path), "10000"],
        env=flow_env(FLOW_CRASH_AT="engine.model_replied:10001"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == -9, result.stderr  # SIGKILLed after 10,000 complete turns
    progress = tmp_path / "run" / "progress.md"
    # Both stay far below the limits meant for files flow did not write.
    assert progress.stat().st_size < MAX_FILE_BYTES // 2
    assert journal_path(progress).stat().st_size < MAX_JOURNAL_BYTES // 2
    status = flow("status", str(progress), "--json", cwd=tmp_path, timeout=300)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["usage"]["turns"] == 10_000
    resumed = flow("resume", str(progress), "--provider", "echo", cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    run, _ = load_progress(progress)
    assert run.status == "completed"
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert len(results) == 10_000 and not any(e.is_error for e in results)
    assert not journal_path(progress).exists()


def test_the_loop_helper_runs_in_process(tmp_path: Path) -> None:
    progress = run_loop(tmp_path, 3, steps=2)
    run, _ = load_progress(progress)
    assert run.status == "completed"
    assert sum(e.role == "tool_result" for e in run.transcript) == 6
    assert os.fspath(REPO) in os.fspath(Path(LONG_RUN).resolve())


def test_a_journal_over_its_limit_is_refused_unread(tmp_path: Path) -> None:
    # Only a journal flow did not write can be this large: flow folds its own at a few MiB.
    progress = tmp_path / "progress.md"
    progress.write_bytes((REPO / "tests/fixtures/progress/valid/example.md").read_bytes())
    before = progress.read_bytes()
    with open(journal_path(progress), "wb") as handle:  # sparse: nothing written to disk
        handle.truncate(MAX_JOURNAL_BYTES + 1)
    with pytest.raises(ProgressFormatError, match="over the 32 MiB limit"):
        load_progress(progress)
    assert progress.read_bytes() == before
