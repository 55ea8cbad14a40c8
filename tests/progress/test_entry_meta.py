"""Format 7: the run's trace id and each entry's call metadata (docs/spec.md 2.3, 2.5, 13.4)
survive the file, the journal and the upgrade from format 6; a malformed field is refused with
its place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from promptflow_resume.base.errors import ProgressFormatError
from promptflow_resume.progress import FORMAT_VERSION, load_progress, parse, render
from promptflow_resume.progress.entry import EntryMeta
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.journal import journal_path
from promptflow_resume.progress.model import Entry, Run, TraceRef
from promptflow_resume.progress.store import ProgressStore
from tests import support

REPLY = EntryMeta(
    at="2026-11-21T23:25:31.250Z",
    ms=820,
    model="gpt-4o-mini",
    answered_by="gpt-4o-mini-2024-07-18",
    tokens=(412, 31, 128),
    cost=8e-05,
    finish="tool_calls",
    retries=2,
)


def _plain_example() -> Run:
    """The example run without its sidecar (these tests write the file alone)."""
    run = example_run()
    for entry in run.transcript:
        entry.sidecar = entry.sidecar_sha256 = None
        entry.sidecar_bytes = None
    return run


def _run_with_meta() -> Run:
    run = _plain_example()
    run.trace = TraceRef(id="4bf92f3577b34da6a3ce929d0e0e4736", parent=None)
    for entry in run.transcript:
        entry.meta = EntryMeta(at="2026-11-21T23:25:30.000Z")
    run.transcript[2].meta = REPLY
    return run


def test_the_metadata_is_written_on_the_marker_and_read_back() -> None:
    run = _run_with_meta()
    text = render(run)
    assert "trace: {id: 4bf92f3577b34da6a3ce929d0e0e4736}" in text
    assert (
        " at=2026-11-21T23:25:31.250Z ms=820 model=gpt-4o-mini "
        "answered_by=gpt-4o-mini-2024-07-18 tokens=412/31/128 cost=8e-05 finish=tool_calls "
        "retries=2 d=" in text
    )
    back, report = parse(text)
    assert back == run and report.edited_entries == [] and report.warnings == []
    assert render(back) == text


def test_an_edited_metadata_field_is_an_edit_not_corruption() -> None:
    text = render(_run_with_meta()).replace(" ms=820 ", " ms=900 ", 1)
    back, report = parse(text)
    assert report.edited_entries == [3]
    assert back.transcript[2].meta is not None and back.transcript[2].meta.ms == 900


@pytest.mark.parametrize(
    ("field", "words"),
    [
        ("tokens=412/31", "tokens='412/31' is not INPUT/OUTPUT/CACHED"),
        ("ms=-3", "ms='-3' is not a whole number"),
        ("at=yesterday", "is not a UTC time"),
        ("cost=1.50", "is not a number of dollars"),
    ],
)
def test_a_malformed_metadata_field_is_refused_with_its_line(field: str, words: str) -> None:
    text = render(_run_with_meta())
    key = field.split("=")[0]
    broken = re.sub(rf" {key}=[^ ]+", f" {field}", text, count=1)
    with pytest.raises(ProgressFormatError) as caught:
        parse(broken)
    assert words in caught.value.message
    assert caught.value.line is not None


def test_the_metadata_survives_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run_with_meta()
    store = ProgressStore.create(path, run)
    entry = Entry(id=run.next_entry_id(), role="assistant", content="more", step="report")
    entry.meta = REPLY
    run.transcript.append(entry)
    store.save(run, [entry])
    assert "tokens=412/31/128" in journal_path(path).read_text(encoding="utf-8")
    loaded, report = load_progress(path)  # the journal is replayed, not yet folded
    assert report.replayed_events == 1 and loaded == run
    store.close()


def test_a_version_6_file_is_upgraded_without_a_trace() -> None:
    # The golden file a format 6 flow wrote (tests/fixtures/progress/formats/README.md).
    golden = support.FIXTURES / "progress" / "formats" / "v6.md"
    assert "trace:" not in golden.read_text(encoding="utf-8")
    loaded, _ = load_progress(golden)
    assert loaded.trace is None and all(e.meta is None for e in loaded.transcript)
    assert render(loaded).startswith(f"---\nflow_progress: {FORMAT_VERSION}\n")


def test_metadata_read_when_first_asked_for_is_the_same_everywhere() -> None:
    # A long file's reader leaves each marker's fields unread until a view asks (issue 47):
    # every way a program looks at an entry sees them as written.
    import copy
    import dataclasses
    import pickle

    from promptflow_resume.progress.digest import entry_digest
    from promptflow_resume.progress.entry import meta_key
    from promptflow_resume.progress.examples import synthetic_run
    from promptflow_resume.progress.parse import parse_bytes

    run = synthetic_run(9)
    back = parse_bytes(render(run).encode("utf-8"), path="run/progress.md").run
    first = back.transcript[0]
    assert isinstance(meta_key(first), bytes)  # not read yet: known by the marker's bytes
    assert copy.deepcopy(back.transcript) == run.transcript
    assert pickle.loads(pickle.dumps(back.transcript)) == run.transcript
    assert dataclasses.replace(first, content="edited").meta == run.transcript[0].meta
    assert [entry_digest(e) for e in back.transcript] == [entry_digest(e) for e in run.transcript]
    assert first.meta is not None and first.meta.ttft == 420 and first.meta.tps == 84.6
    second = back.transcript[1]
    written = meta_key(second)
    assert isinstance(written, bytes) and b"at=" in written  # unread, known by its bytes
    assert second.meta == run.transcript[1].meta and meta_key(second) == written  # read
    second.meta = dataclasses.replace(second.meta, ms=7)  # changed: known by what it is now
    assert meta_key(second) == second.meta
    first.meta = None  # set by hand: what was read is gone
    assert first.meta is None and meta_key(first) is None
    assert back.transcript[2:] == run.transcript[2:]
    with pytest.raises(AttributeError):
        first.not_a_field  # type: ignore[attr-defined]  # noqa: B018
