"""Every reader tells the same state of a run whose ``flow run`` was killed (SIGKILL): the
front matter still says ``running``, and status, list, log and show all say it is
interrupted, its owner gone, and resumable, in text and in JSON. While the run is alive they
say it is running and that resume must wait.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.flowproc import flow, provider_env, spawn
from tests.support.providers_server import Canned, ModelServer, openai_completion, openai_usage

WORKFLOW = """\
---
provider: openai
model: gpt-4o
---
You count bees.

## Step 1: Count
Count the bees.

## Step 2: Report
Report the count.
"""

PROGRESS = "run/progress.md"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _reply(text: str, delay: float = 0.0) -> Canned:
    return Canned(body=openai_completion(text, usage=openai_usage(100, 10)), delay=delay)


def _wait_requests(proc: subprocess.Popen[str], server: ModelServer, n: int) -> None:
    deadline = time.monotonic() + 60
    while len(server.requests) < n and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    assert len(server.requests) == n


def _read(where: Path, *args: str) -> str:
    result = flow(*args, cwd=where, env=provider_env(COLUMNS="200"))
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_killed_run_reads_as_interrupted_and_resumable_everywhere(
    tmp_path: Path, server: ModelServer
) -> None:
    where = tmp_path / "project"
    where.mkdir()
    (where / "bees.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    server.push(_reply("Twelve bees."), _reply("Report: twelve.", delay=20))
    args = ("run", "bees.prompt.md", "--base-url", server.url + "/v1", "--progress", PROGRESS)
    proc = spawn(*args, "--new", cwd=where, env=provider_env(COLUMNS="200"))
    try:
        _wait_requests(proc, server, 2)

        # Alive: running, and resume has to wait for it.
        live = json.loads(_read(where, "status", "--json", PROGRESS))
        assert (live["status"], live["owner_alive"], live["can_resume"]) == (
            "running",
            True,
            False,
        )
        assert live["state"].startswith(f"running (owner alive: pid {proc.pid} on ")
        assert "the run is live" in live["blocked"]
        [listed] = json.loads(_read(where, "list", "--json", "run"))
        assert (listed["status"], listed["resumable"]) == ("running", False)
    finally:
        os.kill(proc.pid, 9)
        proc.communicate()

    # The file still says running: nothing was left to write anything else.
    assert "status: running" in (where / PROGRESS).read_text(encoding="utf-8")

    gone = f"owner gone: pid {proc.pid} on "
    expected = "interrupted (" + gone
    status = _read(where, "status", PROGRESS)
    listed_text = _read(where, "list", "run")
    log = _read(where, "log", PROGRESS)
    show = _read(where, "show", PROGRESS)
    [status_line] = [line for line in status.splitlines() if line.startswith("status ")]
    assert status_line.startswith("status   " + expected)
    assert status_line.endswith("ended without a checkpoint), resumable")
    assert "resume   can resume from step report" in status
    assert "interrupted (owner gone: pid" in listed_text and "resumable" in listed_text
    assert "running" not in listed_text
    assert log.splitlines()[0].startswith("run ") and expected in log.splitlines()[0]
    assert "(not ended: its process is gone)  interrupted" in log
    assert "status: " + expected in show
    _read(where, "show", PROGRESS, "--html", "page.html")
    page = (where / "page.html").read_text(encoding="utf-8")
    assert 'id="status">interrupted</span> — ' + gone in page

    documents = {
        "status": json.loads(_read(where, "status", "--json", PROGRESS)),
        "list": json.loads(_read(where, "list", "--json", "run"))[0],
        "log": json.loads(_read(where, "log", "--json", PROGRESS)),
        "show": json.loads(_read(where, "show", "--json", PROGRESS)),
    }
    for name, doc in documents.items():
        assert doc["status"] == "interrupted", name
        assert doc["recorded_status"] == "running", name
        assert doc["owner_alive"] is False, name
        assert doc["reason"].startswith(gone), name
        assert doc["state"] == status_line.removeprefix("status   "), name
    assert documents["status"]["can_resume"] is True
    assert all(documents[n]["resumable"] is True for n in ("list", "log", "show"))
    # --status interrupted finds it; --status running does not.
    assert json.loads(_read(where, "list", "--json", "--status", "interrupted", "run"))
    assert json.loads(_read(where, "list", "--json", "--status", "running", "run")) == []

    # And resume does what they said: it continues from the step that was cut off.
    server.push(_reply("Report: twelve."))
    result = flow("resume", PROGRESS, cwd=where, env=provider_env(COLUMNS="200"))
    assert result.returncode == 0, result.stderr
    done = json.loads(_read(where, "status", "--json", PROGRESS))
    assert (done["status"], done["state"]) == ("completed", "completed")
