"""The share, fork, rewind, log and clean commands: exit codes and the words a user sees."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_INPUT, EXIT_LOCKED, EXIT_NOT_FOUND
from promptflow_resume.cli import main
from promptflow_resume.progress import ProgressStore, load_progress
from tests.support.flowproc import FLOW, flow_env
from tests.support.share import clone, make_project, start


@pytest.fixture
def project(workdir: Path) -> Path:
    return make_project(workdir / "repo")


def flow(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_share_prints_where_the_copy_is_and_how_to_resume_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = start(project, max_turns=3)
    code, out, err = flow(capsys, "share", str(path), "-o", str(project / "run.md"))
    assert code == 0, err
    assert f"shared: {project / 'run.md'} (run r1, 1 file bundled beside it)" in out
    assert "workflow: release.prompt.md (relative to the copy)" in out
    assert f"Resume it (in any clone) with: flow resume {project / 'run.md'}" in out

    code, out, err = flow(capsys, "share", str(path), "-o", str(project / "run.md"))
    assert code == EXIT_INPUT
    assert "already exists" in err and "--force" in err

    code, out, _ = flow(
        capsys, "share", str(path), "-o", str(project / "run.md"), "--force", "--json"
    )
    assert code == 0
    assert json.loads(out)["bundled"] == ["run.files/call_1_1-listing"]


def test_fork_and_rewind_report_what_they_did(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = start(project)
    code, out, err = flow(capsys, "fork", str(path), "--at", "draft", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["parent_run_id"] == "r1" and data["pending"] == ["draft", "report"]
    assert load_progress(data["output"])[0].parent["step"] == "draft"  # type: ignore[index]

    code, out, err = flow(capsys, "rewind", str(path), "--to", "report")
    assert code == 0, err
    assert "rewound" in out and "to the start of step report" in out
    assert "archived: entries 14-15 → progress.files/archive-attempt-2-rewind.json" in out
    assert f"Continue with: flow resume {path}" in out
    code, out, _ = flow(capsys, "rewind", str(path), "--to", "report")
    assert code == 0 and "nothing changed" in out


def test_errors_are_one_paragraph_with_the_documented_exit_code(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = start(project)
    code, _, err = flow(capsys, "fork", str(path), "--at", "publish")
    assert code == EXIT_INPUT
    assert err.startswith(f"error: {path}: $.steps: --at 'publish': this run has no step")
    assert "inspect, draft, report" in err and len(err.strip().splitlines()) == 1

    store, _, _ = ProgressStore.open(path)
    try:
        code, _, err = flow(capsys, "rewind", str(path), "--to", "draft")
    finally:
        store.close()
    assert code == EXIT_LOCKED and "in use by another flow process" in err

    code, _, err = flow(capsys, "log", str(project / "missing.md"))
    assert code == EXIT_NOT_FOUND and "missing.md" in err


def test_log_shows_attempts_and_edits(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, path = start(project, max_turns=3)
    code, out, _ = flow(capsys, "log", str(path))
    assert code == 0
    assert "run r1: budget_exhausted (turn budget used: 3 of 3 turns" in out
    assert out.splitlines()[0].endswith("), resumable")
    # The scripted model has no price: tokens only (docs/spec.md 5.4).
    assert "#1  " in out and "    3 turns · 450 in / 30 out tokens\n" in out
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("holds one line.", "holds one line!"), encoding="utf-8")
    code, out, _ = flow(capsys, "log", str(path), "--json")
    assert json.loads(out)["pending_edits"] == [11]


def test_clean_dry_run_lists_and_frees_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, path = start(project)
    monkeypatch.chdir(project)  # flow clean looks in .flow/runs by default
    code, out, _ = flow(capsys, "clean", "--older-than", "0", "--dry-run")
    assert code == 0
    assert out.startswith("would delete 1 run, freeing ")
    assert "(dry run: nothing was deleted)" in out and "completed" in out
    assert path.exists()
    code, out, _ = flow(capsys, "clean", "--older-than", "0", "--status", "failed")
    assert out.startswith("deleted 0 runs, freeing 0 B") and "kept 1 run whose" in out
    code, out, _ = flow(capsys, "clean", "--older-than", "0", "--json")
    assert json.loads(out)["deleted"][0]["run_id"] == "r1"
    assert not path.parent.exists()
    code, _, err = flow(capsys, "clean", "--older-than", "soon")
    assert code == EXIT_INPUT and "is not an age" in err


@pytest.mark.e2e
def test_share_then_resume_in_a_fresh_clone_with_the_real_command(
    project: Path, tmp_path: Path
) -> None:
    def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*FLOW, *args],
            cwd=cwd,
            env=flow_env(PYTHONUNBUFFERED="1"),
            capture_output=True,
            text=True,
            timeout=120,
        )

    first = run(
        project,
        "run",
        "release.prompt.md",
        "--recording",
        "release.script.yaml",
        "--progress",
        "run/progress.md",
        "--max-turns",
        "3",
    )
    assert first.returncode == 1, first.stderr  # budget exhausted
    shared = run(project, "share", "run/progress.md", "-o", "docs/release-run.md")
    assert shared.returncode == 0, shared.stderr
    checked = run(project, "validate", "docs/release-run.md")
    assert checked.returncode == 0, checked.stderr
    other = clone(project, tmp_path / "fresh")
    shutil.rmtree(other / "run")  # the clone has only what was committed: docs/ and the workflow
    resumed = run(other, "resume", "docs/release-run.md", "--max-turns", "20")
    assert resumed.returncode == 0, resumed.stderr
    assert "completed: 3/3 steps" in resumed.stdout
