"""Shipped rows without Ray in between (docs/spec.md 8.6): a row's attempt (``run_shipped``) in a
scratch folder, its channel wired straight to the driver's desk in this process.

Ray only carries the requests (``tests/batch/test_batch_raynodes.py`` runs them across real
nodes); what is checked here is what the two ends do with them: the driver's copy of the row
is the row as a run on this machine leaves it (sidecars and child runs included), only the
latest attempt of a row may write, an event the node took back is dropped at the driver, the
batch's budget is kept by the driver, and a batch that could not work on a node is refused
before anything runs.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import pytest

from promptflow_resume.base.costledger import CostLedger
from promptflow_resume.base.errors import InputError, StorageError
from promptflow_resume.batch import start_batch
from promptflow_resume.batch.checkpoint import BUDGET_FILE
from promptflow_resume.batch.relay import Channel, Desk
from promptflow_resume.batch.shipping import Bundle, files_mode, make_bundle, run_shipped
from promptflow_resume.batch.worker import RowResult, RowTask, run_row
from promptflow_resume.progress import load_progress
from promptflow_resume.progress.mirror import MirrorError, MirrorOp
from promptflow_resume.progress.seal import KEY_VARIABLE, Key
from promptflow_resume.workflow import load_workflow
from tests.support.batch_server import RowServer, write_case
from tests.support.flowproc import transcript

#: A command whose 70 KB of output goes to a sidecar file, and a sub-workflow: a child run.
WORKFLOW = f"""\
---
name: triage
provider: openai
model: gpt-4o-mini
inputs:
  topic:
    type: string
commands:
  report:
    description: A long report
    argv: {json.dumps([sys.executable, "-c", "print('r' * 70000)"])}
    idempotent: true
---
You triage topics.

## Step 1: Read
Read about ${{input:topic}}.

## Step 2: Report
> run: report

## Step 3: Child
> workflow: child.prompt.md · inputs: topic=${{input:topic}}
"""

CHILD = """\
---
name: child
inputs:
  topic:
    type: string
---
Summarise ${input:topic}.
"""


def _case(folder: Path, server: RowServer) -> None:
    write_case(folder, ["apples"], WORKFLOW)
    (folder / "child.prompt.md").write_text(CHILD, encoding="utf-8")


def _task(folder: Path, server: RowServer, **extra: object) -> RowTask:
    fields = {
        "row": 1,
        "progress": str(folder / "out" / "rows" / "0001" / "progress.md"),
        "workflow": str(folder / "triage.prompt.md"),
        "inputs": {"topic": "apples"},
        "workspace": str(folder),
        "options": {"base_url": server.url},
        **extra,
    }
    return RowTask(**fields)  # type: ignore[arg-type]


def _bundle(folder: Path) -> Bundle:
    workflow = load_workflow(folder / "triage.prompt.md")
    return make_bundle(folder, workflow, leave_out=[folder / "out"])


def _ship(folder: Path, server: RowServer, desk: Desk, **extra: object) -> RowResult:
    """One attempt of row 1 of ``folder``'s batch, its channel wired to ``desk``."""
    task = _task(folder, server, **extra)
    return run_shipped(asdict(task), _bundle(folder), Channel(desk.handle, 1))


@pytest.fixture
def driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    folder = tmp_path / "driver"
    folder.mkdir()
    return folder


def test_a_shipped_row_leaves_at_the_driver_what_a_run_here_leaves(
    driver: Path, tmp_path: Path
) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    with RowServer() as server:
        _case(driver, server)
        _case(reference, server)
        desk = Desk(driver / "out")
        scratch_before = set(Path(tempfile.gettempdir()).glob(f"flow-rows-{os.getuid()}/*"))
        result = _ship(driver, server, desk, events=True)
        desk.close()
        assert run_row(_task(reference, server)).status == "completed"
    assert result.status == "completed", result
    row = driver / "out" / "rows" / "0001"
    run, _ = load_progress(row / "progress.md")  # its sidecar is checked against its hash
    assert [e.sidecar for e in run.transcript if e.sidecar]
    assert transcript(row / "progress.md") == transcript(
        reference / "out" / "rows" / "0001" / "progress.md"
    )
    child = next(row.glob("progress.steps/*/progress.md"))
    assert load_progress(child)[0].status == "completed"
    # Its events came back when the attempt ended (flow batch --events copies them).
    events = [json.loads(line) for line in (row / "events.jsonl").read_text().splitlines()]
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert {e["row"] for e in events} == {1}
    # The driver let go of the row; the attempt's scratch folder is gone.
    left = sorted(p.name for p in row.iterdir())
    assert left == ["events.jsonl", "progress.files", "progress.md", "progress.steps"]
    after = set(Path(tempfile.gettempdir()).glob(f"flow-rows-{os.getuid()}/*"))
    assert after <= scratch_before


