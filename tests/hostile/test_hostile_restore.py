"""Restores (``flow rewind``, ``flow fork``) write and remove only inside the run's own
repository, never through a symbolic link, and only from snapshots flow took here for the run
(docs/spec.md 10.10, 12.3).

The stranger: a clone that commits a link ``a -> ../..`` where the run's snapshot holds
``a/.ssh``; a progress file whose ``snapshots.root`` names another repository on the machine,
with commits from that repository's history. And a property test over random trees (files,
folders, links out of the repository, ``..`` and ``.git`` names in crafted snapshots): whatever
a plan is, carrying it out leaves everything outside the repository as it was, checked on the
real file system.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from promptflow_resume.api import RunOptions, StartRequest, start_run
from promptflow_resume.base.errors import FlowError
from promptflow_resume.progress import ProgressStore, load_progress
from promptflow_resume.progress.filesnapshots import FileSnapshot, Snapshots
from promptflow_resume.sharing import fork, rewind
from promptflow_resume.sharing.restore import FilesChoice
from promptflow_resume.snapshots import SnapshotRepo
from tests.support import xss
from tests.support.git import git

#: Step one makes ``a/.ssh`` (a folder ``a`` with a file); step two removes ``a``.
WORKFLOW = """\
---
description: makes a folder, then removes it
provider: echo
commands:
  sh:
    argv: ["sh", "-c", "eval \\"$1\\"", "sh", "{script}"]
    parameters:
      script: {type: string}
---
## Step 1: One
> run: sh script="mkdir a; echo mine > a/.ssh; echo one > one.txt; ln -s ../.. up"

## Step 2: Two
> run: sh script="rm -r a; rm up; echo two > two.txt"

## Step 3: Three
> run: sh script="echo three > three.txt"
"""


def _state(folder: Path, skip: Path | None = None) -> dict[str, Any]:
    """Everything under ``folder`` (links not followed), ``skip`` left out: what it is, and a
    file's bytes or a link's target."""
    found: dict[str, Any] = {}
    for top, dirs, files in os.walk(folder):
        if skip is not None and Path(top) == skip.parent:
            dirs[:] = [d for d in dirs if Path(top, d) != skip]
        for name in dirs + files:
            path = Path(top, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                found[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISDIR(mode):
                found[str(path)] = ("dir",)
            else:
                found[str(path)] = ("file", path.read_bytes())
    return found


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """``home/`` with a ``.ssh`` folder, and the repository at ``home/src/repo`` (so a link
    ``../..`` in it leads to ``home``)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    repo = home / "src" / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "steps.prompt.md").write_text(WORKFLOW)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return home


def _ran(repo: Path) -> Path:
    progress = repo / ".flow" / "runs" / "r" / "progress.md"
    outcome = start_run(
        StartRequest(repo / "steps.prompt.md", progress=progress),
        RunOptions(workspace=repo),
    )
    assert outcome.exit_code == 0, outcome.run.last_error
    return progress


# --- case 4: a link committed where the run's snapshot holds a folder ------------------------


@pytest.mark.parametrize("command", ["rewind", "fork"])
def test_a_restore_never_writes_or_removes_through_a_link(home: Path, command: str) -> None:
    repo = home / "src" / "repo"
    progress = _ran(repo)
    os.symlink("../..", repo / "a")  # the clone's link, where step one's snapshot has a/.ssh
    git(repo, "add", "a")
    git(repo, "commit", "-qm", "a link")
    outside = _state(home, skip=repo)
    text = progress.read_text()

    with pytest.raises(FlowError) as refused:
        if command == "rewind":
            rewind(progress, "two", files=FilesChoice(force=True))
        else:
            fork(progress, "two", files=FilesChoice(force=True))

    error = refused.value
    assert error.exit_code == 18
    assert "a/.ssh (a is a symbolic link to ../.. that is not the run's)" in error.message
    assert "never writes or removes anything through a symbolic link" in error.message
    assert _state(home, skip=repo) == outside  # ~/.ssh and everything else as it was
    assert os.readlink(repo / "a") == "../.." and progress.read_text() == text


