"""Finding progress files, reading only their front matter, and the SQLite index."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from promptflow_resume.base import yamlio
from promptflow_resume.base.errors import FileNotFoundFlowError, InputError
from promptflow_resume.detect import list_runs, owner_alive
from promptflow_resume.detect.index import SCHEMA_VERSION
from promptflow_resume.detect.sources import INDEX_NAME
from promptflow_resume.detect.summary import (
    MAX_FRONT_MATTER,
    read_front_matter,
    read_summary,
)
from tests.support.detect import NOW, front_matter, write_run, write_text_progress
from tests.support.flowproc import flow_env


def runs_dir(root: Path) -> Path:
    return root / ".flow" / "runs"


class CountingReader:
    """The default front matter reader, counting the files it reads."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def __call__(self, path: Path) -> str | None:
        self.paths.append(path)
        return read_front_matter(path)


# --- reading front matter -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"---\nstatus: failed\n---\nbody\n", "status: failed\n"),
        (b"---\r\nstatus: failed\r\n---\r\nbody\r\n", "status: failed\r\n"),
        (b"\xef\xbb\xbf---\nstatus: failed\n---\n", "status: failed\n"),
        (b"---\nstatus: failed\n---", "status: failed\n"),  # closing line at the end
        (b"---\nstatus: failed\n---   \nbody", "status: failed\n"),
        (b"---\n---\n", ""),
        (b"---\na: '---x'\n----\n---\n", "a: '---x'\n----\n"),  # only a bare --- closes
        (b"# Just notes\n", None),  # no front matter: not a progress file
        (b"", None),
        # the body is never read, so bytes there do not matter
        (b"---\nstatus: failed\n---\n\xff\xfe\x00binary", "status: failed\n"),
    ],
)
def test_read_front_matter(tmp_path: Path, raw: bytes, expected: str | None) -> None:
    path = tmp_path / "progress.md"
    path.write_bytes(raw)
    assert read_front_matter(path) == expected


def test_front_matter_larger_than_one_read(tmp_path: Path) -> None:
    long_reason = "x" * 200_000
    path = write_text_progress(
        tmp_path / "r" / "progress.md", front_matter("r", reason=long_reason)
    )
    summary = read_summary(path)
    assert summary is not None and summary.reason == long_reason


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"---\nstatus: failed\nno closing line\n", "no closing '---' line"),
        (b"---\n" + b"a: b\n" * (MAX_FRONT_MATTER // 5 + 10) + b"---\n", "larger than"),
        (b"---\nreason: \xff\xfe\n---\n", "not valid UTF-8"),
        (b"---\nflow_progress: 1\nstatus: [unclosed\n---\n", "invalid YAML"),
        (b"---\nflow_progress: 1\nstatus: sleeping\n---\n", "unknown status 'sleeping'"),
        (b"---\n- a list\n---\n", "not a mapping"),
    ],
)
def test_broken_progress_files_are_invalid_summaries(
    tmp_path: Path, raw: bytes, error: str
) -> None:
    path = tmp_path / "r9" / "progress.md"
    path.parent.mkdir()
    path.write_bytes(raw)
    summary = read_summary(path)
    assert summary is not None
    assert summary.status == "invalid" and summary.run_id == "r9"
    assert summary.error is not None and error in summary.error
    assert not summary.resumable


def test_front_matter_without_flow_progress_is_not_a_run(tmp_path: Path) -> None:
    path = write_text_progress(tmp_path / "progress.md", {"title": "My progress notes"})
    assert read_summary(path) is None


def test_summary_fields(tmp_path: Path) -> None:
    path = write_run(
        tmp_path,
        "20261121-101010-api-a1b2",
        status="failed",
        reason="provider error 500",
        steps_done=2,
        steps_total=5,
        cost=0.4321,
        inputs={"framework": "fastapi", "n": 2},
        keywords=["REST api", "login", "Auth"],
    )
    s = read_summary(path)
    assert s is not None
    assert (s.run_id, s.status, s.reason) == (
        "20261121-101010-api-a1b2",
        "failed",
        "provider error 500",
    )
    assert (s.steps_done, s.steps_total, s.cost_usd) == (2, 5, 0.4321)
    assert s.workflow_name == "api-server" and s.description == "Build a REST API with JWT login"
    assert s.keywords == ("api", "auth")  # normalized again
    assert json.loads(s.inputs_json) == {"framework": "fastapi", "n": 2}
    assert s.updated == "2026-11-21T11:00:00Z"


def test_summary_of_a_file_written_by_the_progress_library(tmp_path: Path) -> None:
    from promptflow_resume.progress import render
    from promptflow_resume.progress.examples import example_run

    run = example_run()
    run.keywords = ["release", "summary"]
    path = tmp_path / run.run_id / "progress.md"
    path.parent.mkdir()
    path.write_text(render(run), encoding="utf-8")
    s = read_summary(path)
    assert s is not None
    assert (s.run_id, s.status, s.reason) == (run.run_id, run.status, run.reason)
    done = sum(1 for st in run.steps.values() if st.status == "completed")
    assert (s.steps_done, s.steps_total) == (done, run.cursor.total)
    assert s.cost_usd == run.usage.cost_usd
    assert s.workflow_hash == run.workflow.hash and s.updated == run.updated
    assert s.keywords == ("release", "summary")


