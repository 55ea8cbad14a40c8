"""An owner record is a file beside the progress file, so a repository can ship one. The
model request in flight it notes is shown by ``flow status`` only in the form flow writes:
nothing else of it reaches a terminal (docs/spec.md 4.6, 10.6)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from promptflow_resume.progress.owner import host_name, owner_path, process_start
from promptflow_resume.progress.state import run_state


def _owner(path: Path, request: object) -> None:
    # A record that looks alive: this process, this host, its own start time.
    record = {"pid": os.getpid(), "host": host_name(), "since": "2026-11-28T10:00:00Z"}
    start = process_start(os.getpid())
    if start is not None:
        record["pid_start"] = start
    record["request"] = request
    owner_path(path).write_text(json.dumps(record), encoding="utf-8")


@pytest.mark.parametrize(
    "request_note",
    [
        {"step": "main\x1b]0;pwned\x07", "turn": 1, "since": "2026-11-28T10:00:00Z"},
        {"step": "main", "turn": 1, "since": "2026-11-28T10:00:00Z\x1b[2J"},
        {"step": "main", "turn": "1; rm -rf /", "since": "2026-11-28T10:00:00Z"},
        {"step": "m" * 10_000, "turn": 1, "since": "2026-11-28T10:00:00Z"},
        "waiting since forever",
    ],
    ids=["escape-in-step", "escape-in-since", "text-turn", "huge-step", "not-a-mapping"],
)
def test_a_request_note_not_in_flows_form_is_not_shown(
    tmp_path: Path, request_note: object
) -> None:
    path = tmp_path / "progress.md"
    _owner(path, request_note)
    state = run_state(path, "running", None)
    assert state.owner_alive and state.request is None
    assert state.reason is not None and "waiting for the model" not in state.reason


def test_a_request_note_in_flows_form_is_shown(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    _owner(path, {"step": "main", "turn": 2, "since": "2026-11-28T10:00:00Z"})
    state = run_state(path, "running", None)
    assert state.request == {"step": "main", "turn": 2, "since": "2026-11-28T10:00:00Z"}
    assert state.reason is not None
    assert state.reason.endswith(
        "waiting for the model since 2026-11-28T10:00:00Z (step main, turn 2)"
    )
