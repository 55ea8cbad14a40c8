"""Hooks written for VS Code (issue 43, item 6): an agent's own ``hooks:``, Claude Code's
``.claude/settings.json``, a ``preToolUse`` hook's ``updatedInput``/``modifiedArgs`` and
``additionalContext`` honoured and recorded, and ``flow hooks`` listing what a run would use,
where it comes from and whether the folder's trust lets it run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from promptflow_resume.progress import load_progress, parse, render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.hookledger import HookEvent, HookRun
from promptflow_resume.run.hookprocess import hook_output
from promptflow_resume.workflow import check_workflow, parse_workflow
from promptflow_resume.workflow.hookfiles import check_hooks
from tests.support.flowproc import flow
from tests.support.trust import trusted

#: A preToolUse hook, as VS Code's documentation shows one: reads VS Code's input, sends the
#: call to another file and adds a line of context.
REDIRECT = """\
import json, sys
payload = json.load(sys.stdin)
assert payload["hookEventName"] == "PreToolUse" and payload["tool_name"] == "read_file"
out = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
       "updatedInput": {"path": "b.txt"}, "additionalContext": "The file is read-only."}}
print(json.dumps(out))
"""
AGENT = """---
name: reader
description: Reads a file
tools: [read]
hooks:
  PreToolUse:
    - matcher: read_file
      hooks:
        - type: command
          command: {command}
          timeout: 10