# --- owners of running runs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("owner", "alive"),
    [
        ("self", True),
        ("dead-pid", False),
        ("other-host", False),
        ("garbage", False),
        (None, False),
    ],
)
def test_owner_alive(tmp_path: Path, owner: str | None, alive: bool) -> None:
    progress = write_run(tmp_path, "r", status="running")
    host = socket.gethostname()
    if owner == "dead-pid":
        done = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            check=True,
            capture_output=True,
            text=True,
        )
        record = {"pid": int(done.stdout), "host": host, "since": "2026-11-21T10:00:00Z"}
    elif owner == "self":
        record = {"pid": os.getpid(), "host": host, "since": "2026-11-21T10:00:00Z"}
    elif owner == "other-host":
        record = {"pid": os.getpid(), "host": host + "-elsewhere", "since": "x"}
    if owner == "garbage":
        Path(str(progress) + ".owner").write_text("{not json", encoding="utf-8")
    elif owner is not None:
        Path(str(progress) + ".owner").write_text(json.dumps(record), encoding="utf-8")
    assert owner_alive(progress) is alive
    # never touched the run's lock file
    assert not Path(str(progress) + ".lock").exists()


# --- listing --------------------------------------------------------------------------------


def test_list_runs_unfinished_first_then_newest(workdir: Path) -> None:
    runs = runs_dir(workdir)
    write_run(runs, "done-new", status="completed", updated=NOW - timedelta(minutes=5))
    write_run(runs, "failed-old", status="failed", updated=NOW - timedelta(days=3))
    write_run(runs, "paused-new", status="paused", updated=NOW - timedelta(hours=1))
    (runs / "broken").mkdir()
    broken = runs / "broken" / "progress.md"
    broken.write_text("---\nflow_progress: 1\nstatus: [\n---\n")
    old = (NOW - timedelta(days=5)).timestamp()
    os.utime(broken, (old, old))  # no "updated" field: the file's mtime dates it
    (runs / "notes").mkdir()
    (runs / "notes" / "progress.md").write_text("just notes, no front matter\n")

    listed = list_runs()
    assert [s.run_id for s in listed] == ["paused-new", "failed-old", "broken"]
    assert listed[2].status == "invalid"
    assert [s.run_id for s in list_runs(include_completed=True)] == [
        "paused-new",
        "failed-old",
        "broken",
        "done-new",
    ]
    assert [s.run_id for s in list_runs(status="completed")] == ["done-new"]
    assert [s.run_id for s in list_runs(status="failed")] == ["failed-old"]


def test_list_runs_of_given_folders_and_files(workdir: Path) -> None:
    write_run(runs_dir(workdir), "local", status="failed")
    shared = workdir / "shared"
    write_text_progress(shared / "feature-x.progress.md", front_matter("fx", status="failed"))
    write_run(shared / "team", "t1", status="paused")
    write_run(shared / "a" / "b" / "c", "too-deep", status="paused")  # below the search depth
    write_run(shared / "node_modules", "dep", status="paused")
    write_run(shared / ".hidden", "hid", status="paused")
    other = workdir / "other-project"
    write_run(runs_dir(other), "o1", status="timeout")

    assert sorted(s.run_id for s in list_runs([shared])) == ["fx", "t1"]
    assert [s.run_id for s in list_runs([other])] == ["o1"]
    assert [s.run_id for s in list_runs([runs_dir(other)])] == ["o1"]
    assert [s.run_id for s in list_runs([shared / "feature-x.progress.md"])] == ["fx"]
    # the other project's index lives in its own runs folder
    assert (runs_dir(other) / INDEX_NAME).is_file()


def test_list_runs_refuses_a_missing_folder_and_an_unknown_status(workdir: Path) -> None:
    with pytest.raises(FileNotFoundFlowError) as missing:
        list_runs([Path("nowhere")])
    assert missing.value.exit_code == 5 and "nowhere" in str(missing.value)
    with pytest.raises(InputError) as bad:
        list_runs(status="sleeping")
    assert bad.value.exit_code == 9 and "interrupted" in str(bad.value)


def test_no_runs_folder_is_no_runs(workdir: Path) -> None:
    assert list_runs() == []
    assert not (workdir / ".flow").exists()  # looking never creates folders


# --- the index -------------------------------------------------------------------------------


