"""Golden progress files of every format flow ever wrote (docs/spec.md 2.5).

``tests/fixtures/progress/formats/`` holds one file per format (four for format 7, which was
written with four key sets), each written by the flow of a commit that wrote that format (its
README names the commit and the command). Each loads as the file it is, upgrades to the
current format, round-trips, and reports the same run before and after this flow saves it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from promptflow_resume.base.release import VERSION
from promptflow_resume.progress import ProgressStore, load_progress, parse, render
from promptflow_resume.progress.model import FORMAT_MINOR, FORMAT_VERSION, MIN_FLOW
from promptflow_resume.progress.parse import check_strict
from promptflow_resume.show.prsummary import pr_summary
from tests import support
from tests.support.snapshots import MarkdownSnapshot

FORMATS = support.FIXTURES / "progress" / "formats"
#: The golden files by name (``v7-traces``), without the made-up later minor.
GOLDEN = {p.stem: p for p in sorted(FORMATS.glob("v*.md")) if not p.stem.endswith("-next")}
HEAD = f"---\nflow_progress: {FORMAT_VERSION}\nflow_progress_minor: {FORMAT_MINOR}\n"


def written_in(name: str) -> str:
    """The format a golden file's name says it is in: ``v7-traces`` -> ``7``, ``v8.0`` ->
    ``8.0``."""
    found = re.fullmatch(r"v([0-9]+(?:\.[0-9]+)?)(?:-[a-z]+)?", name)
    assert found is not None, name
    return found.group(1)


@pytest.fixture
def md_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(MarkdownSnapshot)


@pytest.mark.parametrize("name", GOLDEN)
def test_a_golden_file_loads_upgrades_and_round_trips(name: str) -> None:
    path = GOLDEN[name]
    run, report = load_progress(path)
    assert report.format == written_in(name)
    assert (report.unknown, report.warnings, report.edited_entries) == ([], [], [])
    assert run.kept is None
    assert len(run.transcript) == path.read_text(encoding="utf-8").count("\n<!-- flow:entry ")
    text = render(run)
    assert text.startswith(f"{HEAD}min_flow: {MIN_FLOW}\n")
    again, again_report = parse(text, path=path.name)
    assert again == run and again_report.warnings == []
    assert render(again) == text
    check_strict(text, again_report, path=path.name)  # all of it is what this flow writes


@pytest.mark.parametrize("name", GOLDEN)
def test_a_golden_file_reports_the_same_run_once_this_flow_saved_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, md_snapshot: SnapshotAssertion
) -> None:
    monkeypatch.chdir(tmp_path)
    progress = Path("progress.md")
    shutil.copy(GOLDEN[name], progress)
    report = pr_summary(progress)
    assert report == md_snapshot
    store, run, _ = ProgressStore.open(progress)
    try:
        store.checkpoint(run)  # saved in the current format
    finally:
        store.close()
    assert progress.read_text(encoding="utf-8").startswith(HEAD)
    assert pr_summary(progress) == report


def _parts(text: str) -> tuple[str, str]:
    """A file's front matter, and its conversation (the entries, without generated text)."""
    front, _, body = text[4:].partition("\n---\n")
    start = body.index("\n<!-- flow:entry ")
    return front, body[start : body.index("\n<!-- flow:section state")]


@pytest.mark.parametrize("name", [n for n in GOLDEN if written_in(n).startswith("8.")])
def test_a_file_of_the_current_format_keeps_its_bytes_when_saved_again(name: str) -> None:
    # A later flow of the same format rewrites the generated sections at most: the front
    # matter and the conversation are the format, and stay as they were written.
    text = GOLDEN[name].read_text(encoding="utf-8")
    assert _parts(render(load_progress(GOLDEN[name])[0])) == _parts(text)


def test_an_attempt_records_the_flow_that_ran_it(tmp_path: Path) -> None:
    # attempts[].flow was added after v8.0.md was written, with no new number (docs/spec.md
    # 2.5): the older file reads as attempts whose flow is not recorded, and keeps its bytes.
    older, _ = load_progress(GOLDEN["v8.0"])
    assert [a.flow for a in older.attempts] == [None]
    progress = tmp_path / "progress.md"
    shutil.copy(GOLDEN["v8.0"], progress)
    store, run, _ = ProgressStore.open(progress)
    try:
        run.add_attempt("2026-11-29T09:00:00Z")
        store.checkpoint(run)
    finally:
        store.close()
    again, _ = load_progress(progress)
    assert [a.flow for a in again.attempts] == [None, VERSION]
    assert f"\n  flow: {VERSION}\n" in progress.read_text(encoding="utf-8")