def test_the_plan_names_what_goes_a_link_as_a_link_and_a_folder_in_the_way(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a plan shows before the question: a folder that goes to make way for a file, with
    what is in it; a link the run made, deleted as a link (what it points to stays)."""
    from promptflow_resume.cli.commands_share import _show_plan
    from promptflow_resume.sharing.common import first_entry_of
    from promptflow_resume.sharing.restore import apply_files, plan_files

    repo = home / "src" / "repo"
    progress = _ran(repo)
    with (repo / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write("*.log\n")
    (repo / "one.txt").unlink()  # someone made a folder of build output where it was
    (repo / "one.txt").mkdir()
    (repo / "one.txt" / "x.log").write_text("build output\n")
    outside = _state(home, skip=repo)
    run, _ = load_progress(progress)
    choice = FilesChoice(force=True)
    planned = plan_files(run, progress, first_entry_of(run, ["two", "three"]), choice)
    assert planned is not None
    plan = planned[2]
    assert {"a/.ssh", "up", "one.txt"} <= set(plan.write) and plan.links == {}
    _show_plan(plan, repo)
    shown = capsys.readouterr().err
    expected = "a folder where a file goes, with 1 file no snapshot lists, in the way"
    assert f"  remove  one.txt  ({expected})" in shown
    apply_files(planned, choice)
    assert (repo / "one.txt").read_text() == "one\n" and os.readlink(repo / "up") == "../.."
    assert _state(home, skip=repo) == outside

    # Back to before step one: the link "up" goes as a link; what it points to stays.
    planned = plan_files(run, progress, first_entry_of(run, ["one"]), FilesChoice())
    assert planned is not None
    plan = planned[2]
    assert "up" in plan.delete and plan.links == {"up": "../.."}
    _show_plan(plan, repo)
    assert "  delete  up  (a symbolic link to ../..: only the link itself goes)" in (
        capsys.readouterr().err
    )
    apply_files(planned, FilesChoice())
    assert not os.path.lexists(repo / "up") and _state(home, skip=repo) == outside


def test_what_is_not_the_runs_is_not_removed_to_make_way(home: Path) -> None:
    """A file of someone else's where the snapshot has a folder stops the restore, as git
    refuses to overwrite an untracked file: it is kept, not cleared away."""
    repo = home / "src" / "repo"
    progress = _ran(repo)
    (repo / "a").write_text("someone's notes\n")
    with pytest.raises(FlowError) as refused:
        rewind(progress, "two", files=FilesChoice(force=True))
    assert refused.value.exit_code == 18
    assert "a/.ssh (a is a file that is not the run's)" in refused.value.message
    assert (repo / "a").read_text() == "someone's notes\n"


# --- case 5: snapshots.root naming another repository --------------------------------------


@pytest.mark.parametrize("command", ["rewind", "fork"])
def test_a_file_cannot_make_a_restore_act_on_another_repository(
    tmp_path: Path, command: str
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    git(victim, "init", "-q")
    (victim / "config.py").write_text("SAFE = False\n")
    git(victim, "add", "-A")
    git(victim, "commit", "-qm", "old")
    old = git(victim, "rev-parse", "HEAD").strip()
    (victim / "config.py").write_text("SAFE = True\n")
    git(victim, "commit", "-qam", "fixed")
    new = git(victim, "rev-parse", "HEAD").strip()
    clone = tmp_path / "clone"
    clone.mkdir()
    git(clone, "init", "-q")
    run = xss.plain_run()
    run.status, run.reason, run.in_flight = "paused", "stopped", []
    run.snapshots = Snapshots(
        root=str(victim),
        ref=f"refs/flow/{run.run_id}/snapshots",
        calls=[FileSnapshot(entry=0, commit=old), FileSnapshot(entry=8, commit=new)],
    )
    path = clone / ".flow" / "runs" / run.run_id / "progress.md"
    ProgressStore.create(path, run).close()
    before, text = _state(victim), path.read_text()

    with pytest.raises(FlowError) as refused:
        if command == "rewind":
            rewind(path, "report", files=FilesChoice(force=True))
        else:
            fork(path, "report", files=FilesChoice(force=True))

    assert refused.value.exit_code == 19 and refused.value.field == "$.snapshots"
    assert "were not taken by flow on this machine" in refused.value.message
    assert _state(victim) == before and path.read_text() == text
    assert git(victim, "for-each-ref", "refs/flow") == ""


# --- the property: no plan reaches outside the repository ----------------------------------

#: Names in crafted snapshots: a stranger's tree may hold ``..`` and ``.git`` entries.
TREE_NAMES = st.sampled_from(["a", "b", "c", "..", ".git"])
#: Names on disk (the working tree can hold neither ``..`` nor a second ``.git``).
DISK_NAMES = st.sampled_from(["a", "b", "c"])
#: Where links point: out of the repository (up, to the sentinel, absolute), or inside.
LINK_TARGETS = st.sampled_from(["../..", "../../outside", "OUTSIDE", "..", "a", "b/c"])


def _trees(names: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.one_of(st.just("file"), LINK_TARGETS.map(lambda t: ("link", t)))
    return st.recursive(
        st.dictionaries(names, leaf, max_size=3),
        lambda inner: st.dictionaries(names, st.one_of(leaf, inner), max_size=3),
        max_leaves=6,
    )


def _target(text: str, outside: Path) -> str:
    return str(outside) if text == "OUTSIDE" else text


def _mktree(repo: Path, tree: dict[str, Any], outside: Path) -> str:
    """A git tree object of ``tree`` (entries as git stores them, any names)."""
    lines = []
    for name, value in sorted(tree.items()):
        if isinstance(value, dict):
            lines.append(f"040000 tree {_mktree(repo, value, outside)}\t{name}")
        elif value == "file":
            blob = git(repo, "hash-object", "-w", "--stdin", stdin=f"{name} from a snapshot\n")
            lines.append(f"100644 blob {blob.strip()}\t{name}")
        else:
            link = _target(value[1], outside)
            blob = git(repo, "hash-object", "-w", "--stdin", stdin=link)
            lines.append(f"120000 blob {blob.strip()}\t{name}")
    return git(repo, "mktree", "--missing", stdin="".join(f"{line}\n" for line in lines)).strip()


def _lay_out(folder: Path, tree: dict[str, Any], outside: Path) -> None:
    """Make ``tree`` on disk in ``folder``."""
    for name, value in tree.items():
        path = folder / name
        if isinstance(value, dict):
            path.mkdir()
            _lay_out(path, value, outside)
        elif value == "file":
            path.write_text(f"{name} on disk\n")
        else:
            os.symlink(_target(value[1], outside), path)


def _empty(repo: Path) -> None:
    for entry in repo.iterdir():
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    disk=_trees(DISK_NAMES),
    target=_trees(TREE_NAMES),
    tip=_trees(TREE_NAMES),
    force=st.booleans(),
)
# The shapes of the cases above, always tried: a link out of the repository where the target
# has a folder (to the sentinel, and up two levels), names git never checks out.
@example(disk={"a": ("link", "OUTSIDE")}, target={"a": {"b": "file"}}, tip={}, force=False)
@example(disk={"c": ("link", "../..")}, target={"c": {"c": "file"}}, tip={}, force=True)
@example(disk={}, target={"..": {"c": "file"}, "a": "file"}, tip={"a": "file"}, force=True)
@example(disk={"a": "file"}, target={".git": {"a": "file"}}, tip={"a": "file"}, force=True)
def test_no_restore_plan_writes_or_removes_outside_the_repository(
    disk: dict[str, Any], target: dict[str, Any], tip: dict[str, Any], force: bool
) -> None:
    with tempfile.TemporaryDirectory(prefix="flow-restore-") as scratch:
        top = Path(scratch)
        outside = top / "outside"
        (outside / "b").mkdir(parents=True)
        (outside / "a").write_text("outside\n")
        (outside / "b" / "c").write_text("deep outside\n")
        (top / "c").write_text("beside the repository\n")
        repo = top / "sub" / "repo"
        repo.mkdir(parents=True)
        git(repo, "init", "-q")
        # The run's chain holds both snapshots: the target, then the tip after it.
        first = git(repo, "commit-tree", _mktree(repo, target, outside), "-m", "t").strip()
        last = git(repo, "commit-tree", _mktree(repo, tip, outside), "-p", first, "-m", "l")
        handle = SnapshotRepo.find(repo, "r", None)
        assert handle is not None
        git(repo, "update-ref", handle.ref, last.strip())
        _empty(repo)
        _lay_out(repo, disk, outside)
        before = _state(top, skip=repo)
        git_files = _state(repo / ".git" / "hooks"), (repo / ".git" / "config").read_bytes()

        try:
            plan = handle.plan_restore(first, last.strip(), force=force)
            handle.restore(plan)
        except FlowError:
            pass  # refused (a link in the way, a path no checkout writes): also fine

        assert _state(top, skip=repo) == before
        assert (_state(repo / ".git" / "hooks"), (repo / ".git" / "config").read_bytes()) == (
            git_files
        )
