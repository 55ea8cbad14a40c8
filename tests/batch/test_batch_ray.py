"""``flow batch --engine ray``: the same batch behaviour with rows as Ray tasks.

Each test starts a Ray on this machine (``ray.init()`` inside the ``flow`` process, several
seconds on a 2-core machine), against the same local OpenAI-compatible server as
``test_batch.py``.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from promptflow_resume.batch import load_batch
from promptflow_resume.progress import load_progress
from tests.support.batch_server import RowServer, write_case
from tests.support.flowproc import FLOW, flow, flow_env, transcript

pytest.importorskip("ray", reason="the ray extra is not installed (pip install '.[ray]')")

TOPICS = ["apples", "FAIL pears", "plums"]


def _env(**extra: str) -> dict[str, str]:
    return flow_env(OPENAI_API_KEY="sk-test-batch", RAY_AUTH_MODE="disabled", **extra)


def _args(server: RowServer, *extra: str) -> list[str]:
    return [
        *("batch", "triage.prompt.md", "--data", "rows.jsonl", "--out", "out"),
        *("--engine", "ray", "--base-url", server.url, *extra),
    ]


def _row_file(folder: Path, row: int) -> Path:
    return folder / "out" / "rows" / f"{row:04d}" / "progress.md"


def _replies(path: Path) -> int:
    return sum(1 for e in load_progress(path)[0].transcript if e.role == "assistant")


@pytest.mark.slow  # starting Ray is ~10 s of both cores; tests/batch/test_batch.py covers the rules
def test_ray_failing_row_then_resume_runs_only_that_row(tmp_path: Path) -> None:
    write_case(tmp_path, TOPICS)
    with RowServer() as server:
        first = flow(*_args(server, "--workers", "2"), cwd=tmp_path, env=_env(), timeout=300)
        assert first.returncode == 1, first.stderr
        batch = load_batch(tmp_path / "out" / "batch.md")
        assert batch.engine == "ray"
        assert [r.status for r in batch.rows] == ["completed", "failed", "completed"]
        untouched = {i: _row_file(tmp_path, i).read_bytes() for i in (1, 3)}
        server.failing = False
        before = len(server.requests)
        resumed = flow(
            "resume",
            "out/batch.md",
            "--base-url",
            server.url,
            cwd=tmp_path,
            env=_env(),
            timeout=300,
        )
        assert resumed.returncode == 0, resumed.stderr
        after = server.requests[before:]
    assert len(after) == 3 and all("FAIL pears" in r for r in after)
    assert {i: _row_file(tmp_path, i).read_bytes() for i in (1, 3)} == untouched
    assert load_batch(tmp_path / "out" / "batch.md").status == "completed"


@pytest.mark.slow
def test_ray_worker_killed_mid_row_is_retried_and_resumes_the_row(tmp_path: Path) -> None:
    write_case(tmp_path, ["apples"])
    reference = tmp_path / "ref"
    reference.mkdir()
    write_case(reference, ["apples"])
    with RowServer() as server:
        ref = flow(*_args(server), cwd=reference, env=_env(), timeout=300)
        assert ref.returncode == 0, ref.stderr
        before = len(server.requests)
        # The Ray worker process running the row dies by SIGKILL as its second step completes;
        # the batch process never passes that point.
        killed = flow(
            *_args(server),
            cwd=tmp_path,
            env=_env(FLOW_CRASH_AT="engine.step_completed:2"),
            timeout=300,
        )
        sent = len(server.requests) - before
    assert killed.returncode == 0, killed.stderr
    assert sent == 3  # two steps before the kill, one after: no step asked twice
    # The row's run has more than one attempt: the killed one and the one(s) Ray retried
    # (a retry's own process counts passes of the crash point afresh).
    assert len(load_progress(_row_file(tmp_path, 1))[0].attempts) >= 2
    assert transcript(_row_file(tmp_path, 1)) == transcript(_row_file(reference, 1))


@pytest.mark.slow
def test_ray_ctrl_c_checkpoints_every_row_and_resume_completes(tmp_path: Path) -> None:
    write_case(tmp_path, ["apples", "pears", "plums"])
    with RowServer(delay=0.5) as server:
        proc = subprocess.Popen(
            [*FLOW, *_args(server, "--workers", "2")],
            cwd=tmp_path,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 120
        first = _row_file(tmp_path, 1)
        while time.monotonic() < deadline and not (first.exists() and _replies(first) >= 1):
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, stderr
        batch = load_batch(tmp_path / "out" / "batch.md")
        assert batch.status == "interrupted"
        assert "running" not in [r.status for r in batch.rows]
        assert load_batch(tmp_path / "out" / "batch.md").rows[0].status != "completed"
        server.delay = 0
        resumed = flow(
            "resume",
            "out/batch.md",
            "--base-url",
            server.url,
            cwd=tmp_path,
            env=_env(),
            timeout=300,
        )
    assert resumed.returncode == 0, resumed.stderr
    assert load_batch(tmp_path / "out" / "batch.md").status == "completed"
