"""``flow batch --engine ray --files shipped`` on a real cluster of several nodes (spec 8.6).

One cluster for the module (``tests/support/raycluster.py``): a head node with no CPU started
with ``ray start --head``, and a worker node with 2 CPU slots started with ``ray start
--address`` in a mount namespace of its own, where a tmpfs covers the tests' temp folders: the
node cannot see the driver's batch folder, workspace, workflow or home (its sealing key and
trust), and whatever it would write at those paths stays in its tmpfs, which the tests read
through ``/proc``. The nodes' environment has no provider key and says
``FLOW_TRUST_WORKSPACE=1``: the key must come through ``--ray-env``, and trust from the driver.

Each row's workflow runs a command step that is not idempotent: it POSTs to the test's server
(its effect, counted per row) and prints 70 KB (kept in a sidecar file). Needs root for
``unshare --mount``; skipped otherwise.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptflow_resume.api import RunOptions
from promptflow_resume.batch import load_batch, start_batch
from promptflow_resume.batch.worker import RowTask, run_row
from promptflow_resume.progress import load_progress
from promptflow_resume.trust import trust_folder
from tests.support.batch_server import RowServer, write_case
from tests.support.flowproc import FLOW, flow_env, transcript
from tests.support.raycluster import Node, RayCluster, usable

pytest.importorskip("ray", reason="the ray extra is not installed (pip install '.[ray]')")

pytestmark = pytest.mark.slow  # a cluster of Ray nodes on 2 cores: about a minute in all

#: What the notify command runs: one POST to the server (the effect), then 70 KB of output.
SCRIPT = (
    "import sys, urllib.request; "
    "urllib.request.urlopen(urllib.request.Request("
    "sys.argv[1] + '/effect/notify-' + sys.argv[2], data=b'', method='POST')); "
    "print('noted', sys.argv[2], 'x' * 70000)"
)


def _workflow(server: RowServer) -> str:
    root = server.url.removesuffix("/v1")
    argv = json.dumps([sys.executable, "-c", SCRIPT, root, "{topic}"])
    return f"""\
---
name: triage
provider: openai
model: gpt-4o-mini
inputs:
  topic:
    type: string
commands:
  notify:
    description: Tell the service about the topic (once per row)
    argv: {argv}
    parameters:
      topic: {{type: string}}
---
You triage topics.

## Step 1: Read
Read about ${{input:topic}}.

## Step 2: Notify
> run: notify topic=${{input:topic}}

## Step 3: Write
Write a note on ${{input:topic}}.
"""


def _topics(count: int) -> list[str]:
    return [f"topic-{i}" for i in range(1, count + 1)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    why = usable()
    if why is not None:
        pytest.skip(why)
    hidden = [tmp_path_factory.getbasetemp()]
    with RayCluster(hidden=hidden, env={"FLOW_TRUST_WORKSPACE": "1"}) as made:
        made.add_worker()
        yield made


def _worker(cluster: RayCluster) -> Node:
    return [node for node in cluster.nodes[1:] if node.running()][-1]


def _row(folder: Path, row: int) -> Path:
    return folder / "out" / "rows" / f"{row:04d}" / "progress.md"


def _reference(folder: Path, server: RowServer, topic: str, row: int) -> Path:
    """The row run here with the library alone, in a folder laid out as the batch's."""
    folder.mkdir()
    write_case(folder, [topic], _workflow(server))
    progress = _row(folder, row)
    task = RowTask(
        row=row,
        progress=str(progress),
        workflow=str(folder / "triage.prompt.md"),
        inputs={"topic": topic},
        workspace=str(folder),
        options={"base_url": server.url},
    )
    assert run_row(task).status == "completed"
    return progress


