"""Hooks and crashes: ``flow`` killed with SIGKILL around a hook's run, then resumed.

A hook whose run was recorded never runs again for the same event; a ``preToolUse`` decision
is reused, so a call killed between its hook and its start runs once, without asking the hook
again; a hook cut off before its record runs again (at least once, never lost). The final
transcript equals an uninterrupted run's, and the non-idempotent ``bump`` runs exactly twice.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from tests.support.flowproc import flow, flow_env, transcript
from tests.support.hooks import RUN, audit_all, command, log_lines, workspace
from tests.support.slow import sweep

#: Hook runs of an uninterrupted run of the counter workflow with ``audit_all``.
RUNS = 10


def _bumps(where: Path) -> int:
    counter = where / "counter.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _finish(where: Path) -> int:
    """Resume until the run completes; how many resumes it took."""
    for n in range(1, 6):
        result = flow("resume", "run/progress.md", cwd=where)
        if result.returncode == 0:
            return n
        assert result.returncode == 8, result.stderr  # a bump in flight: the person decides
        result = flow("resume", "run/progress.md", "--rerun-unsafe", cwd=where)
        if result.returncode == 0:
            return n
    raise AssertionError("the run did not complete")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[object], Counter[str]]:
    base = tmp_path_factory.mktemp("reference")
    log = base / "audit.jsonl"
    where = workspace(base / "w", audit_all(log))
    assert flow(*RUN, cwd=where).returncode == 0
    events = Counter(line["event"] for line in log_lines(log))
    assert sum(events.values()) == RUNS
    return transcript(where / "run" / "progress.md"), events  # type: ignore[return-value]


def test_sigkill_between_a_tools_pre_hook_and_the_tool(
    tmp_path: Path, reference: tuple[list[object], Counter[str]]
) -> None:
    log = tmp_path / "audit.jsonl"
    where = workspace(tmp_path / "w", audit_all(log))
    # The first call's preToolUse hook has run and is recorded; the call has not started.
    first = flow(*RUN, cwd=where, env=flow_env(FLOW_CRASH_AT="engine.hooks_allowed"))
    assert first.returncode == -9, first.stderr
    assert _bumps(where) == 0
    run, _ = load_progress(where / "run" / "progress.md")
    (record,) = run.hooks.open
    assert (record.event, record.key, [r.exit for r in record.ran]) == (
        "preToolUse",
        "call:call_0_0",
        [0],
    )
    assert run.in_flight == []
    assert _finish(where) == 1  # nothing was in flight: no review needed
    assert _bumps(where) == 2
    events = Counter(line["event"] for line in log_lines(log))
    # Its decision was reused: no preToolUse ran twice; sessionStart ran per attempt, and
    # sessionEnd only in the attempt that ended (the first was killed).
    assert events["preToolUse"] == reference[1]["preToolUse"] == 3
    assert (events["sessionStart"], events["sessionEnd"]) == (2, 1)
    assert transcript(where / "run" / "progress.md") == reference[0]


def test_a_recorded_denial_is_reused_after_a_crash(tmp_path: Path) -> None:
    decisions = tmp_path / "decisions.jsonl"
    hooks = {
        "preToolUse": [
            command("deny_tools.py", env={"HOOK_LOG": str(decisions), "DENY_TOOLS": "bump"})
        ]
    }
    where = workspace(tmp_path / "w", hooks)
    # Killed right after the first denial was recorded, before the call's result was.
    first = flow(*RUN, cwd=where, env=flow_env(FLOW_CRASH_AT="hooks.recorded:1"))
    assert first.returncode == -9, first.stderr
    assert _finish(where) == 1
    assert [r["denied"] for r in log_lines(decisions)] == [True, True, False]
    assert _bumps(where) == 0
    run, _ = load_progress(where / "run" / "progress.md")
    denied = [e for e in run.transcript if e.role == "tool_result" and e.tool == "bump"]
    assert len(denied) == 2 and all(
        e.content.startswith("denied by a preToolUse hook") for e in denied
    )


def test_a_forged_hook_record_is_dropped_and_its_hooks_run_again(tmp_path: Path) -> None:
    names = tmp_path / "names"
    hooks = {"preToolUse": [command("deny_all.sh", env={"HOOK_LOG": str(names)})]}
    where = workspace(tmp_path / "w", hooks)
    # Killed after the first call's denial was recorded: the call waits for its result.
    first = flow(*RUN, cwd=where, env=flow_env(FLOW_CRASH_AT="hooks.recorded:1"))
    assert first.returncode == -9, first.stderr
    journal = where / "run" / "progress.md.journal"
    text = journal.read_text()
    assert '"decision":"deny"' in text
    # Someone turns the recorded denial into an approval, to get the call run unasked.
    journal.write_text(text.replace('"decision":"deny"', '"decision":"allow"'))
    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 hook record(s) in the file were not written by flow on this machine" in (
        resumed.stderr
    )
    assert _bumps(where) == 0  # asked again, and denied again
    assert names.read_text().split() == ["bump", "bump", "bump", "peek"]


#: (crash point, pass): every hook record of the run, killed just before and just after it,
#: and every call between its hook and its start.
CASES = [
    *((("hooks.before_record", n)) for n in range(1, RUNS)),
    *((("hooks.recorded", n)) for n in range(1, RUNS)),
    *((("engine.hooks_allowed", n)) for n in (1, 2, 3)),
]


@pytest.mark.parametrize(
    ("point", "n"),
    sweep(
        CASES, keep={("hooks.before_record", 4), ("hooks.recorded", 4), ("engine.hooks_allowed", 2)}
    ),
)
def test_sigkill_around_each_hook_record_then_resume(
    point: str, n: int, tmp_path: Path, reference: tuple[list[object], Counter[str]]
) -> None:
    log = tmp_path / "audit.jsonl"
    where = workspace(tmp_path / "w", audit_all(log))
    first = flow(*RUN, cwd=where, env=flow_env(FLOW_CRASH_AT=f"{point}:{n}"))
    assert first.returncode == -9, first.stderr
    killed_after = len(log_lines(log))
    attempts = 1 + _finish(where)
    assert _bumps(where) == 2
    assert transcript(where / "run" / "progress.md") == reference[0]
    events = Counter(line["event"] for line in log_lines(log))
    expected = Counter(reference[1])
    expected["sessionStart"] = attempts  # once per attempt
    expected["sessionEnd"] = attempts - 1  # not in the attempt that was killed
    if point == "hooks.before_record":
        # The hook that had just run was not recorded: it runs once more (a session hook
        # belongs to its attempt and is not run again as such).
        last = log_lines(log)[killed_after - 1]["event"]
        if last not in ("sessionStart", "sessionEnd"):
            expected[last] += 1
    assert events == expected
