"""File snapshots (docs/spec.md 12) in real git repositories: each call that can change files
is snapshotted; rewind and fork put the files back byte for byte; files changed by someone
else are never overwritten silently; a crash between a command and its snapshot is taken on
resume, marked late; ``flow show``, ``flow review`` and ``flow clean`` see the snapshots.

The runs are three command steps (no model) whose shell scripts create, modify, delete and
rename text and binary files.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from promptflow_resume.api import RunOptions, StartRequest, resume_run, start_run
from promptflow_resume.base.errors import InputError
from promptflow_resume.filerestore import FilesChangedError
from promptflow_resume.progress import load_progress
from promptflow_resume.sharing import fork, rewind
from promptflow_resume.sharing.restore import FilesChoice, RestoreNotConfirmedError
from promptflow_resume.snapshots import SnapshotRepo, snapshot_ref
from tests.support.flowproc import flow, flow_env

WORKFLOW = """\
---
description: three steps whose commands change files
provider: echo
commands:
  sh:
    argv: ["sh", "-c", "eval \\"$1\\"", "sh", "{script}"]
    parameters:
      script: {type: string}
---
## Step 1: Create
> run: sh script="echo one >a.txt; mkdir d; head -c 3000 /dev/urandom >d/b.bin; echo k >keep.txt"

## Step 2: Modify
> run: sh script="echo two >> a.txt; mv d/b.bin d/c.bin; echo new > n.txt; chmod +x n.txt"

