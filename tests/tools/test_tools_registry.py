"""build_tools and call_tool: which tools the model gets, and how a call reaches one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.base.retrypolicy import RetryPolicy
from promptflow_resume.tools import (
    build_tools,
    call_tool,
    offered_tool_names,
    resolve_tool_names,
)
from promptflow_resume.tools.builtin import ReadFile, WriteFile
from promptflow_resume.tools.declared import CommandTool
from promptflow_resume.tools.edit import ReplaceString
from promptflow_resume.tools.tool import ToolContext
from promptflow_resume.workflow import load_workflow
from promptflow_resume.workflow.records import Budget, CommandDecl, Step, Workflow
from promptflow_resume.workflow.toolnames import BUILTIN_TOOLS


def workflow(tools: tuple[str, ...], commands: dict[str, CommandDecl] | None = None) -> Workflow:
    return Workflow(
        path=Path("w.prompt.md"),
        name="w",
        description=None,
        front_matter={},
        context="",
        steps=(),
        inputs={},
        commands=commands or {},
        tools=tools,
        provider=None,
        model=None,
        params={},
        budget=Budget(),
        retry=RetryPolicy(),
        hash="sha256:v1:0",
    )


TESTS = CommandDecl(name="run_tests", argv=("true",), idempotent=True)
DEPLOY = CommandDecl(name="deploy", argv=("true",))


def test_prompt_file_names_map_to_built_ins_and_commands_by_name(tmp_path: Path) -> None:
    wf = workflow(
        ("edit/editFiles", "run_tests", "githubRepo", "search"),
        {"run_tests": TESTS, "deploy": DEPLOY},
    )
    tools = build_tools(wf, tmp_path)
    offered = [
        "read_file",
        "create_file",
        "replace_string_in_file",
        "insert_text",
        "delete_file",
        "write_file",
        "run_tests",
        "codebase_search",
        "search_files",
        "list_files",
    ]
    # Every declared command is there (a command step may run it) ...
    assert list(tools) == [*offered, "deploy"]
    assert isinstance(tools["read_file"], ReadFile)
    assert isinstance(tools["write_file"], WriteFile)
    assert isinstance(tools["replace_string_in_file"], ReplaceString)
    assert isinstance(tools["run_tests"], CommandTool)
    assert isinstance(tools["deploy"], CommandTool)
    # ... but one that no `tools:` list names is not offered to the model.
    assert offered_tool_names(wf) == tuple(offered)


def test_a_step_with_its_own_list_is_offered_that_list(tmp_path: Path) -> None:
    wf = workflow(("read_file", "run_tests"), {"run_tests": TESTS, "deploy": DEPLOY})
    step = Step(
        id="s", title="S", index=1, kind="prompt", body="", hash="h", line=1, tools=("deploy",)
    )
    assert offered_tool_names(wf, step) == ("deploy",)
    no_list = Step(id="t", title="T", index=2, kind="prompt", body="", hash="h", line=2)
    assert offered_tool_names(wf, no_list) == ("read_file", "run_tests")
    none = Step(id="u", title="U", index=3, kind="prompt", body="", hash="h", line=3, tools=())
    assert offered_tool_names(wf, none) == ()


def test_names_restrict_to_a_steps_list(tmp_path: Path) -> None:
    wf = workflow(("read_file", "write_file", "run_tests"), {"run_tests": TESTS})
    assert list(build_tools(wf, tmp_path, names=["run_tests", "readFile"])) == [
        "run_tests",
        "read_file",
    ]
    assert build_tools(wf, tmp_path, names=[]) == {}


def test_only_declared_commands_become_command_tools(tmp_path: Path) -> None:
    # A name that is neither declared nor a built-in (say, copied from a shared progress
    # file) produces nothing to run.
    wf = workflow(("rm", "deploy", "sh"), {})
    assert build_tools(wf, tmp_path) == {}
    assert resolve_tool_names(["rm", "read_file", "read_file", "codebase"], {}) == [
        "read_file",
        "codebase_search",
        "search_files",
        "list_files",
    ]


def test_a_declared_command_wins_over_a_built_in_name(tmp_path: Path) -> None:
    mine = CommandDecl(name="read_file", argv=("cat", "{path}"), parameters={})
    tools = build_tools(workflow(("read_file",), {"read_file": mine}), tmp_path)
    assert isinstance(tools["read_file"], CommandTool)


def test_call_tool_runs_a_tool_from_json_arguments(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    tools = build_tools(workflow(("read_file",)), tmp_path)
    ctx = ToolContext(workspace=tmp_path)
    assert call_tool(tools, "read_file", '{"path": "a.txt"}', ctx).content == "hello\n"
    assert call_tool(tools, "read_file", {"path": "a.txt"}, ctx).content == "hello\n"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("write_file", "{}", "there is no tool named `write_file`; the tools here are: read_file"),
        ("read_file", "{not json", "the arguments are not valid JSON"),
        ("read_file", "[1, 2]", "the arguments must be a JSON object"),
        ("read_file", "", "'path' is a required property"),
    ],
)
def test_call_tool_mistakes_are_error_results(
    tmp_path: Path, name: str, arguments: str, expected: str
) -> None:
    tools = build_tools(workflow(("read_file",)), tmp_path)
    result = call_tool(tools, name, arguments, ToolContext(workspace=tmp_path))
    assert result.is_error
    assert expected in result.content


def test_a_loaded_workflow_gives_the_tools_it_declares(tmp_path: Path) -> None:
    (tmp_path / "w.prompt.md").write_text(
        "---\n"
        "description: greet someone\n"
        "tools: [greet, editFiles, notATool]\n"
        "commands:\n"
        "  greet:\n"
        f"    argv: [{json.dumps(sys.executable)}, '-c', 'import sys; print(sys.argv[1])', "
        "'{name}']\n"
        "    idempotent: true\n"
        "    parameters:\n"
        "      name: {type: string, description: Who to greet}\n"
        "  count:\n"
        "    argv: [echo, '3']\n"
        "---\n"
        "Shared context.\n\n"
        "## Step 1: Greet\n\n"
        "Greet ${input:who}.\n\n"
        "## Step 2: Count\n"
        "> run: count\n",
        encoding="utf-8",
    )
    wf = load_workflow(tmp_path / "w.prompt.md")
    tools = build_tools(wf, tmp_path)
    # The command step's command can run, and is not offered to the model.
    edit = ["read_file", "create_file", "replace_string_in_file", "insert_text", "delete_file"]
    assert list(tools) == ["greet", *edit, "write_file", "count"]
    assert offered_tool_names(wf) == ("greet", *edit, "write_file")
    assert tools["count"].idempotent is False
    greet = tools["greet"]
    assert greet.idempotent is True
    props: dict[str, Any] = greet.spec.parameters["properties"]
    assert props == {"name": {"type": "string", "description": "Who to greet"}}
    result = call_tool(tools, "greet", '{"name": "Ada; rm -rf /"}', ToolContext(tmp_path))
    assert result.content == "exit code: 0\n--- stdout ---\nAda; rm -rf /\n"


@pytest.mark.parametrize("name", BUILTIN_TOOLS)
def test_every_built_in_name_builds_the_tool_of_that_name(name: str, tmp_path: Path) -> None:
    tools = build_tools(workflow((name,)), tmp_path)
    assert list(tools) == [name]
    assert tools[name].spec.name == name
