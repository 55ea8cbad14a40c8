"""A progress file from someone else cannot make flow delete what flow did not make here
(docs/spec.md 10.10): ``flow clean``, ``flow discard`` and the dashboard's Discard.

Each test plays the stranger: a clone holds a run's file (old, completed: what ``flow clean``
takes by default) whose ``worktree`` names a folder and a branch of the person's own, or whose
``run_id`` climbs out of the git folder. Each checks, on the real file system and in the real
repository, that the folder, its files and the branch are all still there afterwards, and that
the run's own files are cleaned with a line saying what was left and why.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from promptflow_resume.base.errors import GitError
from promptflow_resume.progress import render
from promptflow_resume.progress.filesnapshots import Snapshots
from promptflow_resume.progress.model import WorktreeRef
from promptflow_resume.sharing import clean_runs
from promptflow_resume.worktree import discard_run
from tests.support import xss
from tests.support.git import git

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=timezone.utc)
RUN_ID = "20261001-000000-stranger-a1b2"
BASE = "0" * 40


@pytest.fixture
def place(tmp_path: Path) -> tuple[Path, Path]:
    """A clone (``home/clone``, one commit, branches ``dev`` and ``release``) and the
    person's folder ``home/Documents`` beside it, with a file in it."""
    clone = tmp_path / "home" / "clone"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "--initial-branch=main")
    (clone / "README.md").write_text("# clone\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "base")
    git(clone, "branch", "dev")
    git(clone, "branch", "release")
    documents = tmp_path / "home" / "Documents"
    documents.mkdir()
    (documents / "thesis.txt").write_text("four years of work\n")
    return clone, documents


def _branches(repo: Path) -> set[str]:
    return set(git(repo, "branch", "--format=%(refname:short)").split())


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def stranger_file(
    clone: Path,
    *,
    worktree: WorktreeRef | None = None,
    snapshots: Snapshots | None = None,
    run_id: str = RUN_ID,
) -> Path:
    """A completed run made elsewhere, two months old, committed in the clone's
    ``.flow/runs/<id>/progress.md``; its file is written as text, as a stranger would."""
    run = xss.plain_run()
    run.run_id = RUN_ID
    run.status, run.reason, run.in_flight = "completed", None, []
    run.updated = "2026-09-21T12:00:00Z"
    run.worktree, run.snapshots = worktree, snapshots
    text = render(run).replace(RUN_ID, run_id)
    path = clone / ".flow" / "runs" / RUN_ID / "progress.md"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- case 1: plain flow clean and a worktree record naming the person's folder -----------


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_clean_never_removes_a_folder_or_branch_a_stranger_names(
    place: tuple[Path, Path], relative: bool
) -> None:
    clone, documents = place
    before = _files(documents)
    named = "../Documents" if relative else str(documents)
    path = stranger_file(clone, worktree=WorktreeRef(path=named, branch="dev", base=BASE))

    report = clean_runs(clone / ".flow" / "runs", now=NOW)  # the defaults: no question

    assert _files(documents) == before
    assert "dev" in _branches(clone)
    # The run's own files went; what it named is left, with a line saying so.
    assert not path.exists()
    (item,) = report.items
    assert item.worktree is None and item.to_dict()["branch"] is None
    assert item.left == [
        f"worktree {named!r} and branch 'dev', left as they are: flow on this machine did not "
        "make them for this run and this progress file"
    ]


# --- case 2: a run id that climbs out of the git folder ---------------------------------


def test_clean_never_follows_a_run_id_out_of_the_repository(place: tuple[Path, Path]) -> None:
    clone, _ = place
    (clone / ".git" / "flow").mkdir()  # as any earlier run with snapshots leaves it
    outside = clone.parent / "x"
    outside.mkdir()
    (outside / "keep.txt").write_text("not flow's\n")
    climb = "../../../x"
    record = Snapshots(root="../../..", ref=f"refs/flow/{RUN_ID}/snapshots")
    path = stranger_file(clone, snapshots=record, run_id=climb)

    report = clean_runs(clone / ".flow" / "runs", older_than="0", statuses=None, now=NOW)

    assert (outside / "keep.txt").read_text() == "not flow's\n"
    assert report.items == []
    # Not a run id: the file is left alone, as any file that is not a run.
    assert path.is_file()
    assert report.skipped == [(path, f"its run_id {climb!r} is not a run id flow makes")]


# --- case 3: flow discard and the dashboard's Discard ------------------------------------


@pytest.mark.parametrize(
    "named",
    ["absolute", "inside", "canonical"],
)
def test_discard_removes_nothing_flow_did_not_make_here(
    place: tuple[Path, Path], named: str
) -> None:
    clone, documents = place
    before = _files(documents)
    # Where a stranger's file may point: the person's folder, a folder of the clone, or the
    # very place flow would use (a folder and branch the clone itself brings).
    if named == "canonical":
        name = "20261001-000000-other-b2c3"
        git(clone, "branch", f"flow/{name}")
        tree = WorktreeRef(path=f".flow/worktrees/{name}", branch=f"flow/{name}", base=BASE)
        folder = clone / tree.path
        folder.mkdir(parents=True)
        (folder / "work.txt").write_text("someone's\n")
    else:
        where = str(documents) if named == "absolute" else "src"
        tree = WorktreeRef(path=where, branch="release", base=BASE)
        (clone / "src").mkdir()
        (clone / "src" / "main.c").write_text("int main;\n")
    path = stranger_file(clone, worktree=tree)
    branches, text = _branches(clone), path.read_text()

    with pytest.raises(GitError) as raised:
        discard_run(path)

    assert "flow discard removes only a worktree and branch that flow made on this " in str(
        raised.value
    )
    assert raised.value.exit_code == 14 and raised.value.field == "$.worktree"
    assert _files(documents) == before and _branches(clone) == branches
    assert (clone / "src" / "main.c").exists() or named == "canonical"
    assert (clone / tree.path / "work.txt").exists() or named != "canonical"
    assert path.read_text() == text  # not marked discarded: nothing happened


def test_the_dashboard_shows_what_a_discard_removes_and_refuses_the_strangers(
    place: tuple[Path, Path],
) -> None:
    from tests.serve.test_serve_actions import _post
    from tests.support.serve import Server

    clone, documents = place
    before = _files(documents)
    stranger_file(clone, worktree=WorktreeRef(path=str(documents), branch="release", base=BASE))
    key = f"0/.flow/runs/{RUN_ID}/progress.md"
    with Server(clone) as server:
        page = server.get(f"/run/{key}")[2]
        # The page names the folder and branch, and offers no button that would remove them.
        assert f"<code>{documents}</code> and the branch <code>release</code>" in page
        assert 'id="discard"' not in page and 'id="merge"' not in page
        # A form posted all the same is refused as the command refuses it.
        note = _post(server, "discard", key, confirm="1")
        assert "flow discard removes only a worktree and branch that flow made" in note
    assert _files(documents) == before
    assert "release" in _branches(clone)


def test_clean_keeps_a_run_whose_own_worktree_would_go_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side: a worktree run made here goes with its worktree and branch only with
    ``worktrees`` (--worktrees, or a yes); otherwise the whole run is kept, and said so."""
    from promptflow_resume.api import RunOptions, StartRequest, start_run
    from tests.run.test_worktree import BRANCH, PROGRESS, RUN_ID, TREE, _repo

    repo = _repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    outcome = start_run(
        StartRequest("change.prompt.md", recording="change.script.yaml", worktree=True,
                     progress=PROGRESS),
        RunOptions(provider="scripted"),
    )  # fmt: skip
    assert outcome.exit_code == 0
    runs = repo / ".flow" / "runs"
    held = clean_runs(runs, older_than="0", now=datetime.now(timezone.utc))
    assert held.items == [] and (repo / TREE).is_dir() and BRANCH in _branches(repo)
    ((path, why),) = held.skipped
    assert path == repo / PROGRESS and "flow clean --worktrees removes them too" in why
    asked: list[str] = []

    def answer(items: list) -> bool:  # type: ignore[type-arg]
        asked.extend(item.run_id for item in items)
        return False

    again = clean_runs(runs, older_than="0", worktrees=answer, now=datetime.now(timezone.utc))
    assert asked == [RUN_ID] and again.items == [] and (repo / TREE).is_dir()
    # Removed with git by hand: nothing holds the run any more, and nothing is asked.
    git(repo, "worktree", "remove", "--force", str(repo / TREE))
    git(repo, "branch", "-D", BRANCH)
    gone = clean_runs(runs, older_than="0", worktrees=answer, now=datetime.now(timezone.utc))
    assert asked == [RUN_ID] and [i.run_id for i in gone.items] == [RUN_ID]
    assert not (repo / PROGRESS).exists()
    from promptflow_resume.base.madehere import all_made

    assert [m.kind for m in all_made()] == []  # the records went with what they named
    assert git(repo, "for-each-ref", "refs/flow") == ""  # the snapshot ref too


@pytest.mark.parametrize(
    ("path", "branch", "field"),
    [
        ("/home/u/Documents", "dev", "$.worktree.path"),
        ("../Documents", "dev", "$.worktree.path"),
        (".flow/worktrees/../../Documents", "dev", "$.worktree.path"),
        (f".flow/worktrees/{RUN_ID}", "release", "$.worktree.branch"),
    ],
)
def test_no_command_uses_a_worktree_a_file_names_outside_flows_place(
    place: tuple[Path, Path], path: str, branch: str, field: str
) -> None:
    """Resume, review, fork and merge confine the folder before any use: only
    ``.flow/worktrees/<name>`` of the file's repository with branch ``flow/<name>``."""
    from promptflow_resume.gitworktree import attach_worktree
    from promptflow_resume.sharing import fork
    from promptflow_resume.worktree import merge_run, review_run

    clone, documents = place
    before, branches = _files(documents), _branches(clone)
    tree = WorktreeRef(path=path, branch=branch, base=BASE)
    progress = stranger_file(clone, worktree=tree)
    uses = (
        lambda: attach_worktree(tree, progress),
        lambda: review_run(progress),
        lambda: fork(progress, "report"),
    )
    for use in uses:
        with pytest.raises(GitError) as refused:
            use()
        assert refused.value.field == field and "so flow does not use it" in str(refused.value)
    with pytest.raises(GitError):
        merge_run(progress)
    assert _files(documents) == before and _branches(clone) == branches
    assert not (clone / ".flow" / "worktrees").exists()
    assert sorted(p.name for p in (clone / ".flow" / "runs").iterdir()) == [RUN_ID]  # no fork


def test_flow_clean_says_what_it_left_and_its_help_what_it_keeps(
    place: tuple[Path, Path],
) -> None:
    from tests.support.flowproc import flow

    clone, documents = place
    stranger_file(clone, worktree=WorktreeRef(path=str(documents), branch="dev", base=BASE))
    done = flow("clean", cwd=clone)
    assert done.returncode == 0, done.stderr
    assert f"      left: worktree '{documents}' and branch 'dev', left as they are: " in done.stdout
    assert (documents / "thesis.txt").is_file() and "dev" in _branches(clone)
    shown = flow("clean", "--help", cwd=clone).stdout
    assert "What is kept:" in " ".join(shown.split())
