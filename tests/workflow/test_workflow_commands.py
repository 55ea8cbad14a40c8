"""Command tools, tool names, budgets and the workflow schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from promptflow_resume.base.durations import parse_duration
from promptflow_resume.base.errors import InputError
from promptflow_resume.providers import REGISTRY
from promptflow_resume.workflow import (
    check_arguments,
    command_tool_spec,
    fill_argv,
    load_workflow,
    parse_workflow,
)
from promptflow_resume.workflow.header import KNOWN_KEYS, workflow_schema
from promptflow_resume.workflow.values import parse_size
from tests import support

ROOT = support.REPO
SCHEMA_FILE = ROOT / "schemas" / "workflow.schema.json"

GREP = """---
commands:
  grep:
    description: Search the repository
    argv: ["grep", "-rn", "--max-count={limit}", "--", "{pattern}", "{path}"]
    idempotent: true
    timeout: 1m30s
    cwd: ./src/../lib
    env: [HOME, LANG]
    max_output: 2KiB
    parameters:
      pattern: {type: string, description: Text to look for}
      path: {type: string, default: .}
      limit: {type: integer, default: 5}
      mode: {type: string, enum: [fast, slow], default: fast}
tools: [grep]
---
Find TODO comments.
"""


def grep_command():  # type: ignore[no-untyped-def]
    return parse_workflow(GREP, path="g.prompt.md").commands["grep"]


def test_command_declaration_becomes_a_record() -> None:
    wf = parse_workflow(GREP, path="g.prompt.md")
    cmd = wf.commands["grep"]
    assert cmd.timeout == 90.0 and cmd.max_output == 2048 and cmd.cwd == "lib"
    assert cmd.env == ("HOME", "LANG") and cmd.idempotent and not cmd.shell
    assert cmd.parameters == {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Text to look for"},
            "path": {"type": "string", "default": "."},
            "limit": {"type": "integer", "default": 5},
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    warnings = [d for d in wf.diagnostics if d.code == "command"]
    assert len(warnings) == 1 and "parameter `mode`" in warnings[0].message


def test_fill_argv_keeps_each_value_in_its_own_argument() -> None:
    argv = fill_argv(grep_command(), {"pattern": "TODO; rm -rf / $(id)", "limit": 2})
    assert argv == ["grep", "-rn", "--max-count=2", "--", "TODO; rm -rf / $(id)", "."]


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({}, "needs the argument `pattern`"),
        ({"pattern": "x", "colour": "red"}, "takes no argument `colour`"),
        ({"pattern": "x", "limit": "many"}, "`limit` must be an integer"),
        ({"pattern": "x", "mode": "medium"}, "must be one of: fast, slow"),
        ({"pattern": 5}, "must be a string"),
    ],
)
def test_bad_arguments_are_input_errors(arguments: dict[str, object], words: str) -> None:
    with pytest.raises(InputError, match=words):
        check_arguments(grep_command(), arguments)


def test_tool_spec_for_the_model() -> None:
    spec = command_tool_spec(grep_command())
    assert spec.name == "grep" and spec.description == "Search the repository"
    assert spec.parameters["required"] == ["pattern"]
    bare = parse_workflow("---\ncommands:\n  up:\n    argv: uptime -p\n---\nHi.\n", path="x")
    assert command_tool_spec(bare.commands["up"]).description == "Run the command: uptime -p"


def test_string_argv_is_split_without_a_shell_unless_asked() -> None:
    wf = parse_workflow(
        "---\ncommands:\n  a:\n    argv: git log -n '2 3'\n  b:\n    argv: echo $HOME | wc\n"
        "    shell: true\ntools: [a, b]\n---\nHi.\n",
        path="x",
    )
    assert wf.commands["a"].argv == ("git", "log", "-n", "2 3")
    assert wf.commands["b"].argv == ("sh", "-c", "echo $HOME | wc") and wf.commands["b"].shell


def test_shell_variables_and_find_braces_are_not_placeholders() -> None:
    wf = parse_workflow(
        "---\ncommands:\n  f:\n    argv: [find, ., -name, '{name}', -exec, ls, '{}', ';']\n"
        "    parameters:\n      name: {}\n  s:\n    argv: [sh, -c, 'echo ${HOME}']\n"
        "tools: [f, s]\n---\nHi.\n",
        path="x",
    )
    assert wf.diagnostics == ()
    assert fill_argv(wf.commands["f"], {"name": "*.py"})[3] == "*.py"
    assert fill_argv(wf.commands["s"], {}) == ["sh", "-c", "echo ${HOME}"]


def test_shell_script_with_positional_argument_is_the_safe_form() -> None:
    wf = parse_workflow(
        "---\ncommands:\n  g:\n    argv: [sh, -c, 'grep -- \"$1\" .', sh, '{pattern}']\n"
        "    parameters:\n      pattern: {}\ntools: [g]\n---\nHi.\n",
        path="x",
    )
    assert wf.errors == ()
    assert fill_argv(wf.commands["g"], {"pattern": "$(reboot)"})[-1] == "$(reboot)"


def test_unknown_placeholder_warns_when_the_command_has_parameters() -> None:
    wf = parse_workflow(
        "---\ncommands:\n  g:\n    argv: [grep, '{patern}']\n    parameters:\n      pattern: {}\n"
        "tools: [g]\n---\nHi.\n",
        path="x",
    )
    messages = [d.message for d in wf.diagnostics]
    assert any("`{patern}` is not a declared parameter" in m for m in messages)


def test_unused_command_warns() -> None:
    wf = parse_workflow(
        "---\ncommands:\n  a:\n    argv: [a]\n  b:\n    argv: [b]\ntools: [a]\n---\nHi.\n",
        path="x",
    )
    assert [(d.code, d.field) for d in wf.diagnostics] == [("unused-command", "$.commands.b")]


def test_without_a_tools_list_every_command_is_offered() -> None:
    wf = parse_workflow("---\ncommands:\n  a:\n    argv: [a]\n---\nHi.\n", path="x")
    assert wf.tools == ("a",) and wf.diagnostics == ()


def test_budget_and_durations() -> None:
    wf = parse_workflow(
        "---\nbudget:\n  max_tokens: 1000\n  max_cost_usd: 1\n  timeout: 1h30m\n---\nHi.\n",
        path="x",
    )
    assert (wf.budget.max_tokens, wf.budget.max_cost_usd, wf.budget.max_seconds) == (
        1000,
        1.0,
        5400.0,
    )
    assert parse_duration("250ms") == 0.25 and parse_duration(" 2d ") == 172800.0
    assert parse_duration(12) == 12.0 and parse_duration("1.5") == 1.5
    for bad in ("soon", "-5s", 0, True, "5 weeks"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert parse_size("1MB") == 1_000_000 and parse_size("1 MiB") == 1_048_576
    with pytest.raises(ValueError):
        parse_size("lots")


def test_params_merge() -> None:
    wf = parse_workflow(
        "---\ntemperature: 0.5\nmax_tokens: 300\nparams:\n  reasoning_effort: low\n---\nHi.\n",
        path="x",
    )
    assert wf.params == {"reasoning_effort": "low", "temperature": 0.5, "max_tokens": 300}


# --- the schema ---------------------------------------------------------------------------------


def test_schema_provider_names_are_the_registry() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert sorted(schema["properties"]["provider"]["enum"]) == sorted(REGISTRY)


def test_schema_is_valid_and_is_what_the_loader_uses() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert workflow_schema() == schema


def test_schema_knows_every_key_the_loader_knows() -> None:
    schema = workflow_schema()
    assert sorted(schema["properties"]) == sorted(KNOWN_KEYS)


@pytest.mark.parametrize("path", sorted((ROOT / "workflows").glob("*.prompt.md")), ids=str)
def test_examples_front_matter_validates_against_the_published_schema(path: Path) -> None:
    wf = load_workflow(path)
    jsonschema.Draft202012Validator(workflow_schema()).validate(wf.front_matter)
