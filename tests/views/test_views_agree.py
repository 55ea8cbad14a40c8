"""Every view of a run tells the same run: for random runs (budget stops, held calls approved or
denied, rewinds, hand edits, resumes) ``flow show --json``, ``flow status --json``, the PR
summary's numbers, the dashboard's JSON (a real ``flow serve`` over a socket), the OTLP spans
and the events replayed from the ``--events`` stream agree.

Runs use the scripted provider in process; a few examples keep it to seconds in CI, and the
``slow`` profile tries more.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptflow_resume import Limits, RunOptions, resume_run, start_run
from promptflow_resume.api import StartRequest, decide_calls
from promptflow_resume.eventstream import EventStream
from promptflow_resume.otel.spans import run_spans
from promptflow_resume.progress import load_progress
from promptflow_resume.run.status import run_status
from promptflow_resume.sharing.rewind import rewind
from promptflow_resume.show.prsummary import pr_summary
from promptflow_resume.show.report import run_json
from tests.support.serve import Server

#: One step's replies: a plain answer, or a call of a read-only tool, or a held edit, first.
STEP_KINDS = ("answer", "read", "edit")


def _workflow(steps: int) -> str:
    body = "".join(f"## Step {i}: Part {i}\nDo part {i}.\n\n" for i in range(1, steps + 1))
    return (
        "---\ndescription: Views agree\nprovider: scripted\n"
        "tools: [read_file, create_file]\napprove: [edit]\n---\n" + body
    )


def _script(kinds: list[str]) -> str:
    replies: list[dict[str, Any]] = []
    for n, kind in enumerate(kinds):
        usage = {"input_tokens": 100 + n, "output_tokens": 10 + n}
        if kind == "read":
            call = {"name": "read_file", "arguments": {"path": "notes.md"}}
            replies.append({"content": "Reading.", "tool_calls": [call], "usage": usage})
        elif kind == "edit":
            call = {"name": "create_file", "arguments": {"path": f"f{n}.txt", "content": "x"}}
            replies.append({"content": "Writing.", "tool_calls": [call], "usage": usage})
        if kind != "answer":
            usage = {"input_tokens": 50, "output_tokens": 5}
        replies.append({"content": f"Part {n + 1} done.", "usage": usage})
    # Spare replies: a rewound step asks again.
    replies += [{"content": f"Again {i}.", "usage": {"input_tokens": 7}} for i in range(12)]
    return json.dumps({"replies": replies})


scenarios = st.fixed_dictionaries(
    {
        "kinds": st.lists(st.sampled_from(STEP_KINDS), min_size=1, max_size=3),
        "turns": st.sampled_from([None, 1, 2]),
        "decision": st.sampled_from(["approve", "deny"]),
        "rewind": st.booleans(),
        "edit": st.booleans(),
    }
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    folder = tmp_path_factory.mktemp("views")
    with Server(folder) as server:
        yield server, folder


_counter = itertools.count()


def _play(folder: Path, scenario: dict[str, Any]) -> tuple[Path, Path]:
    """Run the scenario; the last thing done to the run is a run or a resume (so its events
    tell its last state)."""
    (folder / "wf.prompt.md").write_text(_workflow(len(scenario["kinds"])), encoding="utf-8")
    (folder / "script.json").write_text(_script(scenario["kinds"]), encoding="utf-8")
    (folder / "notes.md").write_text("ship on Friday\n", encoding="utf-8")
    progress = folder / "run" / "progress.md"
    events = folder / "events.jsonl"

    def options(turns: int | None) -> RunOptions:
        stream = EventStream.open(str(events))
        return RunOptions(workspace=folder, limits=Limits(max_turns=turns), reporter=stream)

    request = StartRequest(
        folder / "wf.prompt.md", progress=progress, recording=folder / "script.json"
    )
    run = start_run(request, options(scenario["turns"])).run
    for _ in range(8):  # each stop is answered, then the run resumed
        if run.status == "completed":
            break
        if run.status == "awaiting_approval":
            decide_calls(progress, [], approve=scenario["decision"] == "approve", every=True,
                         reason="not now")  # fmt: skip
        if scenario["edit"]:
            text = progress.read_text(encoding="utf-8")
            progress.write_text(text.replace("done.", "done (edited).", 1), encoding="utf-8")
        run = resume_run(progress, options(None)).run
    if scenario["rewind"] and run.status == "completed":
        rewind(progress, next(iter(run.steps)))
        run = resume_run(progress, options(None)).run
    return progress, events


def _summary_numbers(text: str) -> dict[str, Any]:
    head = re.search(r"step (\d+) of (\d+) · (\d+) turns · ([\d,]+) tokens · \$([\d.]+)", text)
    assert head is not None, text
    rows = re.findall(r"^\| \d+ \| (\S+) \| \S+ (\S+) \|", text, re.MULTILINE)
    return {
        "step_index": int(head.group(1)),
        "steps_total": int(head.group(2)),
        "turns": int(head.group(3)),
        "tokens": int(head.group(4).replace(",", "")),
        "cost": float(head.group(5)),
        "steps": rows,
    }


def _replayed(events: Path) -> dict[str, Any]:
    """The run as its events tell it: the last run_finished, and the calls started/finished."""
    lines = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    finished = [e for e in lines if e["type"] == "run_finished"][-1]
    return {
        "status": finished["status"],
        "usage": finished["usage"],
        "steps_done": finished["steps_done"],
        "steps_total": finished["steps_total"],
        "replies": sum(1 for e in lines if e["type"] == "model_reply"),
    }


def _check(server: Server, root: Path, progress: Path, events: Path) -> None:
    shown = run_json(progress)
    status = run_status(progress).to_dict()
    _, _, body = server.get(f"/api/run/0/{progress.relative_to(root).as_posix()}")
    board = json.loads(body)
    # One record, many views: the same facts under the same keys.
    for key in (
        "run_id", "status", "reason", "recorded_status", "owner_alive", "state", "step",
        "step_index", "steps_total", "steps_done", "percent", "usage", "attempts",
        "models", "model_attempts", "trace_id", "handoffs", "approvals", "permissions", "steps",
    ):  # fmt: skip
        assert shown[key] == status[key] == board[key], key
    assert board["steps"] == shown["steps"]
    assert all(s["status"] != "running" for s in shown["steps"])  # none runs: it stopped
    assert shown["steps_done"] == sum(
        s["status"] in ("completed", "skipped") for s in shown["steps"]
    )

    usage = shown["usage"]
    numbers = _summary_numbers(pr_summary(progress))
    assert numbers["step_index"] == shown["step_index"]
    assert numbers["steps_total"] == shown["steps_total"]
    assert numbers["turns"] == usage["turns"]
    assert numbers["tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert numbers["cost"] == pytest.approx(round(usage["cost_usd"], 4))
    assert numbers["steps"] == [(s["step"], s["status"]) for s in shown["steps"]]

    run, _ = load_progress(progress)
    spans = run_spans(run, progress)
    roots = [s for s in spans if s.parent_span_id is None]
    assert len(roots) == shown["attempts"]
    for part in ("input_tokens", "output_tokens"):
        assert sum(int(r.attributes[f"gen_ai.usage.{part}"]) for r in roots) == usage[part]
    assert sum(int(r.attributes["flow.usage.turns"]) for r in roots) == usage["turns"]
    calls = sorted(e.call_id or "" for e in run.transcript if e.role == "tool_call")
    tool_spans = [s for s in spans if s.name.startswith("execute_tool")]
    assert sorted(str(s.attributes["gen_ai.tool.call.id"]) for s in tool_spans) == calls
    chats = [s for s in spans if s.name.startswith("chat")]
    assert len(chats) == sum(1 for e in run.transcript if e.role == "assistant")
    assert len({s.span_id for s in spans}) == len(spans)

    told = _replayed(events)
    assert told["status"] == shown["recorded_status"]
    assert told["usage"] == usage
    assert (told["steps_done"], told["steps_total"]) == (shown["steps_done"], shown["steps_total"])
    assert told["replies"] >= usage["turns"] - 0  # each recorded reply was told


def _property(served: tuple[Server, Path], scenario: dict[str, Any]) -> None:
    server, root = served
    folder = root / f"ex{next(_counter)}"
    folder.mkdir()
    try:
        progress, events = _play(folder, scenario)
        _check(server, root, progress, events)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenario=scenarios)
def test_random_runs_look_the_same_in_every_view(
    served: tuple[Server, Path], scenario: dict[str, Any]
) -> None:
    _property(served, scenario)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenario=scenarios)
def test_random_runs_look_the_same_in_every_view_longer(
    served: tuple[Server, Path], scenario: dict[str, Any]
) -> None:
    _property(served, scenario)
