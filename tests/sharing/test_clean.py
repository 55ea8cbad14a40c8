"""``flow clean``: retention that says what goes, frees what it says, and spares live runs."""

from __future__ import annotations

import copy
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from promptflow_resume.base.durations import parse_age
from promptflow_resume.base.errors import FileNotFoundFlowError, InputError
from promptflow_resume.progress import ProgressStore
from promptflow_resume.progress.model import Run
from promptflow_resume.sharing import clean_runs
from tests.support.share import make_project, start

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=timezone.utc)


def _stamp(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One real completed run (with a sidecar), copied into every test's runs."""
    root = tmp_path_factory.mktemp("template")
    cwd = Path.cwd()
    os.chdir(root)
    try:
        run, _ = start(make_project(root / "repo"))
    finally:
        os.chdir(cwd)
    return run


def _write(path: Path, template: Run, run_id: str, status: str, days_ago: float) -> Path:
    run = copy.deepcopy(template)
    run.run_id, run.status = run_id, status  # type: ignore[assignment]
    run.updated = _stamp(days_ago)
    for entry in run.transcript:  # sidecars belong to the template's folder; keep text only
        entry.sidecar = entry.sidecar_sha256 = None
        entry.sidecar_bytes = None
    ProgressStore.create(path, run).close()
    return path


@pytest.fixture
def runs(workdir: Path, template: Run) -> Path:
    """``.flow/runs`` with runs of several statuses and ages, one in a shared folder."""
    root = workdir / ".flow" / "runs"
    _write(root / "old-done" / "progress.md", template, "old-done", "completed", 45)
    (root / "old-done" / "progress.files").mkdir()
    (root / "old-done" / "progress.files" / "out.txt").write_bytes(b"x" * 5000)
    _write(root / "new-done" / "progress.md", template, "new-done", "completed", 3)
    _write(root / "old-failed" / "progress.md", template, "old-failed", "failed", 60)
    shared = root / "shared"
    _write(shared / "custom.md", template, "custom", "completed", 90)
    (shared / "custom.md.lock").write_text("")  # left by a process that was killed
    (shared / "custom.md.bak-20260101T000000Z").write_text("backup\n")
    (shared / "custom.files").mkdir()
    (shared / "custom.files" / "a.txt").write_text("sidecar\n")
    (shared / "notes.md").write_text("# my notes, not a run\n")
    return root


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def test_the_dry_run_lists_exactly_what_the_real_run_deletes(runs: Path) -> None:
    before = _tree(runs)
    dry = clean_runs(runs, "30d", ["completed"], dry_run=True, now=NOW)
    assert _tree(runs) == before  # a dry run touches nothing
    real = clean_runs(runs, "30d", ["completed"], dry_run=False, now=NOW)

    assert [i.to_dict() for i in dry.items] == [i.to_dict() for i in real.items]
    assert dry.freed_bytes == real.freed_bytes > 5000
    assert {i.run_id for i in real.items} == {"old-done", "custom"}
    gone = {t.relative_to(runs).as_posix() for i in real.items for t in i.targets}
    assert gone == {
        "old-done",
        "shared/custom.md",
        "shared/custom.md.lock",
        "shared/custom.files",
        "shared/custom.md.bak-20260101T000000Z",
    }
    after = _tree(runs)
    assert not any(path == g or path.startswith(g + "/") for path in after for g in gone)
    assert {"new-done/progress.md", "old-failed/progress.md", "shared/notes.md"} <= after


def test_freed_bytes_is_the_size_of_what_was_deleted(runs: Path) -> None:
    expected = sum(
        p.stat().st_size
        for p in [*(runs / "old-done").rglob("*"), *(runs / "shared").glob("custom*")]
        if p.is_file()
    ) + sum(p.stat().st_size for p in (runs / "shared" / "custom.files").rglob("*"))
    report = clean_runs(runs, "30d", ["completed"], now=NOW)
    assert report.freed_bytes == expected


def test_a_live_run_is_never_deleted(runs: Path) -> None:
    live = runs / "old-done" / "progress.md"
    store, _, _ = ProgressStore.open(live)
    try:
        dry = clean_runs(runs, "30d", ["completed"], dry_run=True, now=NOW)
        real = clean_runs(runs, "30d", ["completed"], now=NOW)
    finally:
        store.close()
    for report in (dry, real):
        assert (live, "in use by a live flow process") in report.skipped
        assert "old-done" not in {i.run_id for i in report.items}
    assert live.is_file() and (runs / "old-done" / "progress.files" / "out.txt").is_file()


@pytest.mark.parametrize(
    ("older_than", "statuses", "expected"),
    [
        ("30d", ["completed"], {"old-done", "custom"}),
        ("0", ["completed"], {"old-done", "new-done", "custom"}),
        ("50d", ["completed", "failed"], {"old-failed", "custom"}),
        ("30d", None, {"old-done", "old-failed", "custom"}),
        ("30d", ["all"], {"old-done", "old-failed", "custom"}),
        ("100d", None, set()),
    ],
)
def test_status_and_age_choose_the_runs(
    runs: Path, older_than: str, statuses: list[str] | None, expected: set[str]
) -> None:
    report = clean_runs(runs, older_than, statuses, dry_run=True, now=NOW)
    assert {i.run_id for i in report.items} == expected
    assert report.kept == 4 - len(expected)  # four runs in all; the rest are kept


def test_a_file_that_cannot_be_read_is_skipped_not_deleted(runs: Path) -> None:
    broken = runs / "broken" / "progress.md"
    broken.parent.mkdir()
    broken.write_text("---\nflow_progress: 1\nrun_id: [unclosed\n---\n")
    report = clean_runs(runs, "0", None, now=NOW)
    assert broken.is_file()
    assert [p for p, _ in report.skipped] == [broken]
    assert "not readable" in report.skipped[0][1]


def test_a_run_whose_folder_holds_another_run_loses_only_its_own_files(
    runs: Path, template: Run
) -> None:
    _write(runs / "old-done" / "fork.md", template, "fork", "completed", 1)
    report = clean_runs(runs, "30d", ["completed"], now=NOW)
    item = next(i for i in report.items if i.run_id == "old-done")
    assert runs / "old-done" not in item.targets
    assert (runs / "old-done" / "fork.md").is_file()
    assert not (runs / "old-done" / "progress.md").exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("90m", timedelta(minutes=90)),
        ("45s", timedelta(seconds=45)),
        ("2w", timedelta(weeks=2)),
        ("7", timedelta(days=7)),
        ("0", timedelta(0)),
    ],
)
def test_ages(text: str, expected: timedelta) -> None:
    assert parse_age(text) == expected


@pytest.mark.parametrize("text", ["", "thirty days", "30x", "-1d"])
def test_a_bad_age_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError, match="is not an age"):
        parse_age(text)


def test_a_bad_status_or_a_missing_folder_is_a_clear_error(runs: Path) -> None:
    with pytest.raises(InputError, match="'done' is not a run status"):
        clean_runs(runs, "30d", ["done"], dry_run=True)
    with pytest.raises(FileNotFoundFlowError, match="no folder at"):
        clean_runs(runs / "nope", "30d", ["completed"], dry_run=True)
