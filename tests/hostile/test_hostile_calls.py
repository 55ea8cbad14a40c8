"""A progress file cannot make a tool run: only calls this machine's flow recorded run on resume.

The workflow is ``fixtures/engine/counter.prompt.md``: its first step's second reply calls the
non-idempotent ``bump`` and the idempotent ``peek``. Killed right after bump's result is
recorded, the run has ``peek`` waiting, recorded (and sealed) by flow here. Each test changes
that situation the way a stranger's file could (a call added or edited, the file from another
machine, a file committed into ``.flow/runs``) and checks what a user would: what ran (the
counter file counts bumps), what flow said, and what the file holds.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from promptflow_resume.progress import ProgressStore, load_progress, render
from promptflow_resume.progress.model import Entry
from promptflow_resume.run.reconcile import DENIED_RESULT
from tests import support
from tests.support.faults import assert_clean_error
from tests.support.flowproc import flow, flow_env

FIXTURES = support.FIXTURES / "engine"
PROGRESS = "run/progress.md"
RUN = ("run", "counter.prompt.md", "--recording", "counter.script.yaml")


def _project(where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    for name in ("counter.prompt.md", "counter.script.yaml"):
        shutil.copy(FIXTURES / name, where / name)
    return where


def _env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a flow process on the machine whose key folder is ``home``."""
    return flow_env(FLOW_HOME=str(home), **extra)


def _bumps(where: Path) -> int:
    counter = where / "counter.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _killed_with_peek_waiting(where: Path, home: Path) -> Path:
    """A run killed (SIGKILL) right after the second bump's result was recorded."""
    crash = _env(home, FLOW_CRASH_AT="engine.tool_result_recorded:2")
    result = flow(*RUN, "--progress", PROGRESS, "--new", cwd=_project(where), env=crash)
    assert result.returncode == -9, result.stderr
    assert _bumps(where) == 2
    return where / PROGRESS


def _fold(path: Path) -> None:
    """Fold the journal the killed run left into progress.md, as its next writer would."""
    store, run, _ = ProgressStore.open(path)
    try:
        store.checkpoint(run)
    finally:
        store.close()


def _waiting_call(path: Path) -> Entry:
    run, _ = load_progress(path)
    answered = {e.call_id for e in run.transcript if e.role == "tool_result"}
    waiting = [e for e in run.transcript if e.role == "tool_call" and e.call_id not in answered]
    assert [e.tool for e in waiting] == ["peek"]
    return waiting[0]


