"""``flow batch --events FILE``: one stream with a batch's events and each row's run events,
tagged with the row (docs/spec.md 4.16), valid by the events schema."""

from __future__ import annotations

from pathlib import Path

from tests.support.batch_server import RowServer, write_case
from tests.support.events import check_events
from tests.support.flowproc import flow, flow_env


def test_a_batch_stream_holds_every_rows_events_between_its_own(tmp_path: Path) -> None:
    write_case(tmp_path, ["apples", "pears", "plums"])
    env = flow_env(OPENAI_API_KEY="sk-test-batch")
    env.pop("FLOW_EVENTS", None)
    with RowServer() as server:
        done = flow(
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
            "--events",
            "events.jsonl",
            cwd=tmp_path,
            env=env,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    events = check_events(tmp_path / "events.jsonl")
    first, last = events[0], events[-1]
    assert first["type"] == "batch_started" and first["rows"] == 3
    assert last["type"] == "batch_finished"
    assert (last["status"], last["exit_code"], last["rows_done"]) == ("completed", 0, 3)
    rows = events[1:-1]
    assert {e["row"] for e in rows} == {1, 2, 3}
    for row in (1, 2, 3):
        mine = [e for e in rows if e["row"] == row]
        # Each row's run: opened first, finished last, all its events one run's.
        assert mine[0]["type"] == "run_started" and mine[-1]["type"] == "run_finished"
        assert mine[-1]["status"] == "completed" and mine[-1]["exit_code"] == 0
        assert len({e["run_id"] for e in mine}) == 1
        assert mine[0]["progress"] == str(tmp_path / "out" / "rows" / f"{row:04d}" / "progress.md")
        # The row's own file beside its progress file holds the same events.
        beside = check_events(tmp_path / "out" / "rows" / f"{row:04d}" / "events.jsonl")
        assert beside == mine