def test_index_reads_each_file_once_until_it_changes(workdir: Path) -> None:
    runs = runs_dir(workdir)
    for n in range(5):
        write_run(runs, f"r{n}", status="failed")
    reader = CountingReader()
    assert len(list_runs(reader=reader)) == 5
    assert len(reader.paths) == 5
    assert (runs / INDEX_NAME).is_file()

    reader.paths.clear()
    assert len(list_runs(reader=reader)) == 5
    assert reader.paths == []  # warm: nothing read

    changed = write_run(runs, "r2", status="paused", reason="edited by hand")
    os.utime(changed, ns=(1, 1))  # a different mtime, whatever the clock's resolution
    (runs / "r4" / "progress.md").unlink()
    listed = {s.run_id: s for s in list_runs(reader=reader)}
    assert reader.paths == [changed]
    assert set(listed) == {"r0", "r1", "r2", "r3"}
    assert listed["r2"].status == "paused" and listed["r2"].reason == "edited by hand"

    with sqlite3.connect(runs / INDEX_NAME) as conn:
        paths = {row[0] for row in conn.execute("SELECT path FROM runs")}
    assert not any(p.endswith(os.sep + os.path.join("r4", "progress.md")) for p in paths)


def test_corrupt_index_is_rebuilt_silently(workdir: Path) -> None:
    runs = runs_dir(workdir)
    write_run(runs, "r1", status="failed")
    list_runs()
    (runs / INDEX_NAME).write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(runs / INDEX_NAME) + suffix).unlink(missing_ok=True)
    reader = CountingReader()
    assert [s.run_id for s in list_runs(reader=reader)] == ["r1"]
    assert len(reader.paths) == 1
    with sqlite3.connect(runs / INDEX_NAME) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_index_of_another_version_or_vocabulary_is_rebuilt(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = runs_dir(workdir)
    write_run(runs, "r1", status="failed", keywords=["kafka"])
    assert list_runs()[0].keywords == ("queue",)

    from promptflow_resume.detect import index as index_module
    from promptflow_resume.detect.keywords import parse_vocabulary

    other = parse_vocabulary("stopwords: [a]\nsynonyms:\n  streaming: [kafka]\n")
    with monkeypatch.context() as patch:
        patch.setattr(index_module, "vocabulary", lambda: other)
        reader = CountingReader()
        (s,) = list_runs(reader=reader)
        assert len(reader.paths) == 1 and s.keywords == ("streaming",)

    with sqlite3.connect(runs / INDEX_NAME) as conn:
        conn.execute("PRAGMA user_version = 999")
    reader = CountingReader()
    list_runs(reader=reader)
    assert len(reader.paths) == 1


def test_concurrent_processes_share_the_index(workdir: Path) -> None:
    runs = runs_dir(workdir)
    for n in range(40):
        write_run(runs, f"r{n:02d}", status="failed")
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from promptflow_resume.detect import list_runs
        for _ in range(5):
            found = list_runs(root=Path(sys.argv[1]))
            assert len(found) == 40, len(found)
        print("ok")
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(workdir)],
            env=flow_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    # meanwhile this process keeps changing files
    for n in range(20):
        path = write_run(runs, f"r{n:02d}", status="paused", reason=f"edit {n}")
        os.utime(path, ns=(n + 10, n + 10))
    outcomes = [proc.communicate(timeout=120) for proc in procs]
    for proc, (out, err) in zip(procs, outcomes, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == "ok"
    listed = {s.run_id: s for s in list_runs()}
    assert len(listed) == 40
    assert all(listed[f"r{n:02d}"].status == "paused" for n in range(20))


def test_runs_without_stored_keywords_take_them_from_their_workflow(workdir: Path) -> None:
    workflow = workdir / "api.prompt.md"
    workflow.write_text(
        "---\ndescription: Build a REST API with JWT login\n---\n"
        "## Step 1: Endpoints\nWrite the FastAPI routes.\n",
        encoding="utf-8",
    )
    runs = runs_dir(workdir)
    write_run(runs, "old", status="failed", keywords=None, workflow_path="../../../api.prompt.md")
    write_run(runs, "lost", status="failed", keywords=None, workflow_path="../../../gone.prompt.md")
    listed = {s.run_id: s for s in list_runs()}
    assert {"api", "auth"} <= set(listed["old"].keywords)
    assert listed["lost"].keywords == ()


def test_a_run_whose_workflow_no_longer_loads_has_no_keywords(workdir: Path) -> None:
    # An invalid workflow (here: a front matter that never closes) or a folder where the file
    # was: the run is not offered, and listing goes on.
    (workdir / "broken.prompt.md").write_text("---\ndescription: x\n", encoding="utf-8")
    (workdir / "folder.prompt.md").mkdir()
    runs = runs_dir(workdir)
    write_run(
        runs, "bad", status="failed", keywords=None, workflow_path="../../../broken.prompt.md"
    )
    write_run(
        runs, "dir", status="failed", keywords=None, workflow_path="../../../folder.prompt.md"
    )
    listed = {s.run_id: s for s in list_runs()}
    assert listed["bad"].keywords == () and listed["dir"].keywords == ()


def test_hand_edits_the_fast_scanner_declines_are_read_with_yaml(workdir: Path) -> None:
    text = yamlio.dump(front_matter("r1", status="failed"))
    text = text.replace("status: failed\n", "status: 'failed'  # hand edit\n")
    text += "reason: |\n  a block\n  scalar\n"
    write_text_progress(runs_dir(workdir) / "r1" / "progress.md", text)
    (s,) = list_runs()
    assert s.status == "failed" and s.reason == "a block\nscalar\n"
