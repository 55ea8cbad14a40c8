"""Example runs: a small realistic one for docs and snapshots, and synthetic long ones.

Used by the test suite, the benchmark and anyone who wants to see what a progress file looks
like without calling a model::

    print(render(example_run()))
    run = synthetic_run(1_000)     # 1,000 transcript entries: replies and tool results
"""

from __future__ import annotations

import json

from .entry import EntryMeta
from .model import (
    Attempt,
    Cursor,
    Entry,
    ErrorInfo,
    InFlight,
    Redactions,
    Run,
    RunConfig,
    StepState,
    Usage,
    WorkflowRef,
)

_H = "sha256:v1:"


def example_run() -> Run:
    """A two-step run interrupted mid-way, with every kind of entry and content form."""
    return Run(
        run_id="20261121-232529-release-a1b2",
        workflow=WorkflowRef(
            path="../../../workflows/release-notes.prompt.md",
            hash=_H + "9f2c4e1a7b3d5f60" * 4,
            steps={"inspect": _H + "1c2d3e4f5a6b7c8d" * 4, "report": _H + "8d7c6b5a4f3e2d1c" * 4},
            name="release-notes",
            description="Summarize the changes since the last release",
        ),
        status="interrupted",
        reason="interrupted by Ctrl-C",
        created="2026-11-21T23:25:29Z",
        updated="2026-11-21T23:26:01Z",
        config=RunConfig(
            provider="openai",
            model="gpt-4o-mini",
            params={"temperature": 0},
            budget={"max_turns": 40, "max_cost_usd": 0.5},
        ),
        cursor=Cursor(step="report", index=2, total=2),
        inputs={"audience": "the team", "since": "v1.4.0"},
        steps={
            "inspect": StepState(
                status="completed",
                attempts=1,
                output_entry=6,
                started="2026-11-21T23:25:30Z",
                finished="2026-11-21T23:25:48Z",
                usage=Usage(1840, 212, 0, 0.000403, 2),
                turns=2,
            ),
            "report": StepState(status="running", attempts=1, started="2026-11-21T23:25:49Z"),
        },
        in_flight=[
            InFlight(
                call_id="call_7Qx",
                tool="count_tests",
                step="report",
                entry=8,
                started="2026-11-21T23:26:00Z",
                idempotent=True,
            )
        ],
        usage=Usage(2630, 301, 1024, 0.000575, 3),
        attempts=[
            Attempt(
                n=1,
                started="2026-11-21T23:25:29Z",
                ended="2026-11-21T23:26:01Z",
                status="interrupted",
                reason="interrupted by Ctrl-C",
                usage=Usage(2630, 301, 1024, 0.000575, 3),
            )
        ],
        last_error=ErrorInfo(
            type="Interrupted",
            message="interrupted by Ctrl-C",
            at="2026-11-21T23:26:01Z",
            step="report",
        ),
        redactions=Redactions(count=1, where=["tool_result in step inspect"]),
        keywords=["changes", "notes", "release", "summarize"],
        transcript=_example_transcript(),
    )


def _example_transcript() -> list[Entry]:
    """The transcript of ``example_run``: a system prompt, two steps' prompts, tool calls and
    results (one redacted, one kept in a sidecar, one still in flight) and a reply."""
    return [
        Entry(1, "system", "You write release notes for the team.\nKeep them short."),
        Entry(2, "user", "List the commits since v1.4.0.", step="inspect"),
        Entry(
            3,
            "tool_call",
            '{"args": ["--oneline", "-n", "20"]}',
            step="inspect",
            call_id="call_1aB",
            tool="git_log",
        ),
        Entry(
            4,
            "tool_result",
            "exit code: 0\n--- stdout ---\n4f1c2d0 Fix the ``` fence parser\n"
            "9ab77e1 Add a --since option\n[REDACTED:GITHUB_TOKEN]\n",
            step="inspect",
            call_id="call_1aB",
            tool="git_log",
        ),
        Entry(
            5,
            "tool_result",
            "exit code: 0\n--- stdout ---\nTAR header (preview)",
            step="inspect",
            call_id="call_2cD",
            tool="make_archive",
            sidecar="progress.files/call_2cD-make_archive.bin",
            sidecar_sha256="sha256:" + "0" * 64,
            sidecar_bytes=204800,
        ),
        Entry(
            6,
            "assistant",
            "## Changes since v1.4.0\n\n- Fixed the fence parser.\n- Added `--since`.",
            step="inspect",
        ),
        Entry(7, "user", "Write the report for the team.\r\nCount the tests first.", step="report"),
        Entry(8, "tool_call", "{}", step="report", call_id="call_7Qx", tool="count_tests"),
    ]


def _synthetic_meta(entry: Entry) -> EntryMeta:
    """What a real run records on ``entry``'s marker: times a second apart per entry, and on a
    reply what its streamed request took (every request is streamed)."""
    at = (
        f"2026-11-21T{entry.id // 3600 % 24:02d}:{entry.id // 60 % 60:02d}:{entry.id % 60:02d}.250Z"
    )
    if entry.role == "assistant":
        return EntryMeta(
            at=at, ms=1840, model="gpt-4o-mini", tokens=(4200, 120, 3072), cost=0.00071,
            finish="tool_calls", ttft=420, tps=84.6,
        )  # fmt: skip
    if entry.role == "tool_result":
        return EntryMeta(at=at, ms=12, kind="builtin")
    return EntryMeta(at=at)


def synthetic_run(
    entries: int, *, reply_bytes: int = 300, result_bytes: int = 1024, meta: bool = True
) -> Run:
    """A run of ``entries`` transcript entries: model replies and tool results alternating,
    each with the marker fields flow writes since format 7 (``meta``: its time, and a reply's
    model, tokens, cost and finish, a result's duration and kind; docs/spec.md 13.4)."""
    run = example_run()
    run.transcript = []
    run.in_flight = []
    line = "The build passed and the report lists every change made since the last release. "
    reply = (line * (reply_bytes // len(line) + 1))[:reply_bytes].strip()
    row = "src/module_{n:04d}.py | 12 ++++++------\n"
    output = "".join(row.format(n=i) for i in range(result_bytes // len(row) + 1))[:result_bytes]
    for i in range(1, entries + 1):
        step = "inspect" if i <= entries // 2 else "report"
        if i % 3 == 1:
            entry = Entry(i, "assistant", reply, step=step)
        elif i % 3 == 2:
            args = json.dumps({"path": f"src/module_{i:04d}.py"})
            entry = Entry(i, "tool_call", args, step=step, call_id=f"call_{i}", tool="read_file")
        else:
            entry = Entry(
                i, "tool_result", output, step=step, call_id=f"call_{i - 1}", tool="read_file"
            )
        if meta:
            entry.meta = _synthetic_meta(entry)
        run.transcript.append(entry)
    run.steps["inspect"].output_entry = None
    return run
