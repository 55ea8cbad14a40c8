"""The progress store: journal events, folds, replay, locking, sidecars, hand edits."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from promptflow_resume.base.errors import (
    DigestError,
    InputError,
    ProgressFormatError,
    RunLockedError,
    SidecarError,
)
from promptflow_resume.progress import (
    ProgressStore,
    journal_path,
    load_progress,
    lock_path,
    owner_path,
    parse,
    render,
    validate_file,
)
from promptflow_resume.progress.examples import example_run, synthetic_run
from promptflow_resume.progress.model import Entry, Run
from tests.support.flowproc import flow_env


def _run() -> Run:
    """The example run without its (absent) sidecar file."""
    run = example_run()
    entry = run.transcript[4]
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    return run


def _add(run: Run, role: str, content: str, **extra: object) -> Entry:
    entry = Entry(run.next_entry_id(), role, content, step="report", **extra)  # type: ignore[arg-type]
    run.transcript.append(entry)
    return entry


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_create_writes_an_owner_only_file_and_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "r1" / "progress.md"
    run = _run()
    with ProgressStore.create(path, run):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.read_text(encoding="utf-8") == render(run)
        owner = json.loads(owner_path(path).read_text(encoding="utf-8"))
        assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
    assert not owner_path(path).exists()  # a clean exit leaves no owner behind
    assert not lock_path(path).exists()  # nor a lock file for `git add -A` to commit
    with pytest.raises(InputError, match="already exists"):
        ProgressStore.create(path, _run())


def test_a_second_writer_is_refused_with_the_owner_named(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    store = ProgressStore.create(path, _run())
    try:
        with pytest.raises(RunLockedError) as caught:
            ProgressStore.open(path)
        message = str(caught.value)
        assert f"pid {os.getpid()} on {socket.gethostname()}, since 20" in message
        assert caught.value.exit_code == 6
    finally:
        store.close()
    store, run, _ = ProgressStore.open(path)  # released on close
    store.close()
    assert run == _run()


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    ProgressStore.create(path, _run()).close()
    script = (
        "import os, signal, sys\n"
        "from promptflow_resume.progress import ProgressStore\n"
        "store, run, _ = ProgressStore.open(sys.argv[1])\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(path)], env=flow_env(), check=False)
    assert proc.returncode == -9
    stale = json.loads(owner_path(path).read_text(encoding="utf-8"))
    assert stale["pid"] != os.getpid()  # the dead writer's owner file is still there
    store, _run_again, _ = ProgressStore.open(path)
    assert json.loads(owner_path(path).read_text(encoding="utf-8"))["pid"] == os.getpid()
    store.close()


def test_save_appends_one_journal_line_and_leaves_progress_md_alone(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    before = path.read_bytes()
    entry = _add(run, "assistant", "Tests: 41 passed.")
    run.status = "running"
    store.save(run, [entry])
    assert path.read_bytes() == before
    lines = journal_path(path).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2  # header + one event
    event = json.loads(lines[1])
    assert event["seq"] == 1 and event["entries"][0]["content"] == "Tests: 41 passed."
    # Only what changed: the status (and the transcript summary), not the whole front matter.
    changed = {tuple(path): value for path, value in event["set"]}
    assert changed[("status",)] == "running"
    assert ("run_id",) not in changed and ("workflow",) not in changed
    assert stat.S_IMODE(journal_path(path).stat().st_mode) == 0o600
    store.close()


def test_event_size_does_not_grow_with_the_run(tmp_path: Path) -> None:
    sizes = []
    for n in (10, 1000):
        path = tmp_path / f"r{n}" / "progress.md"
        run = synthetic_run(n)
        store = ProgressStore.create(path, run)
        entry = _add(run, "assistant", "x" * 300)
        store.save(run, [entry])
        sizes.append(len(journal_path(path).read_text(encoding="utf-8").splitlines()[1]))
        store.close()
    assert abs(sizes[0] - sizes[1]) < 16  # only the numbers differ in width


def test_a_crash_after_saves_is_replayed_by_load_and_folded_by_open(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    for text in ("one", "two", "three"):
        entry = _add(run, "assistant", text)
        run.usage.turns += 1
        store.save(run, [entry])
    store.close()  # no checkpoint: as if the process died
    checkpointed, _ = parse(path.read_text(encoding="utf-8"))
    assert len(checkpointed.transcript) == 8
    loaded, report = load_progress(path)
    assert loaded == run and report.replayed_events == 3
    store, opened, report = ProgressStore.open(path)
    assert opened == run and report.replayed_events == 3
    assert not journal_path(path).exists()  # folded
    assert parse(path.read_text(encoding="utf-8"))[0] == run
    store.close()


def test_a_journal_already_folded_is_never_applied_twice(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    entry = _add(run, "assistant", "first")
    run.status = "running"
    store.save(run, [entry])
    stale = journal_path(path).read_bytes()
    run.status = "completed"  # changed after the last event, written only by the fold
    store.checkpoint(run)
    store.close()
    # A crash between the rename and the unlink leaves the old journal beside the new file.
    journal_path(path).write_bytes(stale)
    loaded, report = load_progress(path)
    assert loaded == run and loaded.status == "completed"
    assert report.replayed_events == 0
    store, opened, _ = ProgressStore.open(path)
    assert opened == run and not journal_path(path).exists()
    store.close()


def test_a_torn_last_journal_line_is_ignored_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    store.save(run, [_add(run, "assistant", "kept")])
    store.close()
    with open(journal_path(path), "ab") as handle:
        handle.write(b'{"seq":2,"fm":{"flow_pro')
    loaded, report = load_progress(path)
    assert loaded == run and report.replayed_events == 1
    assert any("incomplete" in w for w in report.warnings)


@pytest.mark.parametrize(
    ("damage", "error", "words"),
    [
        (lambda lines: [lines[0], "{not json", *lines[1:]], ProgressFormatError, "damaged"),
        (
            lambda lines: [lines[0].replace("20261121", "20990101"), *lines[1:]],
            ProgressFormatError,
            "belongs to run",
        ),
        (lambda lines: [lines[0], lines[2], lines[1]], ProgressFormatError, "count up by one"),
        (
            lambda lines: [lines[0], lines[1].replace('"content":"a"', '"content":"A"'), lines[2]],
            DigestError,
            "does not match",
        ),
    ],
    ids=["bad-line", "other-run", "out-of-order", "altered-entry"],
)
def test_a_damaged_journal_is_refused_and_left_untouched(
    tmp_path: Path, damage: object, error: type[Exception], words: str
) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    store.save(run, [_add(run, "assistant", "a")])
    store.save(run, [_add(run, "assistant", "b")])
    store.close()
    lines = journal_path(path).read_text(encoding="utf-8").splitlines()
    journal_path(path).write_text("\n".join(damage(lines)) + "\n", encoding="utf-8")  # type: ignore[operator]
    before = _files(tmp_path)
    with pytest.raises(error, match=words):
        load_progress(path)
    with pytest.raises(error, match=words):
        ProgressStore.open(path)
    assert _files(tmp_path) == before


def test_save_with_entries_out_of_step_folds_instead(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    _add(run, "assistant", "not passed to save")
    store.save(run, [])
    assert not journal_path(path).exists()
    assert parse(path.read_text(encoding="utf-8"))[0] == run
    store.close()


def test_resaving_a_loaded_unchanged_file_changes_no_byte(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = synthetic_run(60)
    run.transcript[4].sidecar = None
    store = ProgressStore.create(path, run)
    store.save(run, [_add(run, "assistant", "## not raw\n\n```\ncode\n```")])
    store.checkpoint(run)
    store.close()
    before = path.read_bytes()
    store, loaded, _ = ProgressStore.open(path)
    store.checkpoint(loaded)
    store.close()
    assert path.read_bytes() == before


def test_load_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    store.save(run, [_add(run, "assistant", "pending in the journal")])
    store.close()
    before = _files(tmp_path)
    load_progress(path)
    validate_file(path)
    assert _files(tmp_path) == before


def test_hand_edits_of_messages_are_honored_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    ProgressStore.create(path, _run()).close()
    text = path.read_text(encoding="utf-8")
    edited = text.replace("List the commits since v1.4.0.", "List the commits since v1.3.0.")
    edited = edited.replace("status: interrupted\n", "status: paused\n", 1)
    path.write_text(edited, encoding="utf-8")
    run, report = load_progress(path)
    assert run.transcript[1].content == "List the commits since v1.3.0."
    assert run.status == "paused"
    assert report.edited_entries == [2]
    assert any(
        w.startswith(f"{path}:") and "entry 2 (user, step inspect)" in w for w in report.warnings
    )
    # The next fold takes the edit in: the digest now matches and nothing is reported.
    store, opened, _ = ProgressStore.open(path)
    store.checkpoint(opened)
    store.close()
    assert load_progress(path)[1].edited_entries == []


def test_edits_to_generated_sections_are_ignored_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    ProgressStore.create(path, _run()).close()
    text = path.read_text(encoding="utf-8").replace(
        "| Provider | openai |", "| Provider | anthropic |"
    )
    path.write_text(text, encoding="utf-8")
    run, report = load_progress(path)
    assert run.config.provider == "openai"
    line = text[: text.index("## Configuration")].count("\n") + 1
    assert report.warnings == [
        f"{path}:{line}: the configuration section was edited; it is generated from the front "
        "matter, so the edit has no effect (edit the front matter instead)."
    ]


def test_windows_line_endings_and_a_byte_order_mark_still_load(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    path.write_bytes(b"\xef\xbb\xbf" + render(run).replace("\n", "\r\n").encode("utf-8"))
    loaded, report = load_progress(path)
    assert loaded == run and report.edited_entries == []


def test_sidecars_are_written_confined_and_verified(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    data = os.urandom(70_000)
    rel, digest = store.write_sidecar("call_9/../../etc passwd.bin", data)
    assert rel == "progress.files/call_9-etc-passwd.bin"
    assert stat.S_IMODE((tmp_path / rel).stat().st_mode) == 0o600
    assert store.write_sidecar("call_9/../../etc passwd.bin", data)[0] == rel  # same bytes
    other, _ = store.write_sidecar("call_9/../../etc passwd.bin", b"different")
    assert other == "progress.files/call_9-etc-passwd-2.bin"
    entry = _add(
        run,
        "tool_result",
        "binary (preview)",
        call_id="c9",
        tool="archive",
        sidecar=rel,
        sidecar_sha256=digest,
        sidecar_bytes=len(data),
    )
    store.save(run, [entry])
    store.checkpoint(run)
    assert store.read_sidecar(entry) == data
    store.close()
    assert load_progress(path)[0] == run
    (tmp_path / rel).write_bytes(data[:-1] + b"!")
    with pytest.raises(SidecarError, match="does not match its recorded hash"):
        load_progress(path)
    (tmp_path / rel).unlink()
    with pytest.raises(SidecarError, match="does not exist") as caught:
        load_progress(path)
    assert (
        caught.value.line
        == path.read_text(encoding="utf-8")
        .split("\n")
        .index(
            next(
                line
                for line in path.read_text(encoding="utf-8").split("\n")
                if line.startswith("<!-- flow:entry 9 ")
            )
        )
        + 1
    )


def test_a_sidecar_reached_through_a_symlink_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = _run()
    store = ProgressStore.create(path, run)
    rel, digest = store.write_sidecar("out.txt", b"hello")
    entry = _add(
        run,
        "tool_result",
        "hello",
        call_id="c",
        tool="t",
        sidecar=rel,
        sidecar_sha256=digest,
        sidecar_bytes=5,
    )
    store.checkpoint(run)
    store.close()
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"hello")
    (tmp_path / rel).unlink()
    (tmp_path / rel).symlink_to(outside)
    with pytest.raises(SidecarError, match="symlink"):
        load_progress(path)
    (tmp_path / rel).unlink()
    shutil.move(str(tmp_path / "progress.files"), str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere" / "out.txt").write_bytes(b"hello")
    (tmp_path / "progress.files").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SidecarError, match="symlink"):
        load_progress(path)
    assert entry.sidecar == rel


def test_a_fold_after_entries_changed_in_place_writes_their_new_text(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    run = synthetic_run(9)
    with ProgressStore.create(path, run) as store:
        store.checkpoint(run)  # a second fold reuses what the first one rendered
        assert path.read_text(encoding="utf-8") == render(run)
        run.transcript[3].content = "A reply rewritten in place."
        run.transcript[5].is_error = True
        run.transcript[8].step = "inspect"
        store.checkpoint(run)
    assert path.read_text(encoding="utf-8") == render(run)
    loaded, report = load_progress(path)
    assert loaded.transcript == run.transcript
    assert report.edited_entries == []


def test_a_lock_file_removed_by_its_holder_is_never_shared(tmp_path: Path) -> None:
    """A process that opened the lock file just before its holder removed it must not hold a
    lock on the removed file while another process locks a new one of the same name."""
    import fcntl

    from promptflow_resume.base.runlock import LockHeld, RunLock

    path = tmp_path / "progress.md.lock"
    first = RunLock(path)
    first.acquire()
    stale = os.open(path, os.O_RDWR)  # a taker that opened the file, not yet locked it
    try:
        first.release()
        assert not path.exists()
        fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # it gets the removed file's lock
        second = RunLock(path)
        second.acquire()  # the name leads to a new file: locked, not the stale one
        with pytest.raises(LockHeld):
            RunLock(path).acquire()
        second.release()
    finally:
        os.close(stale)
