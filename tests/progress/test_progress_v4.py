"""Format version 4: an attempt's hand edits (``edits``) and MCP tool-list hashes
(``mcp_tools``) are fields, not words in its notes; version 3 files are upgraded from the notes.

The version 3 file here is the example run with the notes a version 3 flow wrote, and its
version line says 3 (version 4 only adds these two keys, so the rest reads the same).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from promptflow_resume.progress import FORMAT_VERSION, load_progress, parse, render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Attempt, Run
from promptflow_resume.progress.store import ProgressStore
from promptflow_resume.sharing import read_log
from tests.support.flowproc import flow
from tests.support.share import make_project, resume, start

HASH = "sha256:0123456789abcdef"
V3_NOTES = [
    f"mcp tools: notes=sha256:ffffffffffffffff, other={HASH}",
    "tool call call_7 (count): result written by hand, used",
    "step report changed before it started; using the new text",
    "entries 3-4 edited by hand",
    f"mcp tools: notes={HASH}",
]


def _example() -> Run:
    """The example run without its sidecar (the tests here write no sidecar folder)."""
    run = example_run()
    for entry in run.transcript:
        entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    return run


def _front(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8").split("---\n", 2)[1])
    return data


def _v3_file(tmp_path: Path, notes: list[str]) -> Path:
    """The example run written as version 3 with one attempt holding ``notes``."""
    run = _example()
    run.attempts = [Attempt(n=1, started=run.created, notes=list(notes))]
    text = render(run)
    assert text.startswith(f"---\nflow_progress: {FORMAT_VERSION}\n")
    assert "\n  edits:" not in text and "mcp_tools" not in text
    path = tmp_path / "progress.md"
    path.write_text(text.replace(f"flow_progress: {FORMAT_VERSION}\n", "flow_progress: 3\n", 1))
    return path


def _save(path: Path, run: Run) -> None:
    store, _, _ = ProgressStore.open(path)
    try:
        store.checkpoint(run)
    finally:
        store.close()


def test_a_v3_file_upgrades_its_edit_and_mcp_notes_to_fields(tmp_path: Path) -> None:
    path = _v3_file(tmp_path, V3_NOTES)
    run, _ = load_progress(path)
    attempt = run.attempts[0]
    assert attempt.notes == V3_NOTES  # the notes people read are kept as written
    assert attempt.edits == [
        "tool call call_7 (count): result written by hand, used",
        "entries 3-4 edited by hand",
    ]
    assert attempt.mcp_tools == {"notes": HASH}  # the last hash note counts

    _save(path, run)
    front = _front(path)
    assert front["flow_progress"] == FORMAT_VERSION
    assert front["attempts"][0]["edits"] == attempt.edits
    assert front["attempts"][0]["mcp_tools"] == {"notes": HASH}
    assert f"\n  mcp_tools: {{notes: '{HASH}'}}\n" in path.read_text(encoding="utf-8")
    assert load_progress(path)[0] == run


def test_flow_log_marks_the_upgraded_edits(tmp_path: Path) -> None:
    path = _v3_file(tmp_path, V3_NOTES)
    done = flow("log", str(path), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    attempt = json.loads(done.stdout)["attempts"][0]
    assert attempt["edits"] == [V3_NOTES[1], V3_NOTES[3]]
    assert path.read_text(encoding="utf-8").startswith("---\nflow_progress: 3\n")  # read only


def test_a_note_that_only_says_by_hand_is_no_edit(tmp_path: Path) -> None:
    run = _example()
    words = "the budget was raised by hand (a hand-edit of nothing)"
    run.attempts = [Attempt(n=1, started=run.created, notes=[words])]
    path = tmp_path / "progress.md"
    path.write_text(render(run), encoding="utf-8")
    assert read_log(path).attempts[0].edits == []
    shown = flow("log", str(path), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"note: {words}" in shown.stdout and "edit:" not in shown.stdout


def test_an_edit_is_found_by_its_field_whatever_its_words(tmp_path: Path) -> None:
    run = _example()
    run.attempts = [
        Attempt(
            n=1, started=run.created, notes=["entry 3 reworded", "x"], edits=["entry 3 reworded"]
        )
    ]
    path = tmp_path / "progress.md"
    path.write_text(render(run), encoding="utf-8")
    assert read_log(path).attempts[0].edits == ["entry 3 reworded"]
    shown = flow("log", str(path), cwd=tmp_path)
    assert "edit: entry 3 reworded" in shown.stdout and "note: x" in shown.stdout


@pytest.fixture
def project(workdir: Path) -> Path:
    return make_project(workdir / "repo")


def test_a_resume_records_the_hand_edit_it_used_as_a_field(project: Path) -> None:
    _, path = start(project, max_turns=3)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("holds one line.", "holds exactly one line."), encoding="utf-8")
    resume(path, project)
    front = _front(path)
    assert front["flow_progress"] == FORMAT_VERSION
    assert front["attempts"][1]["edits"] == ["entry 11 edited by hand"]
    assert "edits" not in front["attempts"][0]
    assert read_log(path).attempts[1].edits == ["entry 11 edited by hand"]


def test_a_rewind_that_keeps_edits_records_them(project: Path) -> None:
    _, path = start(project)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("holds one line.", "holds exactly one line."), encoding="utf-8")
    done = flow("rewind", str(path), "--to", "report", cwd=project)
    assert done.returncode == 0, done.stderr
    attempt = _front(path)["attempts"][-1]
    assert len(attempt["edits"]) == 1 and attempt["edits"][0] == attempt["notes"][-1]
    assert "entry 11 edited by hand" in attempt["edits"][0]


def _journal(path: Path, header: dict[str, Any], attempt: dict[str, Any]) -> None:
    """A journal beside ``path`` whose one event (after the file's fold) adds ``attempt``."""
    event = {"seq": 1, "set": [[["attempts", 1], attempt]], "entries": []}
    text = json.dumps(header) + "\n" + json.dumps(event) + "\n"
    path.with_name(path.name + ".journal").write_text(text, encoding="utf-8")


def test_a_journal_left_by_a_v3_flow_is_upgraded_once_replayed(tmp_path: Path) -> None:
    # A version 3 flow crashed after starting attempt 2: its journal adds the attempt with the
    # notes that version wrote, under a header that names no progress format.
    path = _v3_file(tmp_path, ["entry 3 edited by hand"])
    attempt = {"n": 2, "started": "2026-11-22T09:14:10Z", "notes": V3_NOTES}
    _journal(path, {"flow_journal": 2, "run_id": "20261121-232529-release-a1b2"}, attempt)
    run, report = load_progress(path)
    assert report.replayed_events == 1
    assert run.attempts[0].edits == ["entry 3 edited by hand"]
    assert run.attempts[1].edits == [V3_NOTES[1], V3_NOTES[3]]
    assert run.attempts[1].mcp_tools == {"notes": HASH}


def test_a_v4_journal_is_replayed_as_written(tmp_path: Path) -> None:
    run = _example()
    run.attempts = [Attempt(n=1, started=run.created)]
    path = tmp_path / "progress.md"
    path.write_text(render(run), encoding="utf-8")
    attempt = {"n": 2, "started": "2026-11-22T09:14:10Z", "notes": ["raised by hand"]}
    header = {"flow_journal": 2, "run_id": run.run_id, "flow_progress": 4}
    _journal(path, header, attempt)
    again, report = load_progress(path)
    assert report.replayed_events == 1
    assert again.attempts[1].notes == ["raised by hand"] and again.attempts[1].edits == []


_NOTE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40)
_HASHES = st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9_-]{0,11}", fullmatch=True),
    st.from_regex(r"sha256:[0-9a-f]{16}", fullmatch=True),
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(notes=st.lists(_NOTE, max_size=3), picks=st.lists(st.booleans(), max_size=3), hashes=_HASHES)
def test_edits_and_tool_hashes_round_trip(
    notes: list[str], picks: list[bool], hashes: dict[str, str]
) -> None:
    run = _example()
    edits = [note for note, pick in zip(notes, picks, strict=False) if pick]
    run.attempts = [Attempt(n=1, started=run.created, notes=notes, edits=edits, mcp_tools=hashes)]
    again, _ = parse(render(run), path="progress.md")
    assert again == run
    assert (again.attempts[0].edits, again.attempts[0].mcp_tools) == (edits, hashes)