def test_fifty_rows_on_a_node_that_cannot_see_the_batch_folder(
    cluster: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = _worker(cluster)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with RowServer() as server:
        write_case(work, _topics(50), _workflow(server))
        assert not node.sees(work / "triage.prompt.md").exists()
        outcome = start_batch(
            "triage.prompt.md",
            "rows.jsonl",
            RunOptions(base_url=server.url),
            out="out",
            workers=3,
            engine="ray",
            address=cluster.address,
            ray_env=["OPENAI_API_KEY"],
        )
        effects = dict(server.effects)
        references = {
            row: _reference(tmp_path / f"ref{row}", server, f"topic-{row}", row) for row in (1, 50)
        }
    batch = outcome.batch
    assert (batch.status, batch.files) == ("completed", "shipped"), batch.totals()
    for row in range(1, 51):
        run, _ = load_progress(_row(work, row))  # sidecars verified against their hashes
        assert run.status == "completed"
        assert run.workflow.path == "../../../triage.prompt.md"
        assert len([e for e in run.transcript if e.sidecar]) == 1  # the command's 70 KB
    for row, reference in references.items():
        assert transcript(_row(work, row)) == transcript(reference)
    assert effects == {f"notify-topic-{i}": 1 for i in range(1, 51)}
    rows = (work / "out" / "rows").rglob("*")
    assert [p.name for p in rows if p.suffix in (".lock", ".owner")] == []
    # The node wrote nothing at the driver's paths: its view of them is still an empty tmpfs.
    assert list(node.sees(tmp_path.parent).iterdir()) == []


def test_a_row_on_a_node_runs_only_the_hooks_the_driver_trusts(
    cluster: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("FLOW_TRUST_WORKSPACE", raising=False)
    hooks = tmp_path / ".github" / "hooks"
    hooks.mkdir(parents=True)
    with RowServer() as server:
        post = (
            "import sys, urllib.request; urllib.request.urlopen(urllib.request.Request("
            "sys.argv[1] + '/effect/hook', data=b'', method='POST'))"
        )
        hook = f'{sys.executable} -c "{post}" {server.url.removesuffix("/v1")}'
        entry = {"type": "command", "bash": hook}
        (hooks / "notify.json").write_text(
            json.dumps({"version": 1, "hooks": {"sessionStart": [entry]}}), encoding="utf-8"
        )
        write_case(tmp_path, ["apples"], _workflow(server))

        def batch(out: str) -> None:
            outcome = start_batch(
                "triage.prompt.md",
                "rows.jsonl",
                RunOptions(base_url=server.url),
                out=out,
                engine="ray",
                address=cluster.address,
                ray_env=["OPENAI_API_KEY"],
            )
            assert outcome.batch.status == "completed", outcome.batch.totals()

        # Not trusted here: the node's own FLOW_TRUST_WORKSPACE=1 does not count.
        batch("untrusted")
        assert "hook" not in server.effects
        run, _ = load_progress(tmp_path / "untrusted" / "rows" / "0001" / "progress.md")
        notes = " ".join(n for a in run.attempts for n in a.notes)
        assert "not used: .github/hooks/notify.json (not trusted)" in notes
        # Trusted here (flow trust on the driver's machine): the node runs it.
        trust_folder(tmp_path)
        batch("trusted")
        assert server.effects.get("hook") == 1


def _spawn_batch(tmp_path: Path, server: RowServer, address: str) -> subprocess.Popen[str]:
    """``flow batch`` as the driver, in its own process: the key travels with --ray-env, and so
    does this machine's sealing key."""
    return subprocess.Popen(
        [
            *FLOW,
            *("batch", "triage.prompt.md", "--data", "rows.jsonl", "--out", "out"),
            *("--engine", "ray", "--address", address, "--base-url", server.url),
            *("--ray-env", "OPENAI_API_KEY", "--ray-env", "FLOW_SEAL_KEY", "--json"),
        ],
        cwd=tmp_path,
        env=flow_env(OPENAI_API_KEY="sk-test-batch", RAY_AUTH_MODE="disabled"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _kill_the_node_when_held(
    cluster: RayCluster, server: RowServer, proc: subprocess.Popen[str], *markers: str
) -> list[str]:
    """Once 4 rows notified, hold the answers to requests with ``markers`` until both running
    rows wait on one; then SIGKILL the worker node, join a new one, and let the answers go.
    The texts that were held."""
    deadline = time.monotonic() + 120
    while sum(server.effects.values()) < 4 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    server.hold(*markers)
    while len(server.waiting) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    held = list(server.waiting)
    assert len(held) == 2, held
    _worker(cluster).kill()
    cluster.add_worker()
    server.release()
    return held


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


def test_a_worker_node_killed_mid_batch_loses_no_row_and_repeats_no_call(
    cluster: RayCluster, tmp_path: Path
) -> None:
    rows = 10
    with RowServer() as server:
        write_case(tmp_path, _topics(rows), _workflow(server))
        proc = _spawn_batch(tmp_path, server, cluster.address)
        # Both running rows are past their notify call, waiting on step 3's model call.
        _kill_the_node_when_held(cluster, server, proc, "Write a note")
        out, err = _finish(proc)
    assert proc.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    batch = load_batch(tmp_path / "out" / "batch.md")
    assert [r.status for r in batch.rows] == ["completed"] * rows
    assert server.effects == {f"notify-topic-{i}": 1 for i in range(1, rows + 1)}
    # The rows the node was running began again on the new node, from the driver's copy.
    again = [r for r in range(1, rows + 1) if len(load_progress(_row(tmp_path, r))[0].attempts) > 1]
    assert len(again) == 2, again


def test_a_call_in_flight_on_a_killed_node_is_not_run_again(
    cluster: RayCluster, tmp_path: Path
) -> None:
    rows = 8
    with RowServer() as server:
        write_case(tmp_path, _topics(rows), _workflow(server))
        proc = _spawn_batch(tmp_path, server, cluster.address)
        # Both running rows are inside their notify call: its effect done, its result not.
        held = _kill_the_node_when_held(cluster, server, proc, "/effect/")
        _, err = _finish(proc)
    assert proc.returncode == 1, err
    in_flight = sorted(int(text.rsplit("-", 1)[1]) for text in held)
    batch = load_batch(tmp_path / "out" / "batch.md")
    assert [r.row for r in batch.rows if r.status == "needs_review"] == in_flight
    assert [r.status for r in batch.rows if r.row not in in_flight] == ["completed"] * (rows - 2)
    assert server.effects == {f"notify-topic-{i}": 1 for i in range(1, rows + 1)}
    for row in in_flight:
        run, _ = load_progress(_row(tmp_path, row))
        assert run.status == "needs_review" and run.in_flight


@pytest.mark.soak  # two clusters in turn: about 30 s
def test_a_driver_killed_mid_batch_resumes_on_a_new_cluster(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    why = usable()
    if why is not None:
        pytest.skip(why)
    rows = 8
    hidden = [tmp_path_factory.getbasetemp()]
    with RowServer() as server:
        write_case(tmp_path, _topics(rows), _workflow(server))
        with RayCluster(hidden=hidden) as first:
            first.add_worker()
            proc = _spawn_batch(tmp_path, server, first.address)
            deadline = time.monotonic() + 120
            while sum(server.effects.values()) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            server.hold("Write a note")
            while len(server.waiting) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
        server.release()
        assert load_batch(tmp_path / "out" / "batch.md").status == "running"
        with RayCluster(hidden=hidden) as second:
            second.add_worker()
            resumed = subprocess.run(
                [*FLOW, "resume", "out/batch.md", "--base-url", server.url],
                cwd=tmp_path,
                env=flow_env(
                    OPENAI_API_KEY="sk-test-batch",
                    RAY_AUTH_MODE="disabled",
                    RAY_ADDRESS=second.address,
                ),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=300,
            )
    assert resumed.returncode == 0, resumed.stderr
    batch = load_batch(tmp_path / "out" / "batch.md")
    assert [r.status for r in batch.rows] == ["completed"] * rows
    assert server.effects == {f"notify-topic-{i}": 1 for i in range(1, rows + 1)}


@pytest.mark.soak  # tests/batch/test_batch_ray.py stops a batch with Ctrl-C in CI
def test_ctrl_c_checkpoints_the_shipped_rows_and_resume_completes(
    cluster: RayCluster, tmp_path: Path
) -> None:
    rows = 4
    with RowServer() as server:
        write_case(tmp_path, _topics(rows), _workflow(server))
        proc = _spawn_batch(tmp_path, server, cluster.address)
        deadline = time.monotonic() + 120
        while sum(server.effects.values()) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.hold("Write a note")
        while len(server.waiting) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        # Ctrl-C reaches the batch process only (its tasks run elsewhere): it stops them.
        proc.send_signal(signal.SIGINT)
        server.release()
        _, err = _finish(proc)
        assert proc.returncode == 130, err
        batch = load_batch(tmp_path / "out" / "batch.md")
        assert batch.status == "interrupted" and "running" not in [r.status for r in batch.rows]
        stopped = [r.row for r in batch.rows if r.status == "interrupted"]
        assert stopped and all(
            load_progress(_row(tmp_path, r))[0].status == "interrupted" for r in stopped
        )
        resumed = subprocess.run(
            [*FLOW, "resume", "out/batch.md", "--base-url", server.url],
            cwd=tmp_path,
            env=flow_env(
                OPENAI_API_KEY="sk-test-batch",
                RAY_AUTH_MODE="disabled",
                RAY_ADDRESS=cluster.address,
            ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert resumed.returncode == 0, resumed.stderr
    assert server.effects == {f"notify-topic-{i}": 1 for i in range(1, rows + 1)}
