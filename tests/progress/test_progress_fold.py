"""A fold after a resume copies the unchanged entries' bytes, and writes what a render would."""

from __future__ import annotations

import os
from pathlib import Path

from promptflow_resume.progress import Entry, ProgressStore, load_progress, render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Run


def _run(entries: int) -> Run:
    run = example_run()
    entry = run.transcript[4]
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    for n in range(entries):
        run.transcript.append(
            Entry(run.next_entry_id(), "assistant", f"reply {n}\n\n# a heading\n", step="report")
        )
    return run


def test_the_fold_after_open_reuses_file_blocks_and_matches_a_full_render(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    with ProgressStore.create(path, _run(50)) as store:
        store.checkpoint(store_run := _run(50))
    store, run, _ = ProgressStore.open(path)
    with store:
        # Remembered in the file's bytes: every entry up to the example's one escaped entry
        # (CRLF), which is read from the decoded text instead.
        assert len(store._file_blocks) == 6
        run.transcript[3].content = "edited in memory"  # an entry changed in place misses
        entry = Entry(run.next_entry_id(), "user", "one more", step="report")
        run.transcript.append(entry)
        store.save(run, [entry])
        store.checkpoint(run)
    assert path.read_text(encoding="utf-8") == render(run)
    assert load_progress(path)[0] == run != store_run


def test_a_file_changed_since_it_was_opened_is_rendered_afresh(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    with ProgressStore.create(path, _run(5)):
        pass
    store, run, _ = ProgressStore.open(path)
    with store:
        assert store._file_blocks
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        run.transcript[-1].content = "changed"
        store.checkpoint(run)
        assert not store._file_blocks
    assert path.read_text(encoding="utf-8") == render(run)


def test_blocks_of_another_renderer_are_not_copied(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    with ProgressStore.create(path, _run(5)):
        pass
    data = path.read_bytes()
    # The same file as an older renderer might have spaced its first entry's heading.
    first = data.index(b"\n### 1 ")
    path.write_bytes(data[:first] + b"\n###  1 " + data[first + len(b"\n### 1 ") :])
    store, run, _ = ProgressStore.open(path)
    with store:
        store.checkpoint(run)
    assert path.read_text(encoding="utf-8") == render(run)


def test_later_folds_copy_what_the_store_wrote_and_match_a_full_render(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run(20)
    with ProgressStore.create(path, run) as store:
        assert len(store._written) == len(run.transcript)
        for n in range(3):
            entry = Entry(run.next_entry_id(), "user", f"more {n}", step="report")
            run.transcript.append(entry)
            store.save(run, [entry])
            store.checkpoint(run)
            assert len(store._written) == len(run.transcript)
            assert path.read_text(encoding="utf-8") == render(run)
        # An early entry changed in place: copied up to it, rendered from it on.
        run.transcript[2].content = "changed in place"
        store.checkpoint(run)
        assert path.read_text(encoding="utf-8") == render(run)
        # The file replaced behind the store's back: nothing of it is copied.
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("reply 1\n", "reply one\n", 1), encoding="utf-8")
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        entry = Entry(run.next_entry_id(), "user", "last", step="report")
        run.transcript.append(entry)
        store.save(run, [entry])
        store.checkpoint(run)
    assert path.read_text(encoding="utf-8") == render(run)
    assert load_progress(path)[0] == run