## Step 3: Delete
> run: sh script="rm a.txt; rm -r d; echo three > n.txt; echo x > skip.log"
"""


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _tree(root: Path) -> dict[str, tuple[str, bool]]:
    """Every file outside .git and .flow: its sha256 and whether it is executable."""
    found: dict[str, tuple[str, bool]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", ".flow")]
        for name in files:
            path = Path(folder, name)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[path.relative_to(root).as_posix()] = (digest, os.access(path, os.X_OK))
    return found


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "three.prompt.md").write_text(WORKFLOW)
    (root / ".gitignore").write_text("*.log\n")
    (root / "tracked.txt").write_text("tracked\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    return root


def _run(root: Path, *, snapshots: bool = True) -> Path:
    progress = root / ".flow" / "runs" / "r" / "progress.md"
    outcome = start_run(
        StartRequest(root / "three.prompt.md", progress=progress),
        RunOptions(workspace=root, snapshots=snapshots),
    )
    assert outcome.exit_code == 0, outcome.run.last_error
    return progress


def test_each_call_is_snapshotted_with_the_files_it_changed(repo: Path) -> None:
    user_index = (repo / ".git" / "index").read_bytes()
    progress = _run(repo)
    run, _ = load_progress(progress)
    assert run.snapshots is not None
    assert run.snapshots.ref == snapshot_ref(run.run_id)
    calls = run.snapshots.calls
    assert [c.entry for c in calls] == [0, 2, 4, 6]
    assert calls[1].added == ["a.txt", "d/b.bin", "keep.txt"] and "1 binary" in calls[1].stat
    assert calls[2].added == ["n.txt"] and calls[2].modified == ["a.txt"]
    assert calls[2].renamed == [["d/b.bin", "d/c.bin"]]
    assert calls[3].deleted == ["a.txt", "d/c.bin"] and calls[3].modified == ["n.txt"]
    # Ignored files and .flow/ are never in a snapshot; the user's index, branches and
    # stash are untouched.
    latest = _git(repo, "ls-tree", "-r", "--name-only", calls[3].commit or "").split()
    assert "skip.log" not in latest and not any(p.startswith(".flow") for p in latest)
    assert (repo / ".git" / "index").read_bytes() == user_index
    assert _git(repo, "branch", "--format=%(refname)").split() == ["refs/heads/master"] or (
        _git(repo, "branch", "--format=%(refname)").split() == ["refs/heads/main"]
    )
    assert _git(repo, "stash", "list") == ""
    # One ref per run, a chain of commits.
    assert _git(repo, "rev-list", "--count", run.snapshots.ref).strip() == "4"
    # flow show lists each call's files; --json carries the records.
    shown = flow("show", str(progress), "--width", "200", cwd=repo, env=flow_env(COLUMNS="200"))
    assert shown.returncode == 0, shown.stderr
    assert "files: +n.txt ~a.txt d/b.bin→d/c.bin" in shown.stdout
    assert "files: ~n.txt -a.txt -d/c.bin" in shown.stdout
    data = json.loads(flow("show", str(progress), "--json", cwd=repo).stdout)
    assert [c["entry"] for c in data["snapshots"]["calls"]] == [0, 2, 4, 6]


def test_rewind_restores_the_tree_of_each_step_byte_for_byte(repo: Path) -> None:
    # The tree before each step, recorded by running the steps' scripts by hand in a copy.
    progress = _run(repo)
    run, _ = load_progress(progress)
    assert run.snapshots is not None
    expected = {}
    for step, snap in zip((3, 2, 1), reversed(run.snapshots.calls[:3]), strict=True):
        # Check out the snapshot into a scratch folder with git itself: the reference.
        scratch = repo.parent / f"ref{step}"
        scratch.mkdir()
        archive = subprocess.run(
            ["git", "archive", snap.commit or ""], cwd=repo, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
        expected[step] = _tree(scratch)
    for step in (3, 2, 1):
        result = rewind(progress, str(step))
        assert result.files is not None
        now = {p: v for p, v in _tree(repo).items() if not p.endswith(".log")}
        assert now == expected[step], step
    # Back at the start: the run's files are gone, the user's are as they were.
    assert sorted(_tree(repo)) == [".gitignore", "skip.log", "three.prompt.md", "tracked.txt"]
    assert _git(repo, "status", "--porcelain") == ""
    # Resuming runs the three steps again and snapshots them again.
    outcome = resume_run(progress, RunOptions(workspace=repo))
    assert outcome.exit_code == 0
    run, _ = load_progress(progress)
    assert run.snapshots is not None and [c.entry for c in run.snapshots.calls] == [0, 2, 4, 6]


def test_a_file_changed_after_the_run_is_never_overwritten_silently(repo: Path) -> None:
    progress = _run(repo)
    (repo / "n.txt").write_text("the user's own edit\n")
    (repo / "mine.txt").write_text("a file the run never had\n")
    with pytest.raises(FilesChangedError) as caught:
        rewind(progress, "2")
    assert caught.value.files == ["n.txt"] and caught.value.exit_code == 18
    # Nothing changed: the file, the tree, the progress file's steps.
    assert (repo / "n.txt").read_text() == "the user's own edit\n"
    assert load_progress(progress)[0].steps["delete"].status == "completed"
    # The CLI says so in one paragraph with exit 18, naming the file.
    refused = flow("rewind", str(progress), "--to", "2", "--yes", cwd=repo)
    assert refused.returncode == 18 and "n.txt" in refused.stderr
    assert "Traceback" not in refused.stderr
    # --force overwrites it; the file the run never had stays.
    result = rewind(progress, "2", files=FilesChoice(force=True))
    assert result.files is not None and "n.txt" in result.files.plan.conflicts
    assert not (repo / "n.txt").exists() and "n.txt" in result.files.plan.delete
    assert (repo / "mine.txt").exists() and "mine.txt" in result.files.plan.kept
    # Nothing is lost: the overwritten edit is in the ref's chain, just before the restore.
    ref = snapshot_ref(load_progress(progress)[0].run_id)
    assert _git(repo, "show", f"{ref}~1:n.txt") == "the user's own edit\n"


def test_headless_rewind_needs_yes_and_no_files_moves_the_conversation_only(
    repo: Path,
) -> None:
    progress = _run(repo)
    before = _tree(repo)
    asked = flow("rewind", str(progress), "--to", "1", cwd=repo)
    assert asked.returncode == 9, asked.stderr
    assert "--yes" in asked.stderr and _tree(repo) == before
    assert load_progress(progress)[0].steps["create"].status == "completed"
    with pytest.raises(RestoreNotConfirmedError):
        rewind(progress, "1", files=FilesChoice(confirm=lambda plan, root: False))
    moved = flow("rewind", str(progress), "--to", "3", "--no-files", cwd=repo)
    assert moved.returncode == 0 and _tree(repo) == before
    done = flow("rewind", str(progress), "--to", "2", "--yes", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)["files"]
    assert sorted(files["write"]) == ["a.txt", "d/b.bin"] and files["delete"] == ["n.txt"]


def test_fork_restores_the_files_and_keeps_the_snapshots_alive(repo: Path) -> None:
    progress = _run(repo)
    original, _ = load_progress(progress)
    result = fork(progress, "2")
    assert result.files is not None
    assert (repo / "a.txt").read_text() == "one\n" and (repo / "d" / "b.bin").exists()
    new, _ = load_progress(result.output)
    assert new.snapshots is not None and [c.entry for c in new.snapshots.calls] == [0, 2]
    assert new.snapshots.ref == snapshot_ref(new.run_id)
    # The original's ref removed (flow clean), the fork's snapshots are still there.
    repo_handle = SnapshotRepo.find(repo, original.run_id, None)
    assert repo_handle is not None
    repo_handle.remove()
    assert _git(repo, "cat-file", "-t", new.snapshots.calls[1].commit or "").strip() == "commit"
    outcome = resume_run(result.output, RunOptions(workspace=repo))
    assert outcome.exit_code == 0
    assert not (repo / "a.txt").exists() and (repo / "n.txt").read_text() == "three\n"


def test_review_and_clean_of_a_run_without_a_worktree(repo: Path) -> None:
    progress = _run(repo)
    review = flow("review", str(progress), "--json", cwd=repo)
    assert review.returncode == 0, review.stderr
    data = json.loads(review.stdout)
    assert data["from_snapshots"] is True
    assert sorted(f["path"] for f in data["files"]) == ["keep.txt", "n.txt"]
    run, _ = load_progress(progress)
    assert run.snapshots is not None
    cleaned = flow("clean", str(repo / ".flow" / "runs"), "--older-than", "0s", cwd=repo)
    assert cleaned.returncode == 0, cleaned.stderr
    assert _git(repo, "for-each-ref", "refs/flow") == ""


def test_a_snapshot_gone_from_the_repository_is_exit_19(repo: Path) -> None:
    progress = _run(repo)
    run, _ = load_progress(progress)
    assert run.snapshots is not None
    _git(repo, "update-ref", "-d", run.snapshots.ref)
    _git(repo, "reflog", "expire", "--expire=now", "--all")
    _git(repo, "gc", "-q", "--prune=now")
    gone = flow("rewind", str(progress), "--to", "1", "--yes", cwd=repo)
    assert gone.returncode == 19, gone.stderr
    assert "--no-files" in gone.stderr and "Traceback" not in gone.stderr
    moved = flow("rewind", str(progress), "--to", "1", "--no-files", cwd=repo)
    assert moved.returncode == 0, moved.stderr


def test_no_snapshots_and_outside_git(repo: Path, tmp_path: Path) -> None:
    progress = _run(repo, snapshots=False)
    assert load_progress(progress)[0].snapshots is None
    assert _git(repo, "for-each-ref", "refs/flow") == ""
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "three.prompt.md").write_text(WORKFLOW)
    done = flow("run", "three.prompt.md", cwd=plain)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("is not in a git repository") == 1


def test_a_crash_between_a_command_and_its_snapshot_is_reconciled_late(repo: Path) -> None:
    crashed = flow(
        "run",
        "three.prompt.md",
        "--progress",
        ".flow/runs/r/progress.md",
        cwd=repo,
        env=flow_env(FLOW_CRASH_AT="engine.before_snapshot:2"),
    )
    assert crashed.returncode == -9, crashed.stderr
    progress = repo / ".flow" / "runs" / "r" / "progress.md"
    run, _ = load_progress(progress)
    assert run.snapshots is not None and run.snapshots.calls[-1].commit is None
    assert run.snapshots.calls[-1].entry == 4
    resumed = flow("resume", str(progress), cwd=repo)
    assert resumed.returncode == 0, resumed.stderr
    run, _ = load_progress(progress)
    assert run.snapshots is not None
    late = [c for c in run.snapshots.calls if c.late]
    assert [c.entry for c in late] == [4] and late[0].added == ["n.txt"]
    # The command of step 2 ran once: its result was recorded before the crash.
    assert sum(1 for e in run.transcript if e.role == "tool_result") == 3
    assert any("taken late" in n for a in run.attempts for n in a.notes)
    # And the late snapshot is a real one: rewinding to step 3 restores its files.
    rewind(progress, "3")
    assert (repo / "a.txt").read_text() == "one\ntwo\n" and (repo / "d" / "c.bin").exists()


def test_a_run_resumed_in_another_clone_snapshots_from_there(repo: Path, tmp_path: Path) -> None:
    crashed = flow(
        "run",
        "three.prompt.md",
        "--progress",
        ".flow/runs/r/progress.md",
        cwd=repo,
        env=flow_env(FLOW_CRASH_AT="engine.before_snapshot:2"),
    )
    assert crashed.returncode == -9, crashed.stderr
    clone = tmp_path / "clone"
    # --no-local: only what the branches reach, as a clone from a server gets.
    subprocess.run(["git", "clone", "-q", "--no-local", str(repo), str(clone)], check=True)
    for name in ("a.txt", "keep.txt", "d/c.bin", "n.txt"):  # the files step 1 and 2 made
        (clone / name).parent.mkdir(exist_ok=True)
        (clone / name).write_bytes((repo / name).read_bytes())
    (clone / ".flow" / "runs" / "r").mkdir(parents=True)
    progress = clone / ".flow" / "runs" / "r" / "progress.md"
    progress.write_bytes((repo / ".flow" / "runs" / "r" / "progress.md").read_bytes())
    resumed = flow("resume", str(progress), cwd=clone)
    assert resumed.returncode == 0, resumed.stderr
    assert "not in this repository" in resumed.stderr
    run, _ = load_progress(progress)
    assert run.status == "completed" and run.snapshots is not None
    here = [c for c in run.snapshots.calls if c.entry >= 4]
    assert [c.entry for c in here] == [4, 6]  # a new base where the run went on, then step 3
    assert here[1].deleted == ["a.txt", "d/c.bin"] and here[1].modified == ["n.txt"]
    assert not (clone / "a.txt").exists()
    # Back to step 3 restores from this clone's snapshots; earlier points have none here.
    rewind(progress, "3")
    assert (clone / "a.txt").exists()
    gone = flow("rewind", str(progress), "--to", "1", "--yes", cwd=clone)
    assert gone.returncode == 19, gone.stderr


def test_a_call_that_changed_no_file_adds_no_record(repo: Path) -> None:
    quiet = WORKFLOW.split("## Step 1")[0] + (
        '## Step 1: Look\n> run: sh script="ls >/dev/null"\n\n'
        '## Step 2: Write\n> run: sh script="echo one >a.txt"\n'
    )
    (repo / "quiet.prompt.md").write_text(quiet)
    progress = repo / ".flow" / "runs" / "q" / "progress.md"
    outcome = start_run(
        StartRequest(repo / "quiet.prompt.md", progress=progress), RunOptions(workspace=repo)
    )
    assert outcome.exit_code == 0, outcome.run.last_error
    run, _ = load_progress(progress)
    assert run.snapshots is not None
    results = [e.id for e in run.transcript if e.role == "tool_result"]
    # The base, then step 2's write only: step 1's look changed nothing.
    assert [c.entry for c in run.snapshots.calls] == [0, results[1]]
    assert run.snapshots.calls[1].added == ["a.txt"]


MODEL_WORKFLOW = """\
---
description: the model appends to a file twice
provider: scripted
commands:
  append:
    description: Append a line to x.txt
    argv: ["sh", "-c", "echo \\"$1\\" >> x.txt", "sh", "{line}"]
    parameters:
      line: {type: string}
