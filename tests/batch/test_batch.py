"""``flow batch``: rows checked before anything runs, failing rows, resume, kills and Ctrl-C.

Batches run as real ``flow`` processes with real worker processes against a local
OpenAI-compatible server (``tests/support/batch_server.py``) that answers from the request, so the
tests can tell which row sent what.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from promptflow_resume.base.errors import InputError
from promptflow_resume.batch import load_batch
from promptflow_resume.batch.data import check_rows, load_rows
from promptflow_resume.progress import load_progress
from promptflow_resume.workflow import load_workflow
from tests.support.batch_server import RowServer, write_case
from tests.support.flowproc import FLOW, REPO, flow, flow_env, transcript


def _env() -> dict[str, str]:
    return flow_env(OPENAI_API_KEY="sk-test-batch")


def _batch(folder: Path, server: RowServer, *extra: str) -> subprocess.CompletedProcess[str]:
    return flow(
        "batch",
        "triage.prompt.md",
        "--data",
        "rows.jsonl",
        "--out",
        "out",
        "--base-url",
        server.url,
        *extra,
        cwd=folder,
        env=_env(),
        timeout=120,
    )


def _spawn_batch(folder: Path, server: RowServer, *extra: str) -> subprocess.Popen[str]:
    # A shell starts background jobs with SIGINT ignored; give the batch Python's handler back,
    # as a terminal's foreground process has it.
    return subprocess.Popen(
        [
            *(*FLOW, "batch", "triage.prompt.md"),
            *("--data", "rows.jsonl", "--out", "out", "--base-url", server.url, *extra),
        ],
        cwd=folder,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _row_file(folder: Path, row: int) -> Path:
    return folder / "out" / "rows" / f"{row:04d}" / "progress.md"


def _wait(condition: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def _replies(path: Path) -> int:
    return sum(1 for e in load_progress(path)[0].transcript if e.role == "assistant")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[object]]:
    """The transcripts of an uninterrupted batch, by topic."""
    folder = tmp_path_factory.mktemp("reference")
    topics = ["apples", "pears", "plums", "figs"]
    write_case(folder, topics)
    with RowServer() as server:
        result = _batch(folder, server, "--workers", "2", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["status"] == "completed" and summary["exit_code"] == 0
    assert summary["ran"] == [1, 2, 3, 4] and summary["totals"]["completed"] == 4
    assert summary["totals"]["input_tokens"] == 4 * 3 * 100  # the server's usage, summed
    return {t: transcript(_row_file(folder, i)) for i, t in enumerate(topics, start=1)}


# --- data and checks before anything runs ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("rows.jsonl", '{"topic": "a"}\n[1, 2]\n', "row 2 is a list"),
        ("rows.jsonl", '{"topic": "a"}\n\n{"topic": \n', "row 2 is not valid JSON"),
        ("rows.csv", "topic,count\na,1\nb\n", "row 2 has 1 values"),
        ("rows.yaml", "- topic: a\n- just text\n", "row 2 is a str"),
        ("rows.yaml", "topic: a\n", "must hold a list of rows"),
        ("rows.txt", "topic\n", "cannot tell the format"),
        ("rows.jsonl", "\n\n", "has no rows"),
    ],
)
def test_a_malformed_data_file_names_the_row(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    data = tmp_path / name
    data.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_rows(data)
    assert expected in caught.value.message


def test_rows_from_csv_yaml_and_jsonl_are_typed_by_the_workflow(tmp_path: Path) -> None:
    write_case(tmp_path, [])
    wf = load_workflow(tmp_path / "triage.prompt.md")
    files = {
        "a.csv": 'topic,count\nfigs,3\n"a, b",\n',
        "a.yaml": "- topic: figs\n  count: 3\n- topic: a, b\n",
        "a.jsonl": '{"topic": "figs", "count": 3}\n{"topic": "a, b"}\n',
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        rows = load_rows(tmp_path / name)
        typed = check_rows(wf, rows, tmp_path / name)
        assert typed == [{"topic": "figs", "count": 3}, {"topic": "a, b", "count": 1}], name


def test_bad_rows_are_all_reported_and_nothing_runs(tmp_path: Path) -> None:
    write_case(tmp_path, [])
    (tmp_path / "rows.csv").write_text(
        "topic,count\nfigs,1\nplums,many\n,2\nkiwis,4\n", encoding="utf-8"
    )
    result = flow("batch", "triage.prompt.md", "--data", "rows.csv", "--out", "out", cwd=tmp_path)
    assert result.returncode == 9, result.stderr
    assert "rows.csv:3:" in result.stderr
    assert "2 of 4 rows do not fit" in result.stderr
    assert "row 2 (line 3): invalid input values: `count` must be an integer" in result.stderr
    assert "row 3 (line 4): missing input: `topic`" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_hand_broken_batch_file_is_refused_with_its_line(tmp_path: Path) -> None:
    write_case(tmp_path, ["figs"])
    with RowServer() as server:
        assert _batch(tmp_path, server).returncode == 0
    path = tmp_path / "out" / "batch.md"
    original = path.read_text(encoding="utf-8").replace("status: completed", "status: finished", 1)
    path.write_text(original, encoding="utf-8")
    result = flow("status", "out/batch.md", cwd=tmp_path)
    assert result.returncode == 4, result.stderr
    line = original.splitlines().index("status: finished") + 1
    assert f"out/batch.md:{line}:9: $.status: expected one of running" in result.stderr
    assert path.read_text(encoding="utf-8") == original


# --- running and resuming --------------------------------------------------------------------


def test_a_failing_row_does_not_stop_the_others_and_resume_runs_only_it(
    tmp_path: Path, reference: dict[str, list[object]]
) -> None:
    write_case(tmp_path, ["apples", "FAIL pears", "plums", "figs"])
    with RowServer() as server:
        first = _batch(tmp_path, server, "--workers", "2")
        assert first.returncode == 1, first.stderr
        assert "  row 2 failed: the server at" in first.stderr
        assert "this row is refused" in first.stderr
        assert "Resume with: flow resume out/batch.md" in first.stderr
        batch = load_batch(tmp_path / "out" / "batch.md")
        assert [r.status for r in batch.rows] == ["completed", "failed", "completed", "completed"]
        assert batch.status == "failed"
        assert "this row is refused" in (batch.rows[1].error or "")
        body = (tmp_path / "out" / "batch.md").read_text(encoding="utf-8")
        assert "| 2 | failed | [rows/0002/progress.md](rows/0002/progress.md) |" in body

        status = flow("status", "out/batch.md", "--json", cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)
        assert data["totals"]["completed"] == 3 and data["totals"]["failed"] == 1
        assert data["can_resume"] is True

        untouched = {i: _row_file(tmp_path, i).read_bytes() for i in (1, 3, 4)}
        server.failing = False
        before = len(server.requests)
        resumed = flow(
            "resume",
            "out/batch.md",
            "--base-url",
            server.url + "/v1",
            cwd=tmp_path,
            env=_env(),
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        after = server.requests[before:]
    assert after and all("FAIL pears" in r for r in after)
    assert len(after) == 3  # the three steps of row 2, and nothing else
    assert {i: _row_file(tmp_path, i).read_bytes() for i in (1, 3, 4)} == untouched
    assert load_batch(tmp_path / "out" / "batch.md").status == "completed"
    assert transcript(_row_file(tmp_path, 1)) == reference["apples"]
    again = flow(
        "resume", "out/batch.md", "--base-url", server.url + "/v1", cwd=tmp_path, env=_env()
    )
    assert again.returncode == 0 and "completed: 4/4 rows" in again.stdout


def test_max_cost_stops_new_rows(tmp_path: Path) -> None:
    write_case(tmp_path, ["apples", "pears", "plums", "figs"])
    with RowServer() as server:
        result = _batch(tmp_path, server, "--workers", "1", "--max-cost", "0.00001")
    assert result.returncode == 1, result.stderr
    batch = load_batch(tmp_path / "out" / "batch.md")
    assert batch.status == "budget_exhausted"
    # The first call's estimate is over the whole budget: row 1 stops before it, and no
    # other row starts (the batch's ledger refused a call, docs/spec.md 8.3).
    assert [r.status for r in batch.rows] == ["budget_exhausted", "pending", "pending", "pending"]
    assert batch.rows[0].turns == 0
    assert not _row_file(tmp_path, 2).exists()
    status = flow("status", "out/batch.md", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "status   budget_exhausted — the batch's cost reached its limit" in status.stdout
    assert "rows     4: 0 completed, 1 failed, 0 running, 3 pending" in status.stdout
    assert "row    2 pending          rows/0002/progress.md" in status.stdout


def test_sigkill_of_the_batch_then_resume_is_row_and_message_exact(
    tmp_path: Path, reference: dict[str, list[object]]
) -> None:
    topics = ["apples", "pears", "plums", "figs"]
    write_case(tmp_path, topics)
    with RowServer(delay=0.15) as server:
        killed = flow(
            "batch",
            "triage.prompt.md",
            "--data",
            "rows.jsonl",
            "--out",
            "out",
            "--base-url",
            server.url,
            "--workers",
            "2",
            cwd=tmp_path,
            env={**_env(), "FLOW_CRASH_AT": "batch.after_row:1"},
            timeout=120,
        )
        assert killed.returncode == -9, killed.stderr
        # The orphaned workers notice, checkpoint their rows and exit.
        files = [_row_file(tmp_path, i) for i in range(1, 5)]

        def settled() -> bool:
            return all(not f.exists() or load_progress(f)[0].status != "running" for f in files)

        _wait(settled)
        time.sleep(0.5)
        done_before = {i: _replies(f) for i, f in enumerate(files, start=1) if f.exists()}
        completed = [
            i
            for i, f in enumerate(files, start=1)
            if f.exists() and load_progress(f)[0].status == "completed"
        ]
        assert completed, "the crash point is after a row completed"
        before = len(server.requests)
        resumed = flow(
            "resume",
            "out/batch.md",
            "--base-url",
            server.url + "/v1",
            cwd=tmp_path,
            env=_env(),
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        after = server.requests[before:]
    for i, topic in enumerate(topics, start=1):
        sent = sum(1 for r in after if f"about {topic}" in r)
        assert sent == 3 - done_before.get(i, 0), (topic, sent, done_before)
        assert transcript(files[i - 1]) == reference[topic], topic
    assert load_batch(tmp_path / "out" / "batch.md").status == "completed"


def test_sigkill_of_a_worker_mid_row_is_retried_and_the_row_resumes(
    tmp_path: Path, reference: dict[str, list[object]]
) -> None:
    topics = ["apples", "pears", "plums", "figs"]
    write_case(tmp_path, topics)
    batch_file = tmp_path / "out" / "batch.md"
    with RowServer(delay=0.3) as server:
        proc = _spawn_batch(tmp_path, server, "--workers", "2")
        victim: list[tuple[int, int]] = []

        def a_row_is_mid_run() -> bool:
            if not batch_file.exists():
                return False
            for row in load_batch(batch_file).rows:
                progress = _row_file(tmp_path, row.row)
                if row.worker and progress.exists() and _replies(progress) >= 1:
                    victim.append((row.row, int(row.worker.rsplit(":", 1)[1])))
                    return True
            return False

        _wait(a_row_is_mid_run)
        row, pid = victim[0]
        os.kill(pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    batch = load_batch(batch_file)
    assert batch.status == "completed"
    assert batch.rows[row - 1].attempts == 2
    for i, topic in enumerate(topics, start=1):
        assert transcript(_row_file(tmp_path, i)) == reference[topic], topic


def test_ctrl_c_stops_every_worker_with_every_row_checkpointed(
    tmp_path: Path, reference: dict[str, list[object]]
) -> None:
    topics = ["apples", "pears", "plums", "figs"]
    write_case(tmp_path, topics)
    with RowServer(delay=0.3) as server:
        proc = _spawn_batch(tmp_path, server, "--workers", "2")
        _wait(lambda: _row_file(tmp_path, 2).exists() and _row_file(tmp_path, 1).exists())
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "Resume with: flow resume out/batch.md" in stderr
        assert "Traceback" not in stderr
        batch = load_batch(tmp_path / "out" / "batch.md")
        assert batch.status == "interrupted"
        statuses = [r.status for r in batch.rows]
        assert "running" not in statuses
        for row in batch.rows:
            progress = _row_file(tmp_path, row.row)
            if progress.exists():
                assert load_progress(progress)[0].status in ("interrupted", "completed")
        resumed = flow(
            "resume",
            "out/batch.md",
            "--base-url",
            server.url + "/v1",
            cwd=tmp_path,
            env=_env(),
            timeout=120,
        )
    assert resumed.returncode == 0, resumed.stderr
    for i, topic in enumerate(topics, start=1):
        assert transcript(_row_file(tmp_path, i)) == reference[topic], topic


def test_the_package_ships_the_batch_schema() -> None:
    from promptflow_resume.progress.schema import load_schema, schema_file

    assert (
        schema_file("batch").read_bytes() == (REPO / "schemas" / "batch.schema.json").read_bytes()
    )
    assert load_schema("batch")["properties"]["flow_batch"] == {
        "const": 1,
        "description": "the batch format version 1",
    }


def test_a_second_process_on_a_running_batch_is_refused(tmp_path: Path) -> None:
    write_case(tmp_path, ["apples", "pears"])
    with RowServer(delay=0.3) as server:
        proc = _spawn_batch(tmp_path, server, "--workers", "1")
        _wait(lambda: _row_file(tmp_path, 1).exists())
        second = flow(
            "resume", "out/batch.md", "--base-url", server.url + "/v1", cwd=tmp_path, env=_env()
        )
        _, stderr = proc.communicate(timeout=120)
    assert second.returncode == 6, second.stderr
    assert "this batch is in use by another flow process" in second.stderr
    assert proc.returncode == 0, stderr
    assert load_batch(tmp_path / "out" / "batch.md").status == "completed"


def test_a_changed_workflow_is_handled_per_row_with_the_run_rules(tmp_path: Path) -> None:
    write_case(tmp_path, ["apples", "FAIL pears"])
    # Row 2 completes its first step and fails in the second.
    with RowServer(fail_marker="Think about FAIL") as server:
        first = _batch(tmp_path, server)
        assert first.returncode == 1, first.stderr
        done = _row_file(tmp_path, 1).read_bytes()
        wf = tmp_path / "triage.prompt.md"
        wf.write_text(
            wf.read_text(encoding="utf-8").replace("Read about", "Study"), encoding="utf-8"
        )
        server.failing = False
        refused = flow(
            "resume", "out/batch.md", "--base-url", server.url + "/v1", cwd=tmp_path, env=_env()
        )
        assert refused.returncode == 1, refused.stderr
        row = load_batch(tmp_path / "out" / "batch.md").rows[1]
        assert row.status == "failed" and "changed" in (row.error or "")
        assert "--rerun-changed" in (row.error or "")
        rerun = flow(
            "resume",
            "out/batch.md",
            "--base-url",
            server.url + "/v1",
            "--rerun-changed",
            cwd=tmp_path,
            env=_env(),
        )
        assert rerun.returncode == 0, rerun.stderr
    # The completed row is never run again, whatever the workflow says now.
    assert _row_file(tmp_path, 1).read_bytes() == done
    assert any(e[3].startswith("## Read\n\nStudy") for e in transcript(_row_file(tmp_path, 2)))