---
You read files.
"""
SCRIPT = {
    "replies": [
        {"content": "", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        "Done.",
    ]
}


def _workspace(where: Path) -> Path:
    agents = where / ".github" / "agents"
    agents.mkdir(parents=True)
    hook = where / "redirect.py"
    hook.write_text(REDIRECT, encoding="utf-8")
    command = json.dumps(f"{sys.executable} {hook}")
    (agents / "reader.agent.md").write_text(AGENT.format(command=command), encoding="utf-8")
    (where / "a.txt").write_text("alpha\n", encoding="utf-8")
    (where / "b.txt").write_text("bravo\n", encoding="utf-8")
    (where / "s.yaml").write_text(json.dumps(SCRIPT), encoding="utf-8")
    return where


def _run(where: Path, progress: str) -> tuple[str, str]:
    done = flow(
        "run", "reader", "--task", "Read a.txt.", "--provider", "scripted", "--recording",
        "s.yaml", "--new", "--progress", progress, "--no-snapshots", cwd=where,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run, _ = load_progress(where / progress)
    (result,) = [e.content for e in run.transcript if e.role == "tool_result"]
    return result, done.stderr


def test_an_agents_hooks_change_the_call_once_its_folder_is_trusted(tmp_path: Path) -> None:
    where = _workspace(tmp_path / "w")
    result, stderr = _run(where, "untrusted/progress.md")
    # The agent's hooks are brought by the repository: not run until the folder is trusted.
    assert "alpha" in result and "hook" not in result
    assert "not used: .github/agents/reader.agent.md (not trusted)" in stderr
    trusted(where)
    result, _ = _run(where, "trusted/progress.md")
    ref = ".github/agents/reader.agent.md#PreToolUse[0].hooks[0]"
    assert "bravo" in result and "alpha" not in result
    assert f'[the preToolUse hook {ref} changed the arguments to {{"path": "b.txt"}}]' in result
    assert f"[context from the preToolUse hook {ref}: The file is read-only.]" in result
    # The call as the model sent it stays in the file; the result says what ran.
    run, _ = load_progress(where / "trusted" / "progress.md")
    (call,) = [e for e in run.transcript if e.role == "tool_call"]
    assert json.loads(call.content) == {"path": "a.txt"}
    assert run.hooks.open == [] and run.hooks.runs == 1


def test_flow_hooks_lists_each_file_its_origin_and_its_trust(tmp_path: Path) -> None:
    where = _workspace(tmp_path / "w")
    claude = where / ".claude"
    claude.mkdir()
    group = {"matcher": "edit", "hooks": [{"type": "command", "command": "fmt"}]}
    settings = {"permissions": {"allow": ["Bash(ls)"]}, "hooks": {"PostToolUse": [group]}}
    (claude / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    listed = flow("hooks", "reader", "--json", cwd=where)
    assert listed.returncode == 0, listed.stderr
    files = {f["path"]: f for f in json.loads(listed.stdout)["files"]}
    assert sorted(files) == [".claude/settings.json", ".github/agents/reader.agent.md"]
    agent = files[".github/agents/reader.agent.md"]
    assert (agent["origin"], agent["runs"], agent["trust"]) == ("agent", False, "not trusted")
    (hook,) = agent["hooks"]
    assert (hook["written"], hook["event"], hook["matcher"]) == (
        "PreToolUse",
        "preToolUse",
        "read_file",
    )
    # Claude Code's settings: only its hooks are read, and nothing else is complained about.
    claude_file = files[".claude/settings.json"]
    assert claude_file["origin"] == "claude-settings" and claude_file["diagnostics"] == []
    trusted(where)
    listed = flow("hooks", "reader", cwd=where)
    assert listed.stdout.splitlines()[0] == (
        ".claude/settings.json  (Claude Code's settings; runs)"
    )
    assert "  PreToolUse → preToolUse [read_file]: " in listed.stdout


def test_an_agents_hooks_are_checked_where_they_are_written(tmp_path: Path) -> None:
    text = (
        "---\nname: a\nhooks:\n  PreToolUse:\n    - type: command\n      timeout: -1\n"
        "      command: x\n  Stop:\n    - type: command\n      command: ./end.sh\n---\nBody.\n"
    )
    path = tmp_path / "a.agent.md"
    path.write_text(text, encoding="utf-8")
    wf, diagnostics = check_workflow(path)
    (error,) = [d for d in diagnostics if d.severity == "error"]
    assert (error.line, error.field) == (6, "$.hooks.PreToolUse[0].timeout")
    assert wf is not None and wf.agent is not None
    assert [h.event for h in wf.agent.hooks] == ["sessionEnd"]
    fine = parse_workflow(text.replace("timeout: -1", "timeout: 5"), path="a.agent.md")
    assert [h.ref for h in fine.agent_hooks] == ["a.agent.md#PreToolUse[0]", "a.agent.md#Stop[0]"]


def test_what_a_hook_says_is_read_in_each_hosts_form() -> None:
    vscode = {"hookSpecificOutput": {"updatedInput": {"a": 1}, "additionalContext": "c"}}
    assert (hook_output(json.dumps(vscode)).arguments, hook_output(json.dumps(vscode)).context) == (
        {"a": 1},
        "c",
    )
    copilot = hook_output('noise\n{"permissionDecision": "allow", "modifiedArgs": {"b": 2}}')
    assert (copilot.decision, copilot.arguments) == ("allow", {"b": 2})
    assert hook_output("not json").arguments is None


def test_a_changed_call_is_recorded_until_its_result_is(tmp_path: Path) -> None:
    run = example_run()
    done = HookRun("h.json#preToolUse[0]", 0, 3, args='{"path": "b.txt"}', context="ro")
    run.hooks.open.append(HookEvent("preToolUse", "call:c1", [done]))
    back, _ = parse(render(run))
    assert back.hooks.open[0].ran[0].args == '{"path": "b.txt"}'
    assert back.hooks.open[0].ran[0].context == "ro"


def test_a_claude_settings_file_is_a_hooks_file(tmp_path: Path) -> None:
    folder = tmp_path / ".claude"
    folder.mkdir()
    stop = [{"hooks": [{"type": "command", "command": "./s"}]}]
    (folder / "settings.json").write_text(
        json.dumps({"model": "opus", "hooks": {"Stop": stop}}), encoding="utf-8"
    )
    loaded = check_hooks(folder / "settings.json", tmp_path)
    assert [h.event for h in loaded.hooks] == ["sessionEnd"] and loaded.diagnostics == ()
