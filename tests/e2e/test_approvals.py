"""Approvals that wait in the file (docs/spec.md 4.17), with real ``flow`` processes and no
terminal: held calls stop the run ``awaiting_approval`` (exit 15); ``flow approve``/``deny``,
or a hand edit, decide; ``flow resume`` runs exactly the approved calls once."""

from __future__ import annotations

import json
from pathlib import Path

import pexpect
import pytest

from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import Run
from tests.support.flowproc import FLOW, flow, flow_env

pytestmark = pytest.mark.e2e

WORKFLOW = """---
description: Write two files after reading the notes
provider: scripted
tools: [create_file, read_file]
approve: [edit]
---
## Step 1: Write
Write the files.
"""

#: One reply, three calls: a read (not held) and two writes (held by ``approve: [edit]``).
SCRIPT = """replies:
  - content: "Writing."
    tool_calls:
      - {name: read_file, arguments: {path: notes.md}}
      - {name: create_file, arguments: {path: a.txt, content: "A"}}
      - {name: create_file, arguments: {path: b.txt, content: "B"}}
  - content: "Done."
"""

PROGRESS = "run/progress.md"


def _start(where: Path, *extra: str, env: dict[str, str] | None = None) -> Path:
    (where / "wf.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (where / "wf.script.yaml").write_text(SCRIPT, encoding="utf-8")
    (where / "notes.md").write_text("ship on Friday\n", encoding="utf-8")
    result = flow(
        "run", "wf.prompt.md", "--recording", "wf.script.yaml", "--progress", PROGRESS,
        "--new", *extra, cwd=where, env=env,
    )  # fmt: skip
    assert "Traceback" not in result.stderr
    if not extra:
        assert result.returncode == 15, result.stderr
    return where / PROGRESS


def _results(run: Run) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for entry in run.transcript:
        if entry.role == "tool_result":
            found.setdefault(entry.call_id or "", []).append(entry.content)
    return found


def test_held_calls_stop_the_run_and_list_every_one(workdir: Path) -> None:
    progress = _start(workdir)
    run, _ = load_progress(progress)
    assert run.status == "awaiting_approval"
    assert [(a.call_id, a.tool, a.decision) for a in run.approvals] == [
        ("call_0_1", "create_file", "pending"),
        ("call_0_2", "create_file", "pending"),
    ]
    assert _results(run) == {}  # not even the read ran: results stay in the model's order
    assert not (workdir / "a.txt").exists()
    text = progress.read_text(encoding="utf-8")
    assert "Tool calls waiting for approval" in text
    assert "flow approve PROGRESS --call call_0_1 --call call_0_2" in text
    status = flow("status", PROGRESS, "--json", cwd=workdir)
    data = json.loads(status.stdout)
    assert data["status"] == "awaiting_approval"
    assert [a["call_id"] for a in data["approvals"]] == ["call_0_1", "call_0_2"]
    assert data["approvals"][0]["why"] == "approve: edit"


def test_approve_one_deny_one_then_resume(workdir: Path) -> None:
    progress = _start(workdir)
    approved = flow("approve", PROGRESS, "--call", "call_0_1", "--json", cwd=workdir)
    assert approved.returncode == 0, approved.stderr
    record = json.loads(approved.stdout)
    assert record["pending"] == ["call_0_2"]
    assert record["calls"][0]["by"] and record["calls"][0]["host"]
    still = flow("resume", PROGRESS, cwd=workdir)
    assert still.returncode == 15, still.stderr  # one call is still undecided
    assert not (workdir / "a.txt").exists()

    denied = flow("deny", PROGRESS, "--call", "call_0_2", "--reason", "not b", cwd=workdir)
    assert denied.returncode == 0, denied.stderr
    resumed = flow("resume", PROGRESS, cwd=workdir)
    assert resumed.returncode == 0, resumed.stderr
    assert (workdir / "a.txt").read_text() == "A"
    assert not (workdir / "b.txt").exists()
    run, _ = load_progress(progress)
    results = _results(run)
    assert len(results["call_0_0"]) == len(results["call_0_1"]) == 1
    assert results["call_0_2"] == ["error: a person denied this call (by " + _by(run) + "): not b"]
    assert run.status == "completed" and run.approvals == []
    notes = " ".join(run.attempts[-1].notes)
    assert "call call_0_1 (create_file) approved" in notes
    assert "call call_0_2 (create_file) denied" in notes


def _by(run: Run) -> str:
    note = next(n for a in run.attempts for n in a.notes if "denied by " in n)
    return note.split("denied by ", 1)[1].split(" at ", 1)[0]


def test_an_approval_written_by_hand_works(workdir: Path) -> None:
    progress = _start(workdir)
    text = progress.read_text(encoding="utf-8")
    assert text.count("\n  decision: pending\n") == 2  # the front matter's approvals:
    progress.write_text(text.replace("  decision: pending", "  decision: approved"), "utf-8")
    resumed = flow("resume", PROGRESS, cwd=workdir)
    assert resumed.returncode == 0, resumed.stderr
    assert (workdir / "a.txt").read_text() == "A" and (workdir / "b.txt").read_text() == "B"


def test_a_hand_approval_never_runs_a_call_this_machine_did_not_record(workdir: Path) -> None:
    progress = _start(workdir)
    text = progress.read_text(encoding="utf-8")
    # Someone changes what the held call writes, and approves it in the same edit.
    forged = text.replace('"path": "a.txt"', '"path": "evil.txt"').replace(
        "  decision: pending", "  decision: approved"
    )
    progress.write_text(forged, encoding="utf-8")
    resumed = flow("resume", PROGRESS, cwd=workdir)
    assert resumed.returncode == 8, resumed.stderr  # needs_review: the seal does not match
    assert "Traceback" not in resumed.stderr
    assert not (workdir / "evil.txt").exists() and not (workdir / "a.txt").exists()


def test_unknown_call_id_is_a_clear_error_and_leaves_the_file(workdir: Path) -> None:
    progress = _start(workdir)
    before = progress.read_bytes()
    result = flow("approve", PROGRESS, "--call", "call_9", cwd=workdir)
    assert result.returncode == 9
    assert "no tool call 'call_9' waits for approval" in result.stderr
    assert "waiting: call_0_1, call_0_2" in result.stderr
    assert "Traceback" not in result.stderr
    assert progress.read_bytes() == before
    nothing = flow("approve", PROGRESS, cwd=workdir)
    assert nothing.returncode == 9 and "--call ID (or --all)" in nothing.stderr


def test_sigkill_after_approve_during_the_approved_call(workdir: Path) -> None:
    progress = _start(workdir)
    assert flow("approve", PROGRESS, "--all", cwd=workdir).returncode == 0
    # Killed right after the second call (the first approved write) ran, before its result.
    killed = flow("resume", PROGRESS, cwd=workdir, env=flow_env(FLOW_CRASH_AT="engine.tool_ran:2"))
    assert killed.returncode == -9
    assert (workdir / "a.txt").read_text() == "A"
    resumed = flow("resume", PROGRESS, cwd=workdir)
    assert resumed.returncode == 0, resumed.stderr
    run, _ = load_progress(progress)
    results = _results(run)
    assert sorted(results) == ["call_0_0", "call_0_1", "call_0_2"]
    assert all(len(r) == 1 for r in results.values())
    assert (workdir / "b.txt").read_text() == "B"
    assert run.status == "completed" and run.approvals == []


def test_no_approve_and_approve_flags(workdir: Path) -> None:
    _start(workdir, "--no-approve")
    run, _ = load_progress(workdir / PROGRESS)
    assert run.status == "completed" and (workdir / "b.txt").exists()
    # --approve adds to the workflow's list: now the read waits too.
    again = flow(
        "run", "wf.prompt.md", "--recording", "wf.script.yaml", "--progress", "two/progress.md",
        "--new", "--approve", "read_file", cwd=workdir,
    )  # fmt: skip
    assert again.returncode == 15
    held, _ = load_progress(workdir / "two" / "progress.md")
    assert [a.call_id for a in held.approvals] == ["call_0_0", "call_0_1", "call_0_2"]
    assert held.approvals[0].why == "--approve read_file"


def test_a_terminal_asks_per_call(workdir: Path) -> None:
    (workdir / "wf.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (workdir / "wf.script.yaml").write_text(SCRIPT, encoding="utf-8")
    (workdir / "notes.md").write_text("notes\n", encoding="utf-8")
    args = [*FLOW[1:], "run", "wf.prompt.md", "--recording", "wf.script.yaml"]
    child = pexpect.spawn(
        FLOW[0], [*args, "--progress", PROGRESS, "--new"], cwd=str(workdir), env=flow_env(),
        encoding="utf-8", timeout=60,
    )  # fmt: skip
    child.expect_exact('Run create_file (approve: edit) with {"path": "a.txt"')
    child.sendline("y")
    child.expect_exact('Run create_file (approve: edit) with {"path": "b.txt"')
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (workdir / "a.txt").exists() and not (workdir / "b.txt").exists()
    run, _ = load_progress(workdir / PROGRESS)
    assert "denied on the terminal" in _results(run)["call_0_2"][0]


HUMAN = """---
description: Ask a person
provider: scripted
---
## Step 1: Ask
> kind: human

Which day do we ship?

## Step 2: Say
Say the day.
"""


def test_flow_answer_writes_the_answer_and_resume_continues(workdir: Path) -> None:
    (workdir / "h.prompt.md").write_text(HUMAN, encoding="utf-8")
    (workdir / "h.script.yaml").write_text('replies:\n  - "Friday it is."\n', encoding="utf-8")
    (workdir / "answer.txt").write_text("Friday, after the tests pass.\n", encoding="utf-8")
    started = flow(
        "run", "h.prompt.md", "--recording", "h.script.yaml", "--progress", PROGRESS, "--new",
        cwd=workdir,
    )  # fmt: skip
    assert started.returncode == 11
    assert f"flow answer {PROGRESS} --text TEXT" in started.stderr
    answered = flow("answer", PROGRESS, "--text", "@answer.txt", cwd=workdir)
    assert answered.returncode == 0, answered.stderr
    resumed = flow("resume", PROGRESS, cwd=workdir)
    assert resumed.returncode == 0, resumed.stderr
    run, _ = load_progress(workdir / PROGRESS)
    assert run.transcript[0].content.endswith("Answer: Friday, after the tests pass.")
    again = flow("answer", PROGRESS, "--text", "x", cwd=workdir)
    assert again.returncode == 9 and "waits for no answer" in again.stderr


COMMAND = """---
description: Write a marker with a shell command
provider: scripted
tools: [runCommands]
---
Write the marker.
"""

COMMAND_SCRIPT = """replies:
  - content: "Writing a marker."
    tool_calls:
      - {name: run_in_terminal, arguments: {command: "echo ran >> marker.txt"}}
  - content: "Again."
    tool_calls:
      - {name: run_in_terminal, arguments: {command: "echo twice >> marker.txt"}}
  - "Done."
"""


def test_on_consent_stop_holds_a_command_until_approved_for_that_call_only(
    workdir: Path,
) -> None:
    (workdir / "c.prompt.md").write_text(COMMAND, encoding="utf-8")
    (workdir / "c.script.yaml").write_text(COMMAND_SCRIPT, encoding="utf-8")
    args = ["c.prompt.md", "--recording", "c.script.yaml", "--progress", PROGRESS, "--new"]
    stopped = flow("run", *args, "--on-consent", "stop", cwd=workdir)
    assert stopped.returncode == 15, stopped.stderr
    run, _ = load_progress(workdir / PROGRESS)
    assert [a.call_id for a in run.approvals] == ["call_0_0"]
    assert run.approvals[0].why.startswith("needs consent: no terminal to ask")
    assert flow("approve", PROGRESS, "--all", cwd=workdir).returncode == 0
    # The approval grants that one command: the next one is held again.
    again = flow("resume", PROGRESS, "--on-consent", "stop", cwd=workdir)
    assert again.returncode == 15, again.stderr
    assert (workdir / "marker.txt").read_text() == "ran\n"
    held, _ = load_progress(workdir / PROGRESS)
    assert [a.call_id for a in held.approvals] == ["call_1_0"]
    # Without --on-consent stop the held call is still held (the decision waits in the file);
    # denied, the model is told and the run completes.
    denied = flow("deny", PROGRESS, "--call", "call_1_0", "--reason", "once is enough", cwd=workdir)
    assert denied.returncode == 0
    done = flow("resume", PROGRESS, cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert (workdir / "marker.txt").read_text() == "ran\n"


def test_without_on_consent_stop_a_command_is_refused_as_before(workdir: Path) -> None:
    (workdir / "c.prompt.md").write_text(COMMAND, encoding="utf-8")
    (workdir / "c.script.yaml").write_text(COMMAND_SCRIPT, encoding="utf-8")
    args = ["c.prompt.md", "--recording", "c.script.yaml", "--progress", PROGRESS, "--new"]
    result = flow("run", *args, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert not (workdir / "marker.txt").exists()
    bad = flow("run", *args, "--on-consent", "ask", cwd=workdir)
    assert bad.returncode == 2 and "expected refuse or stop" in bad.stderr


def test_the_approve_list_of_an_agent_a_prompt_file_uses_holds_its_calls(workdir: Path) -> None:
    agents = workdir / ".github" / "agents"
    agents.mkdir(parents=True)
    (agents / "writer.agent.md").write_text(
        "---\nname: writer\ntools: [create_file, read_file]\napprove: [create_file]\n---\n"
        "You write files.\n",
        encoding="utf-8",
    )
    (workdir / "wf.prompt.md").write_text(
        "---\nprovider: scripted\nagent: writer\n---\n## Step 1: Write\nWrite the files.\n",
        encoding="utf-8",
    )
    (workdir / "wf.script.yaml").write_text(SCRIPT, encoding="utf-8")
    (workdir / "notes.md").write_text("ship on Friday\n", encoding="utf-8")
    run_args = ("run", "wf.prompt.md", "--recording", "wf.script.yaml", "--progress", PROGRESS)
    result = flow(*run_args, "--new", cwd=workdir)
    assert result.returncode == 15, result.stderr
    run, _ = load_progress(workdir / PROGRESS)
    assert [(a.tool, a.why) for a in run.approvals] == [
        ("create_file", "approve: create_file"),
        ("create_file", "approve: create_file"),
    ]
    assert not (workdir / "a.txt").exists()