---
Append two lines.
"""

SCRIPT = """\
replies:
  - content: first
    tool_calls: [{name: append, arguments: {line: one}}]
  - content: second
    tool_calls: [{name: append, arguments: {line: two}}]
  - done
"""


def test_rewind_to_an_entry_restores_the_files_before_that_reply(repo: Path) -> None:
    (repo / "m.prompt.md").write_text(MODEL_WORKFLOW)
    (repo / "m.script.yaml").write_text(SCRIPT)
    progress = repo / ".flow" / "runs" / "m" / "progress.md"
    options = RunOptions(workspace=repo)
    request = StartRequest(
        repo / "m.prompt.md", progress=progress, recording=repo / "m.script.yaml"
    )
    outcome = start_run(request, options)
    assert outcome.exit_code == 0, outcome.run.last_error
    assert (repo / "x.txt").read_text() == "one\ntwo\n"
    run, _ = load_progress(progress)
    second = next(e.id for e in run.transcript if e.role == "assistant" and e.content == "second")
    result = rewind(progress, f"entry:{second}")
    assert result.files is not None and (repo / "x.txt").read_text() == "one\n"
    run, _ = load_progress(progress)
    assert run.transcript[-1].role == "tool_result" and run.status == "paused"
    # A tool result is no place to go on from with a model call.
    with pytest.raises(InputError):
        rewind(progress, f"entry:{run.transcript[-1].id}")
    again = resume_run(progress, options)
    assert again.exit_code == 0, again.run.last_error
    assert (repo / "x.txt").read_text() == "one\ntwo\n"
    assert again.run.transcript[-1].content == "done"


def test_steps_run_again_on_resume_drop_their_old_snapshot_records(repo: Path) -> None:
    progress = _run(repo)
    workflow = repo / "three.prompt.md"
    workflow.write_text(workflow.read_text().replace("echo two", "echo TWO"))
    again = flow("resume", str(progress), "--rerun-changed", "--yes", cwd=repo)
    assert again.returncode == 0, again.stderr
    run, _ = load_progress(progress)
    assert run.snapshots is not None
    entries = [c.entry for c in run.snapshots.calls if c.call_id is not None or c.entry == 0]
    assert entries == sorted(set(entries)) and entries[-1] == run.transcript[-1].id
    # The workflow edited by hand between the attempts: recorded without a call, not a call's.
    [between] = [c for c in run.snapshots.calls if c.call_id is None and c.entry > 0]
    assert between.modified == ["three.prompt.md"]
    assert all(run.entry(c.entry) is not None or c.entry == 0 for c in run.snapshots.calls)


def test_review_leaves_out_what_a_person_changed_between_attempts(repo: Path) -> None:
    from promptflow_resume import Limits
    from promptflow_resume.worktree import review_run

    (repo / "two.prompt.md").write_text(
        "---\nprovider: scripted\ntools: [create_file]\n---\n"
        "## Step 1: First\nWrite a.\n\n## Step 2: Second\nWrite b.\n",
        encoding="utf-8",
    )
    calls = [{"name": "create_file", "arguments": {"path": f"{n}.txt", "content": n}} for n in "ab"]
    script = {
        "replies": [
            {"content": "Writing a.", "tool_calls": [calls[0]]},
            "Wrote a.",
            {"content": "Writing b.", "tool_calls": [calls[1]]},
            "Wrote b.",
        ]
    }
    (repo / "two.json").write_text(json.dumps(script), encoding="utf-8")
    progress = repo / ".flow" / "runs" / "two" / "progress.md"
    request = StartRequest(repo / "two.prompt.md", progress=progress, recording=repo / "two.json")
    first = start_run(request, RunOptions(workspace=repo, limits=Limits(max_turns=2)))
    assert first.run.status == "budget_exhausted"
    # The person works on between the attempts: a file of their own, a tracked one edited.
    (repo / "mine.txt").write_text("my work\n", encoding="utf-8")
    (repo / "tracked.txt").write_text("tracked, edited by me\n", encoding="utf-8")
    again = resume_run(progress, RunOptions(workspace=repo, limits=Limits(max_turns=9)))
    assert again.run.status == "completed"

    review = review_run(progress)
    assert sorted(f.path for f in review.files) == ["a.txt", "b.txt"]
    assert "my work" not in review.diff and "edited by me" not in review.diff
    run, _ = load_progress(progress)
    assert run.snapshots is not None
    [between] = [s for s in run.snapshots.calls if s.call_id is None and s.entry > 0]
    assert (between.added, between.modified) == (["mine.txt"], ["tracked.txt"])
    b_call = [s for s in run.snapshots.calls if s.call_id is not None][-1]
    assert b_call.added == ["b.txt"] and b_call.modified == []  # the call's own change only


def test_one_repository_handle_sees_every_change_between_its_snapshots(repo: Path) -> None:
    # A handle reuses the tree it last wrote while git names no changed path (issue 47):
    # a content put back, a mode, a removal and a file of the private index lost still count.
    handle = SnapshotRepo.find(repo, "20261121-232529-handle-0a1b", None)
    assert handle is not None
    base = handle.take(None, "base")
    assert handle.take(base.commit, "same").commit == base.commit
    (repo / "tracked.txt").write_text("changed\n")
    (repo / "tracked.txt").write_text("tracked\n")  # put back as it was
    assert handle.take(base.commit, "put back").commit == base.commit
    (repo / "tracked.txt").chmod(0o755)
    mode = handle.take(base.commit, "mode")
    assert mode.commit != base.commit and mode.changes.modified == ["tracked.txt"]
    (repo / "tracked.txt").unlink()
    gone = handle.take(mode.commit, "gone")
    assert gone.changes.deleted == ["tracked.txt"]
    handle.index.unlink()  # seeded again from the user's index, which still has the file
    assert handle.take(gone.commit, "reseeded").changes.deleted == []
    assert handle.tree_now() == gone.tree


@pytest.mark.parametrize("version", ["2", "4"])
def test_paths_the_user_tracked_under_flow_are_left_out_of_a_seeded_index(
    repo: Path, version: str
) -> None:
    # The copy of the user's index drops what snapshots leave out; an index that holds none
    # of it is kept as it is (issue 47), one git cannot be sure of (version 4) always checked.
    (repo / ".flow").mkdir()
    (repo / ".flow" / "kept.txt").write_text("the user's\n")
    (repo / "notes.md").write_text("progress.md is not a progress file here\n")
    _git(repo, "add", "-f", ".flow/kept.txt", "notes.md")
    _git(repo, "update-index", "--index-version", version)
    progress = repo / "progress.md"
    handle = SnapshotRepo.find(repo, "20261121-232529-seeded-0a1b", progress)
    assert handle is not None
    files = _git(repo, "ls-tree", "-r", "--name-only", handle.take(None, "base").tree).split()
    assert ".flow/kept.txt" not in files and "notes.md" in files and "tracked.txt" in files
    clean = SnapshotRepo.find(repo, "20261121-232529-seeded-0a1c", None)
    assert clean is not None
    _git(repo, "rm", "-q", "--cached", ".flow/kept.txt")
    files = _git(repo, "ls-tree", "-r", "--name-only", clean.take(None, "base").tree).split()
    assert ".flow/kept.txt" not in files and "notes.md" in files