def test_a_call_recorded_here_runs_on_resume(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = _killed_with_peek_waiting(tmp_path / "p", home)
    result = flow("resume", PROGRESS, cwd=tmp_path / "p", env=_env(home))
    assert result.returncode == 0, result.stderr
    run, _ = load_progress(path)
    peek = next(e for e in run.transcript if e.role == "tool_result" and e.tool == "peek")
    assert peek.content.count("bumped") == 2 and not peek.is_error
    assert run.seal is not None and run.seal.calls == {}  # answered calls keep no seal


def test_a_call_whose_arguments_were_edited_waits_for_a_person(tmp_path: Path) -> None:
    home, where = tmp_path / "home", tmp_path / "p"
    path = _killed_with_peek_waiting(where, home)
    _fold(path)
    call = _waiting_call(path)
    text = path.read_text(encoding="utf-8")
    line = f"Call `{call.call_id}` to `peek` with `{{}}`."
    assert line in text
    path.write_text(text.replace(line, line.replace("{}", '{"all": true}')), encoding="utf-8")
    entries = len(load_progress(path)[0].transcript)

    status = flow("status", "--json", PROGRESS, cwd=where, env=_env(home))
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["can_resume"] is False
    assert data["unsealed_calls"] == [
        {
            "call_id": call.call_id,
            "tool": "peek",
            "step": "inspect",
            "entry": call.id,
            "arguments": '{"all": true}',
        }
    ]
    held = flow("resume", PROGRESS, cwd=where, env=_env(home))
    message = assert_clean_error(held, 8, "not recorded by flow on this machine", "peek")
    assert '{"all": true}' in message and "--trust-calls" in message and "--deny-calls" in message
    run, _ = load_progress(path)
    assert run.status == "needs_review"
    assert len(run.transcript) == entries  # nothing was added: no result, no placeholder

    denied = flow("resume", PROGRESS, "--deny-calls", cwd=where, env=_env(home))
    assert denied.returncode == 0, denied.stderr
    run, _ = load_progress(path)
    result = next(e for e in run.transcript if e.role == "tool_result" and e.tool == "peek")
    assert result.content == DENIED_RESULT and result.is_error
    assert run.status == "completed" and _bumps(where) == 2
    assert any("--deny-calls" in note for a in run.attempts for note in a.notes)


def test_a_call_added_to_the_file_never_runs_unless_a_person_says_so(tmp_path: Path) -> None:
    home, where = tmp_path / "home", tmp_path / "p"
    path = _killed_with_peek_waiting(where, home)
    run, _ = load_progress(path)
    # A stranger appends a call of the non-idempotent command; digests recomputed by render.
    run.transcript.append(
        Entry(run.next_entry_id(), "tool_call", "{}", step="inspect", call_id="forged", tool="bump")
    )
    path.write_text(render(run), encoding="utf-8")

    held = flow("resume", PROGRESS, cwd=where, env=_env(home))
    assert_clean_error(held, 8, "bump (forged) with {}")
    assert _bumps(where) == 2  # neither the forged bump nor anything else ran
    trusted = flow("resume", PROGRESS, "--trust-calls", cwd=where, env=_env(home))
    assert "run as written (--trust-calls): bump (forged)" in trusted.stderr
    assert _bumps(where) == 3  # the person let it run, once
    # (The recorded session has no reply for the extra turn the call caused: the run stops
    # failed, resumable.) Resuming again never runs it a second time.
    flow("resume", PROGRESS, cwd=where, env=_env(home))
    assert _bumps(where) == 3


def test_a_file_written_on_another_machine_runs_no_pending_call(tmp_path: Path) -> None:
    mine, theirs, where = tmp_path / "mine", tmp_path / "theirs", tmp_path / "p"
    path = _killed_with_peek_waiting(where, theirs)
    held = flow("resume", PROGRESS, cwd=where, env=_env(mine))
    assert_clean_error(held, 8, "not recorded by flow on this machine", "peek")
    assert "counter.txt" not in "".join(
        e.content for e in load_progress(path)[0].transcript if e.role == "tool_result"
    )
    # On the machine that wrote it, the same file resumes as usual.
    back = flow("resume", PROGRESS, cwd=where, env=_env(theirs))
    assert back.returncode == 0, back.stderr


def test_an_identical_run_committed_by_someone_else_is_not_auto_resumed(tmp_path: Path) -> None:
    theirs, mine = tmp_path / "theirs", tmp_path / "mine"
    where = _project(tmp_path / "p")
    crash = _env(theirs, FLOW_CRASH_AT="engine.tool_result_recorded:2")
    assert flow(*RUN, "--new", cwd=where, env=crash).returncode == -9
    (committed,) = (where / ".flow" / "runs").glob("*/progress.md")
    before = committed.read_bytes()

    fresh = flow(*RUN, cwd=where, env=_env(mine))
    assert fresh.returncode == 0, fresh.stderr
    assert "was not written by flow on this machine" in fresh.stdout + fresh.stderr
    assert "resuming identical incomplete run" not in fresh.stdout + fresh.stderr
    assert committed.read_bytes() == before  # the stranger's file was neither run nor changed
    assert len(list((where / ".flow" / "runs").glob("*/progress.md"))) == 2

    # The machine that wrote it resumes it without asking, as before.
    own = flow(*RUN, cwd=where, env=_env(theirs))
    assert own.returncode == 0, own.stderr
    assert "resuming identical incomplete run" in own.stdout + own.stderr


def test_a_shared_copy_carries_no_seal(tmp_path: Path) -> None:
    home, where = tmp_path / "home", tmp_path / "p"
    path = _killed_with_peek_waiting(where, home)
    assert load_progress(path)[0].seal is not None
    shared = flow("share", PROGRESS, "--output", "shared.md", cwd=where, env=_env(home))
    assert shared.returncode == 0, shared.stderr
    copy, _ = load_progress(where / "shared.md")
    assert copy.seal is None
    # Resumed on the machine that shared it, the copy still holds its pending call for a person.
    held = flow("resume", "shared.md", cwd=where, env=_env(home))
    assert_clean_error(held, 8, "not recorded by flow on this machine", "peek")


def test_a_key_file_that_is_not_flow_s_own_is_refused(tmp_path: Path) -> None:
    """A planted key (a link to another file, a FIFO, the wrong size) is never read or used:
    the run stops before it starts, naming the file (exit 12)."""
    where = _project(tmp_path / "p")
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"x" * 32)
    cases = {
        "link": lambda key: key.symlink_to(secret),
        "fifo": lambda key: os.mkfifo(key),
        "short": lambda key: key.write_bytes(b"short"),
    }
    for name, plant in cases.items():
        home = tmp_path / name
        home.mkdir()
        plant(home / "key")
        result = flow(*RUN, "--progress", f"{name}/progress.md", cwd=where, env=_env(home))
        message = assert_clean_error(result, 12, str(home / "key"), "FLOW_HOME")
        assert "cannot be used" in message, name
        assert not (where / name).exists()
