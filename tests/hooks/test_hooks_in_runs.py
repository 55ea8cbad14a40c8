"""Hooks in real ``flow run`` / ``flow resume`` processes with the scripted provider: each
event with the JSON the Copilot CLI sends, a denial as the call's result, failing and stuck
hooks that do not lose the run, the files a run uses, and what is recorded."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from promptflow_resume.progress import load_progress
from tests.support.events import read_events, validator
from tests.support.faults import assert_clean_error
from tests.support.flowproc import flow, flow_env
from tests.support.hooks import (
    HOOKS,
    RUN,
    audit_all,
    command,
    log_lines,
    workspace,
    write_hooks,
)
from tests.support.trust import trusted

#: Resume with the turn limit the first attempt stopped at raised.
RESUME = ("resume", "run/progress.md", "--max-turns", "100")


def _bumps(where: Path) -> int:
    counter = where / "counter.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_each_event_gets_the_copilot_json_in_run_order(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    where = workspace(tmp_path / "w", audit_all(log))
    result = flow(*RUN, cwd=where)
    assert result.returncode == 0, result.stderr
    lines = log_lines(log)
    assert [line["event"] for line in lines] == [
        "sessionStart",
        "userPromptSubmitted",
        "preToolUse",
        "postToolUse",
        "preToolUse",
        "postToolUse",
        "preToolUse",
        "postToolUse",
        "userPromptSubmitted",
        "sessionEnd",
    ]
    run, _ = load_progress(where / "run" / "progress.md")
    for line in lines:
        payload = line["payload"]
        assert payload["sessionId"] == run.run_id
        assert payload["cwd"] == str(where.resolve())
        assert isinstance(payload["timestamp"], int) and payload["timestamp"] > 1.7e12
    start, prompt, pre, post = (line["payload"] for line in lines[:4])
    assert start["source"] == "new"
    assert prompt["prompt"].endswith("Bump the counter twice, then look at it.")
    assert (pre["toolName"], pre["toolArgs"]) == ("bump", "{}")
    assert post["toolResult"]["resultType"] == "success"
    assert post["toolResult"]["textResultForLlm"].startswith("exit code: 0")
    assert lines[-1]["payload"]["reason"] == "complete"
    # Every run is counted; nothing is left open; the attempt names the file it ran.
    assert run.hooks.runs == 10 and run.hooks.open == []
    assert list(run.attempts[0].hooks) == [".github/hooks/test/hooks.json"]


def test_a_denied_call_does_not_run_and_its_reason_is_its_result(tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    audit = tmp_path / "audit.jsonl"
    env = {"HOOK_LOG": str(log), "DENY_TOOLS": "bump"}
    hooks = {
        "preToolUse": [command("deny_tools.py", env=env)],
        "postToolUse": [command("audit.py", "postToolUse", env={"HOOK_LOG": str(audit)})],
    }
    where = workspace(tmp_path / "w", hooks)
    result = flow(*RUN, cwd=where)
    assert result.returncode == 0, result.stderr
    assert _bumps(where) == 0  # the command never ran
    run, _ = load_progress(where / "run" / "progress.md")
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert [(e.tool, e.is_error) for e in results] == [
        ("bump", True),
        ("bump", True),
        ("peek", True),  # allowed, and fails: counter.txt was never written
    ]
    assert results[0].content == (
        "denied by a preToolUse hook (.github/hooks/test/hooks.json#preToolUse[0]): "
        "bump is not allowed in this repository"
    )
    assert [r["denied"] for r in log_lines(log)] == [True, True, False]
    kinds = [line["payload"]["toolResult"]["resultType"] for line in log_lines(audit)]
    assert kinds == ["denied", "denied", "failure"]  # peek: counter.txt does not exist
    notes = run.attempts[0].notes
    assert sum("denied a call: bump is not allowed" in n for n in notes) == 2


def test_a_matcher_limits_a_tool_hook_to_the_tools_it_names(tmp_path: Path) -> None:
    log = tmp_path / "names"
    hooks = {
        "preToolUse": [{**command("deny_all.sh", env={"HOOK_LOG": str(log)}), "matcher": "pe.k"}]
    }
    where = workspace(tmp_path / "w", hooks)
    assert flow(*RUN, cwd=where).returncode == 0
    assert log.read_text().split() == ["peek"]
    assert _bumps(where) == 2


def test_a_failing_and_a_stuck_hook_are_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    hooks = {
        "sessionStart": [command("stuck.sh", env={"HOOK_LOG": str(pids)}, timeoutSec=0.5)],
        "postToolUse": [command("leaky.sh", env={"SERVICE_TOKEN": "$SERVICE_TOKEN"})],
    }
    where = workspace(tmp_path / "w", hooks)
    secret = "ghp_" + "a1B2" * 9
    result = flow(*RUN, cwd=where, env=flow_env(SERVICE_TOKEN=secret))
    assert result.returncode == 0, result.stderr
    assert _bumps(where) == 2
    assert "hook .github/hooks/test/hooks.json#sessionStart[0] timed out after 0.5 s" in (
        result.stderr
    )
    assert "#postToolUse[0] exited with 3" in result.stderr
    assert "failed with token [REDACTED" in result.stderr
    text = (where / "run" / "progress.md").read_text()
    assert secret not in text and secret not in result.stderr + result.stdout
    run, _ = load_progress(where / "run" / "progress.md")
    notes = run.attempts[0].notes
    assert any("sessionStart[0] timed out" in n for n in notes)
    assert sum("postToolUse[0] exited with 3" in n for n in notes) == 3


def test_no_hooks_skips_the_workspaces_and_hooks_files_still_run(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    mine = tmp_path / "mine.jsonl"
    where = workspace(tmp_path / "w", audit_all(log))
    extra = write_hooks(
        tmp_path / "extra.json",
        {"sessionEnd": [command("audit.py", "sessionEnd", env={"HOOK_LOG": str(mine)})]},
    )
    result = flow(*RUN, "--no-hooks", "--hooks", str(extra), cwd=where)
    assert result.returncode == 0, result.stderr
    assert log_lines(log) == []
    assert [line["event"] for line in log_lines(mine)] == ["sessionEnd"]
    run, _ = load_progress(where / "run" / "progress.md")
    assert list(run.attempts[0].hooks) == [str(extra.resolve())]


def test_an_invalid_hooks_file_stops_the_run_before_it_exists(tmp_path: Path) -> None:
    where = workspace(tmp_path / "w")
    bad = where / ".github" / "hooks" / "bad.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"version": 1,\n "hooks": {"preToolUse": [{"type": "command"}]}}')
    trusted(where)
    result = flow(*RUN, cwd=where)
    line = assert_clean_error(result, 4, "bad.json:2:27:", "$.hooks.preToolUse[0]", "needs `bash`")
    assert "--no-hooks" in line
    assert not (where / "run").exists()
    missing = flow(*RUN, "--hooks", "none.json", cwd=workspace(tmp_path / "v"))
    assert_clean_error(missing, 5, "none.json")


def test_a_public_hook_pair_logs_each_attempt(tmp_path: Path) -> None:
    where = workspace(tmp_path / "w")
    target = where / ".github" / "hooks" / "work-log-tracker"
    shutil.copytree(HOOKS / "awesome-copilot" / "work-log-tracker", target)
    trusted(where)
    # WORK_LOG_DIR is not named in the hooks file's env, so the hooks never see it and log
    # under HOME (the test's own temporary home).
    elsewhere = tmp_path / "not-used"
    env = flow_env(WORK_LOG_DIR=str(elsewhere))
    first = flow(*RUN, "--max-turns", "1", cwd=where, env=env)
    assert first.returncode == 1, first.stderr
    resumed = flow(*RESUME, cwd=where, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "hook" not in first.stderr + resumed.stderr  # no hook failed
    sessions = Path(os.environ["HOME"]) / ".copilot-work-log" / "sessions.jsonl"
    events = [line["event"] for line in log_lines(sessions)]
    # sessionStart and sessionEnd are per attempt.
    assert events == ["session_start", "session_end", "session_start", "session_end"]
    assert log_lines(sessions)[0]["cwd"] == str(where.resolve())
    assert not elsewhere.exists()


def test_resume_says_when_the_hooks_files_changed_and_runs_them_as_they_are(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    where = workspace(tmp_path / "w", audit_all(log))
    first = flow(*RUN, "--max-turns", "1", cwd=where)
    assert first.returncode == 1, first.stderr
    hooks = audit_all(log)
    hooks["sessionEnd"].append(command("audit.py", "sessionEnd-2", env={"HOOK_LOG": str(log)}))
    write_hooks(where / ".github" / "hooks" / "test" / "hooks.json", hooks)
    resumed = flow(*RESUME, cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert "hooks files changed since the run last went on: .github/hooks/test/hooks.json" in (
        resumed.stderr
    )
    events = [line["event"] for line in log_lines(log)]
    assert events.count("sessionStart") == 2 and events[-1] == "sessionEnd-2"
    starts = [
        line["payload"]["source"] for line in log_lines(log) if line["event"] == "sessionStart"
    ]
    assert starts == ["new", "resume"]
    run, _ = load_progress(where / "run" / "progress.md")
    assert run.attempts[0].hooks != run.attempts[1].hooks
    assert any("hooks files changed" in n for n in run.attempts[1].notes)


def test_a_progress_file_cannot_make_a_hook_run(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    where = workspace(tmp_path / "w", audit_all(log))
    assert flow(*RUN, "--max-turns", "1", cwd=where).returncode == 1
    progress = where / "run" / "progress.md"
    # A stranger's edit: an open event for an old result, its hooks not yet run.
    text = progress.read_text()
    text = text.replace(
        "hooks:\n  runs:",
        "hooks:\n  open:\n  - {event: postToolUse, key: 'entry:5', ran: []}\n  runs:",
        1,
    )
    progress.write_text(text)
    before = [line["event"] for line in log_lines(log)]
    resumed = flow(*RESUME, cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert "not written by flow on this machine and were dropped: postToolUse entry:5" in (
        resumed.stderr
    )
    after = [line["event"] for line in log_lines(log)][len(before) :]
    # The resumed attempt's own events only: no postToolUse again for the result in entry 5.
    assert after.count("postToolUse") == 2 and after[0] == "sessionStart"
    # Without hooks files in the workspace, nothing runs at all.
    shutil.rmtree(where / ".github")
    run, _ = load_progress(progress)
    assert run.hooks.open == []
    again = flow("resume", "run/progress.md", "--retry-step", "report", cwd=where)
    assert again.returncode == 0, again.stderr
    assert len(log_lines(log)) == len(before) + len(after)
    assert "hooks files changed since the run last went on" in again.stderr
    run, _ = load_progress(progress)
    assert json.dumps(run.attempts[-1].hooks) == "{}"


def test_an_error_that_stops_the_run_reaches_error_and_end_hooks(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    where = workspace(tmp_path / "w", audit_all(log))
    secret = "sk-ant-api03-" + "k1" * 20
    script = where / "counter.script.yaml"
    script.write_text(
        script.read_text()
        + "failures:\n"
        + f"  0: {{transient: false, reason: auth, message: 'bad key {secret}', times: always}}\n"
    )
    result = flow(*RUN, cwd=where)
    assert result.returncode == 10, result.stderr
    lines = log_lines(log)
    assert [line["event"] for line in lines] == [
        "sessionStart",
        "userPromptSubmitted",
        "errorOccurred",
        "sessionEnd",
    ]
    error = lines[2]["payload"]
    assert error["errorContext"] == "model_call" and error["recoverable"] is True
    assert error["error"]["name"] == "ProviderError"
    assert "bad key" in error["error"]["message"] and secret not in error["error"]["message"]
    assert lines[3]["payload"]["reason"] == "error"


def test_an_interrupted_run_ends_its_session_with_abort(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    where = workspace(tmp_path / "w", audit_all(log))
    env = flow_env(FLOW_CRASH_AT="engine.tool_ran", FLOW_CRASH_SIGNAL="TERM")
    result = flow(*RUN, cwd=where, env=env)
    assert result.returncode == 130, result.stderr
    assert log_lines(log)[-1]["event"] == "sessionEnd"
    assert log_lines(log)[-1]["payload"]["reason"] == "abort"


def test_each_hook_run_is_an_event_saying_how_it_ended(tmp_path: Path) -> None:
    log = str(tmp_path / "decisions.jsonl")
    hooks = {
        "sessionStart": [
            command("stuck.sh", env={"HOOK_LOG": str(tmp_path / "pids")}, timeoutSec=0.5)
        ],
        "preToolUse": [command("deny_tools.py", env={"HOOK_LOG": log, "DENY_TOOLS": "bump"})],
        "postToolUse": [command("leaky.sh")],
        "sessionEnd": [command("audit.py", "sessionEnd", env={"HOOK_LOG": str(tmp_path / "a")})],
    }
    where = workspace(tmp_path / "w", hooks)
    events = tmp_path / "events.jsonl"
    assert flow(*RUN, "--events", str(events), cwd=where).returncode == 0
    seen = [e for e in read_events(events) if e["type"] == "hook"]
    assert [(e["hook"].split("#")[1], e["event"], e["status"]) for e in seen] == [
        ("sessionStart[0]", "sessionStart", "timed_out"),
        ("preToolUse[0]", "preToolUse", "denied"),
        ("postToolUse[0]", "postToolUse", "failed"),
        ("preToolUse[0]", "preToolUse", "denied"),
        ("postToolUse[0]", "postToolUse", "failed"),
        ("preToolUse[0]", "preToolUse", "ok"),
        ("postToolUse[0]", "postToolUse", "failed"),
        ("sessionEnd[0]", "sessionEnd", "ok"),
    ]
    assert seen[0]["ms"] >= 500
    assert all(validator("hook").is_valid(e) for e in seen)
