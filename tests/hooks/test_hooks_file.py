"""Hooks files: the Copilot format loads, every problem is reported where it is, the schema
and the loader agree, and ``flow check`` reads a hooks file."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from promptflow_resume.base.errors import FileNotFoundFlowError, WorkflowError
from promptflow_resume.workflow.hookfiles import check_hooks, find_hook_files, load_hooks
from tests import support
from tests.support.flowproc import flow
from tests.support.hooks import HOOKS

SCHEMA = json.loads((support.REPO / "schemas" / "hooks.schema.json").read_text())
WORK_LOG = HOOKS / "awesome-copilot" / "work-log-tracker" / "hooks.json"


def _validate(data: object) -> None:
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    jsonschema.validate(data, SCHEMA, format_checker=checker)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hooks.json"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_public_hooks_file_loads_with_its_commands_in_order(tmp_path: Path) -> None:
    loaded = load_hooks(WORK_LOG, HOOKS)
    assert loaded.ok and loaded.diagnostics == ()
    assert [(h.event, h.index, h.cwd, h.timeout) for h in loaded.hooks] == [
        ("sessionStart", 0, ".", 5.0),
        ("sessionEnd", 0, ".", 5.0),
    ]
    assert loaded.hooks[0].bash == ".github/hooks/work-log-tracker/log-session-start.sh"
    assert loaded.hooks[0].ref == ("awesome-copilot/work-log-tracker/hooks.json#sessionStart[0]")
    assert loaded.digest.startswith("sha256:") and len(loaded.digest) == 23
    _validate(json.loads(WORK_LOG.read_text()))


def test_the_workspace_files_are_found_in_both_layouts(tmp_path: Path) -> None:
    folder = tmp_path / ".github" / "hooks"
    (folder / "b").mkdir(parents=True)
    (folder / "a.json").write_text("{}")
    (folder / "b" / "hooks.json").write_text("{}")
    (folder / "b" / "other.json").write_text("{}")
    assert find_hook_files(tmp_path) == [folder / "a.json", folder / "b" / "hooks.json"]
    assert find_hook_files(tmp_path / "nothing") == []


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ('{"version": 2, "hooks": {}}', "1:13:$.version", "`version` must be 1 (found 2)"),
        ('{"hooks": {}}', "1:1:$.version", "`version` must be 1 (found nothing)"),
        ('{"version": 1,\n "hooks": []}', "2:11:$.hooks", "`hooks` must be an object"),
        (
            '{"version": 1, "hooks": {\n  "preToolUse": [{"type": "command"}]}}',
            "2:18:$.hooks.preToolUse[0]",
            "a command hook needs `bash`",
        ),
        (
            '{"version": 1, "hooks": {\n  "preTooluse": []}}',
            "2:3:$.hooks.preTooluse",
            "unknown hook event `preTooluse` (did you mean `preToolUse`?)",
        ),
        (
            '{"version": 1, "hooks": {"sessionEnd": [\n'
            '  {"type": "command", "bash": "x", "timeoutSec": 0}]}}',
            "2:50:$.hooks.sessionEnd[0].timeoutSec",
            "`timeoutSec` must be more than 0",
        ),
        (
            '{"version": 1, "hooks": {"preToolUse": [\n'
            '  {"type": "command", "bash": "x", "matcher": "("}]}}',
            "2:47:$.hooks.preToolUse[0].matcher",
            "`matcher` is not a valid regex",
        ),
        (
            '{"version": 1, "hooks": {"sessionEnd": [\n'
            '  {"type": "command", "bash": "x", "env": {"A B": "1"}}]}}',
            "2:51:$.hooks.sessionEnd[0].env.A B",
            "each `env` entry is NAME",
        ),
        ('{"version": 1,\n  "hooks": {,}}', "2:13:", "not valid JSON"),
        (
            '{"version": 1, "hooks": {"sessionEnd": [{"type": "agent"}]}}',
            "1:50:$.hooks.sessionEnd[0].type",
            "`type` must be",
        ),
    ],
)
def test_each_problem_is_reported_at_its_place(
    tmp_path: Path, text: str, where: str, message: str
) -> None:
    path = _write(tmp_path, text)
    loaded = check_hooks(path, tmp_path)
    errors = [d for d in loaded.diagnostics if d.severity == "error"]
    assert errors, loaded.diagnostics
    shown = str(errors[0])
    assert shown.startswith(f"{path}:"), shown
    assert where.split(":$")[0] in shown and message in shown, shown
    if "$" in where:
        assert errors[0].field == "$" + where.split(":$")[1]
    with pytest.raises(WorkflowError) as raised:
        load_hooks(path, tmp_path)
    assert message in str(raised.value)
    # The schema refuses the same files (where the text is JSON at all).
    try:
        data = json.loads(text)
    except ValueError:
        return
    with pytest.raises(jsonschema.ValidationError):
        _validate(data)


def test_what_flow_does_not_run_is_a_warning_not_an_error(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        json.dumps(
            {
                "version": 1,
                "hooks": {
                    "agentStop": [{"type": "command", "bash": "x"}],
                    "PreToolUse": [{"type": "command", "bash": "x"}],
                    "sessionStart": [
                        {"type": "prompt", "prompt": "/plan"},
                        {"type": "command", "powershell": "./x.ps1"},
                        {"type": "command", "bash": "./ok.sh", "comment": "kept", "extra": 1},
                    ],
                },
            }
        ),
    )
    loaded = load_hooks(path, tmp_path)
    assert [h.bash for h in loaded.hooks] == ["./ok.sh"]
    assert loaded.hooks[0].index == 2
    messages = [d.message for d in loaded.diagnostics]
    assert all(d.severity == "warning" for d in loaded.diagnostics)
    assert any("flow runs no `agentStop` hooks" in m for m in messages)
    assert any("flow runs no `PreToolUse` hooks" in m for m in messages)
    assert any("does not run `prompt` hooks" in m for m in messages)
    assert any("only a `powershell` command" in m for m in messages)
    assert any("unknown key `extra`" in m for m in messages)
    _validate(json.loads(path.read_text()))


def test_a_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundFlowError):
        check_hooks(tmp_path / "none.json", tmp_path)


def test_flow_check_prints_a_hooks_files_plan_and_its_problems(tmp_path: Path) -> None:
    good = flow("check", str(WORK_LOG), cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert "sessionStart[0]" in good.stdout and "timeout 5s · cwd ." in good.stdout
    assert "ok: no problems found" in good.stdout
    bad = _write(tmp_path, '{"version": 1,\n "hooks": {"sesionStart": []}}')
    result = flow("check", str(bad), "--json", cwd=tmp_path)
    assert result.returncode == 4
    plan = json.loads(result.stdout)["workflows"][0]
    assert (plan["kind"], plan["ok"]) == ("hooks", False)
    assert plan["diagnostics"][0]["line"] == 2
    assert "did you mean `sessionStart`" in plan["diagnostics"][0]["message"]
    both = flow("check", str(WORK_LOG), str(bad), cwd=tmp_path)
    assert both.returncode == 4
    assert "work-log-tracker/hooks.json: ok (2 hooks)" in both.stdout
    assert "FAILED" in both.stdout and "tools over" not in both.stdout
    missing = flow("check", "none.json", cwd=tmp_path)
    assert missing.returncode == 5
