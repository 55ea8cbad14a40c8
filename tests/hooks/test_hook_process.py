"""One hook run as a real process: its stdin, its environment, its folder, its time limit,
its decision, and what of its output is kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

from promptflow_resume.base.redact import Redactor
from promptflow_resume.run.hookprocess import hook_environment, run_hook
from promptflow_resume.workflow.hookfiles import HookCommand
from tests.support.faults import wait_for
from tests.support.hooks import OWN

SECRET = "sk-proj-" + "Q" * 40


def _hook(bash: str, event: str = "preToolUse", **extra: object) -> HookCommand:
    return HookCommand(event, 0, "hooks.json", bash, **extra)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def test_the_event_arrives_on_stdin_and_a_deny_is_read_from_stdout(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    hook = _hook(
        str(OWN / "deny_tools.py"),
        env={"HOOK_LOG": str(log), "DENY_TOOLS": "bump,peek"},
    )
    payload = {"timestamp": 1, "cwd": str(tmp_path), "toolName": "bump", "toolArgs": '{"n": 2}'}
    outcome = run_hook(hook, payload, tmp_path, Redactor({}))
    assert not outcome.failed, outcome.describe()
    assert (outcome.decision, outcome.reason) == (
        "deny",
        "bump is not allowed in this repository",
    )
    assert json.loads(log.read_text()) == {"tool": "bump", "args": {"n": 2}, "denied": True}
    allowed = run_hook(hook, {**payload, "toolName": "read_file"}, tmp_path, Redactor({}))
    assert allowed.decision == "allow"


def test_only_path_home_and_the_named_variables_reach_the_hook(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": "/home/x", "GH_TOKEN": SECRET, "USER_NAME": "ann"}
    hook = _hook("env", env={"GREETING": "hi ${USER_NAME}", "PLAIN": "1"})
    assert hook_environment(hook, env) == {
        "PATH": env["PATH"],
        "HOME": "/home/x",
        "GREETING": "hi ann",
        "PLAIN": "1",
    }
    outcome = run_hook(hook, {}, tmp_path, Redactor({}))
    names = {line.split("=", 1)[0] for line in outcome.stdout.splitlines()}
    # bash adds its own (PWD, SHLVL, _); nothing of flow's environment besides these.
    assert {"PATH", "GREETING", "PLAIN"} <= names
    bash_own = {"PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "_"}
    assert not names & {k for k in os.environ if k not in bash_own}


def test_its_folder_is_its_cwd_inside_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    inside = run_hook(_hook("pwd", cwd="scripts"), {}, tmp_path, Redactor({}))
    assert inside.stdout.strip() == str((tmp_path / "scripts").resolve())
    outside = run_hook(_hook("pwd", cwd="../"), {}, tmp_path, Redactor({}))
    assert outside.failed and outside.exit is None and "cwd" in (outside.error or "")
    missing = run_hook(_hook("pwd", cwd="nope"), {}, tmp_path, Redactor({}))
    assert missing.failed and "does not exist" in missing.describe()


def test_a_hook_past_its_time_limit_is_stopped_with_its_whole_tree(tmp_path: Path) -> None:
    log = tmp_path / "pids"
    hook = _hook(str(OWN / "stuck.sh"), timeout=0.5, env={"HOOK_LOG": str(log)})
    outcome = run_hook(hook, {}, tmp_path, Redactor({}))
    # A guard that times out fails closed: its call is denied, saying why.
    assert outcome.timed_out and outcome.failed and outcome.decision == "deny"
    assert outcome.reason == "the hook timed out after 0.5 s, so the call is denied"
    assert "timed out after 0.5 s and was stopped" in outcome.describe()
    assert outcome.ms < 5000
    shell, child = (int(p) for p in log.read_text().split())
    wait_for(lambda: not _alive(shell) and not _alive(child), timeout=5)


def test_output_is_redacted_and_a_failure_keeps_its_stderr(tmp_path: Path) -> None:
    redactor = Redactor.from_environment({"SERVICE_TOKEN": SECRET})
    hook = _hook(str(OWN / "leaky.sh"), env={"SERVICE_TOKEN": "$SERVICE_TOKEN"})
    env = {"SERVICE_TOKEN": SECRET, "PATH": "/usr/bin:/bin"}
    outcome = run_hook(hook, {}, tmp_path, redactor, env=env)
    assert outcome.exit == 3 and outcome.failed
    assert SECRET not in outcome.stdout + outcome.stderr + outcome.describe()
    assert "[REDACTED" in outcome.stderr
    # A failure shows what it said on stderr.
    assert outcome.preview.startswith("failed with token [REDACTED")
    assert "exited with 3" in outcome.describe()


def test_a_guard_that_fails_denies_whatever_it_printed(tmp_path: Path) -> None:
    allow = '{"permissionDecision": "allow"}'
    outcome = run_hook(_hook(f"echo '{allow}'; exit 1"), {}, tmp_path, Redactor({}))
    assert outcome.failed and outcome.decision == "deny"
    assert outcome.reason is not None and outcome.reason.startswith("the hook exited with 1")
    deny = '{"permissionDecision": "deny", "permissionDecisionReason": "x"}'
    chatty = run_hook(_hook(f"echo checking; echo '{deny}'"), {}, tmp_path, Redactor({}))
    assert chatty.decision == "deny" and chatty.reason == "x"
    missing = run_hook(_hook("true", cwd="no/such/folder"), {}, tmp_path, Redactor({}))
    assert missing.exit is None and missing.decision == "deny"


def test_exit_2_blocks_with_its_stderr_as_the_reason(tmp_path: Path) -> None:
    outcome = run_hook(_hook("echo 'no rm here' >&2; exit 2"), {}, tmp_path, Redactor({}))
    assert outcome.decision == "deny" and outcome.reason == "no rm here"


def test_vs_code_decisions_sit_under_hook_specific_output(tmp_path: Path) -> None:
    said = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "blocked by policy",
        }
    }
    outcome = run_hook(_hook(f"echo '{json.dumps(said)}'"), {}, tmp_path, Redactor({}))
    assert outcome.decision == "deny" and outcome.reason == "blocked by policy"


def test_other_events_only_report_a_failure(tmp_path: Path) -> None:
    outcome = run_hook(_hook("exit 1", event="postToolUse"), {}, tmp_path, Redactor({}))
    assert outcome.failed and outcome.decision is None