def test_a_retry_resumes_from_the_driver_s_copy_and_the_older_attempt_may_not_write(
    driver: Path,
) -> None:
    with RowServer() as server:
        _case(driver, server)
        desk = Desk(driver / "out")
        first = Channel(desk.handle, 1)
        assert first.open() == []
        assert _ship(driver, server, desk).status == "completed"
        # The first attempt was taken for dead when the second opened: it may not write.
        with pytest.raises(MirrorError, match="replaced by a newer one"):
            first.send(MirrorOp("fold", "progress.md", b"---\n"))
        sent = len(server.requests)
        # A third attempt starts from the files the driver holds: the run is completed.
        again = _ship(driver, server, desk)
        desk.close()
    assert again.status == "completed" and len(server.requests) == sent


def test_an_event_the_node_took_back_is_dropped_at_the_driver(driver: Path) -> None:
    desk = Desk(driver)
    channel = Channel(desk.handle, 1)
    channel.open()
    journal = driver / "rows" / "0001" / "progress.md.journal"
    channel.send(MirrorOp("append", "progress.md", b"header\nevent 1\n", offset=0))
    # The node's send of event 2 failed there, so it cut its journal back and wrote event 2'.
    channel.send(MirrorOp("append", "progress.md", b"event 2\n", offset=15))
    channel.send(MirrorOp("append", "progress.md", b"event 2'\n", offset=15))
    assert journal.read_bytes() == b"header\nevent 1\nevent 2'\n"
    with pytest.raises(MirrorError, match="does not continue"):
        channel.send(MirrorOp("append", "progress.md", b"event 9\n", offset=500))
    channel.send(MirrorOp("fold", "progress.md", b"folded\n"))
    assert not journal.exists()
    desk.close()


def test_the_driver_keeps_the_batch_s_budget_and_charges_a_dead_attempt_s_call(
    driver: Path,
) -> None:
    ledger = CostLedger(driver / BUDGET_FILE, owner="batch")
    ledger.reset(1.0, 0.0)
    desk = Desk(driver)
    first = Channel(desk.handle, 1)
    first.open()
    held = first.reserve(0.4)
    assert held is not None and ledger.read().held == pytest.approx(0.4)
    assert first.reserve(0.7) is None  # 0.4 held + 0.7 > 1.0
    second = Channel(desk.handle, 1)
    second.open()  # the first attempt died mid-call: its call may have been billed
    state = second.read()
    assert (state.spent_usd, state.held) == (pytest.approx(0.4), 0)
    desk.close()


@pytest.mark.parametrize(
    ("tools", "named"),
    [("edit/editFiles", "create_file"), ("runCommands", "run_in_terminal")],
)
def test_a_shipped_batch_of_a_workflow_that_changes_files_is_refused_before_it_starts(
    workdir: Path, tools: str, named: str
) -> None:
    front = f"name: w\ntools: ['{tools}']\ninputs:\n  topic: {{type: string}}\n"
    (workdir / "w.prompt.md").write_text(f"---\n{front}---\nDo ${{input:topic}}.\n", "utf-8")
    (workdir / "rows.jsonl").write_text('{"topic": "a"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="changes are not brought back") as caught:
        start_batch("w.prompt.md", "rows.jsonl", out="out", engine="ray", files="shipped")
    assert named in str(caught.value) and "--files shared" in (caught.value.hint or "")
    assert not (workdir / "out").exists()


def test_a_named_variable_must_be_set_and_the_sealing_key_is_this_machine_s(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptflow_resume.batch.shipping import named_env

    monkeypatch.delenv("FLOW_TEST_UNSET", raising=False)
    with pytest.raises(InputError, match="FLOW_TEST_UNSET is not set here"):
        named_env(["FLOW_TEST_UNSET"])
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    shipped = named_env([KEY_VARIABLE])[KEY_VARIABLE]
    assert shipped == Key.ensure().secret.hex()
    # A process given the key in the variable seals with it, whatever its own folder holds.
    monkeypatch.setenv(KEY_VARIABLE, shipped)
    monkeypatch.setenv("FLOW_HOME", str(workdir / "elsewhere"))
    assert Key.find() == Key.ensure() and Key.ensure().secret.hex() == shipped
    assert not (workdir / "elsewhere" / "key").exists()
    monkeypatch.setenv(KEY_VARIABLE, "abc")
    with pytest.raises(StorageError, match="must be 64 hex digits"):
        Key.ensure()


def test_how_rows_reach_their_files_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert files_mode("local", None, None) is None
    assert files_mode("ray", None, None) == "shared"
    assert files_mode("ray", None, "head:6379") == "shipped"
    monkeypatch.setenv("RAY_ADDRESS", "head:6379")
    assert files_mode("ray", None, None) == "shipped"
    assert files_mode("ray", "shared", None) == "shared"
    with pytest.raises(InputError, match="for the ray engine"):
        files_mode("local", "shipped", None)
