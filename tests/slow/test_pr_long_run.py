"""A 20,000-turn run in a pull request: its summary fits a comment, ``flow diff`` stays fast.

One run is built for the module (the real engine and store, tests/support/long_run.py) and
both readers are timed on it; the times are printed (``-s``) for the record.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from promptflow_resume.progress import render
from promptflow_resume.progress.parse import parse
from promptflow_resume.sharing.diff import diff_files
from promptflow_resume.show.prsummary import SUMMARY_LIMIT, pr_summary
from tests.support.long_run import run_loop

pytestmark = pytest.mark.slow

TURNS = 20_000


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_loop(tmp_path_factory.mktemp("long"), TURNS)


def test_the_summary_of_20000_turns_fits_a_comment(long_run: Path) -> None:
    started = time.monotonic()
    text = pr_summary(long_run)
    took = time.monotonic() - started
    assert len(text) < SUMMARY_LIMIT
    assert "| 1 | loop | ✅ completed |" in text and f"| {TURNS + 1} |" in text
    print(f"summary of {TURNS:,} turns: {len(text)} characters in {took:.2f}s")


def test_diff_names_the_entries_a_resume_appended_to_20000_turns(
    long_run: Path, tmp_path: Path
) -> None:
    run, _ = parse(long_run.read_text(encoding="utf-8"))
    older = tmp_path / "old.md"
    older.write_text(render(replace(run, transcript=run.transcript[:-10])), encoding="utf-8")
    started = time.monotonic()
    change = diff_files(older, long_run)
    took = time.monotonic() - started
    assert [e.id for e in change.appended] == [e.id for e in run.transcript[-10:]]
    assert change.edited == [] and change.removed == []
    print(f"flow diff of a {TURNS:,}-turn run: {took:.2f}s")
