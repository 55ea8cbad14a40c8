"""flow's record of what it made on this machine (docs/spec.md 10.10): found only for the run and
progress file it was made for, kept owner-only outside every repository, refused when it is not
a file flow wrote, and pruned of repositories that are gone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from promptflow_resume.base import madehere
from promptflow_resume.base.errors import StorageError
from promptflow_resume.base.madehere import Made


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FLOW_HOME", str(tmp_path / "flowhome"))
    return tmp_path / "flowhome"


def _made(tmp_path: Path, name: str = "flow/r-1", run_id: str = "r-1") -> Made:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    return Made(
        kind="worktree",
        repository=str(repo / ".git"),
        name=name,
        run_id=run_id,
        progress=str(repo / ".flow" / "runs" / run_id / "progress.md"),
        root=str(repo),
        folder=str(repo / ".flow" / "worktrees" / run_id),
    )


def test_a_record_is_found_only_for_its_run_and_progress_file(home: Path, tmp_path: Path) -> None:
    made = _made(tmp_path)
    madehere.record(made)
    found = madehere.find("worktree", name="flow/r-1", run_id="r-1", progress=made.progress)
    assert found == made
    # The same names for another file, another run, or as a snapshot ref: not flow's.
    elsewhere = tmp_path / "clone" / ".flow" / "runs" / "r-1" / "progress.md"
    assert madehere.find("worktree", name="flow/r-1", run_id="r-1", progress=elsewhere) is None
    assert madehere.find("worktree", name="flow/r-1", run_id="r-2", progress=made.progress) is None
    assert madehere.find("snapshots", name="flow/r-1", run_id="r-1", progress=made.progress) is None
    # Reached through a link, the file is the same file.
    os.symlink(tmp_path / "repo", tmp_path / "link")
    linked = tmp_path / "link" / ".flow" / "runs" / "r-1" / "progress.md"
    assert madehere.find("worktree", name="flow/r-1", run_id="r-1", progress=linked) == made
    madehere.forget(made)
    assert madehere.all_made() == []
    assert stat.S_IMODE(os.stat(home / "made.json").st_mode) == 0o600


def test_records_of_a_repository_that_is_gone_are_dropped(home: Path, tmp_path: Path) -> None:
    gone = _made(tmp_path / "gone")
    madehere.record(gone)
    kept = _made(tmp_path, name="flow/r-2", run_id="r-2")
    madehere.record(kept)
    assert madehere.all_made() == [gone, kept]
    (tmp_path / "gone" / "repo" / ".git").rmdir()  # that repository was deleted
    madehere.forget(_made(tmp_path, name="flow/none"))  # any write prunes
    assert madehere.all_made() == [kept]


@pytest.mark.parametrize("kind", ["link", "json", "version"])
def test_a_record_flow_did_not_write_is_refused(home: Path, tmp_path: Path, kind: str) -> None:
    home.mkdir()
    target = tmp_path / "planted.json"
    target.write_text('{"flow_made": 1, "made": []}')
    if kind == "link":
        os.symlink(target, home / "made.json")
    else:
        text = "{not json" if kind == "json" else '{"flow_made": 99, "made": []}'
        (home / "made.json").write_text(text)
    with pytest.raises(StorageError) as refused:
        madehere.find("worktree", name="flow/x", run_id="x", progress=tmp_path / "p.md")
    assert refused.value.exit_code == 12 and "FLOW_HOME" in str(refused.value)
    assert target.read_text() == '{"flow_made": 1, "made": []}'
