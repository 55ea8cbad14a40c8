"""Broken workflows: each file in fixtures/workflows/invalid/ and the error it must raise."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptflow_resume.base.errors import EXIT_INVALID_FILE, WorkflowError
from promptflow_resume.workflow import check_workflow, load_workflow, parse_workflow
from tests import support

INVALID = support.FIXTURES / "workflows" / "invalid"

# file -> (line, column, field, code, words the message must contain)
EXPECTED: dict[str, tuple[int, int, str | None, str, str]] = {
    "bad-default-type.prompt.md": (
        5, 14, "$.inputs.count.default", "input", "must be an integer"),
    "bad-duration.prompt.md": (
        3, 12, "$.budget.timeout", "schema", "a duration such as 30s, 10m or 1h30m"),
    "bad-max-turns.prompt.md": (2, 3, None, "directive", "max_turns must be a whole number"),
    "bad-provider.prompt.md": (
        3, 11, "$.provider", "schema", "must be one of: anthropic, echo, openai"),
    "bad-yaml.prompt.md": (4, 6, None, "yaml", "invalid YAML"),
    "budget-typo.prompt.md": (
        4, 3, "$.budget.max_cost", "schema", "did you mean `max_cost_usd`"),
    "builtin-name-clash.prompt.md": (
        3, 3, "$.commands.read_file", "command", "name of a built-in tool"),
    "command-step-needs-run.prompt.md": (2, 3, None, "directive", "needs `run: NAME`"),
    "command-without-argv.prompt.md": (3, 3, "$.commands.deploy", "schema", "`argv` is required"),
    "cwd-escape.prompt.md": (5, 10, "$.commands.ls_parent.cwd", "command", "leaves the workspace"),
    "directive-bad-key.prompt.md": (2, 18, None, "directive", "did you mean `tools`"),
    "duplicate-explicit-id.prompt.md": (4, 1, None, "duplicate-step-id", "two steps have the id"),
    "duplicate-key.prompt.md": (4, 1, "$.model", "duplicate-key", "appears twice"),
    "empty-body.prompt.md": (4, 1, None, "empty", "no prompt text"),
    "front-matter-list.prompt.md": (2, 1, "$", "yaml", "must be a mapping"),
    "human-with-tools.prompt.md": (2, 17, None, "directive", "no tools"),
    "input-choice-default.prompt.md": (
        5, 14, "$.inputs.tone.default", "input", "one of the choices: formal, casual"),
    "not-utf8.prompt.md": (2, 17, None, "io", "not UTF-8"),
    "param-conflict.prompt.md": (4, 3, "$.params.temperature", "params", "keep one"),
    "run-missing-arg.prompt.md": (9, 3, None, "command-args", "needs the argument `name`"),
    "run-unknown-command.prompt.md": (7, 3, None, "unknown-command", "did you mean `bump`"),
    "shell-placeholder.prompt.md": (
        4, 11, "$.commands.grep.argv", "command", "inside a shell script"),
    "step-ref-in-context.prompt.md": (1, 33, None, "step-ref", "shared context"),
    "step-ref-later.prompt.md": (2, 34, None, "step-ref", "refers to a later step"),
    "step-ref-unknown.prompt.md": (5, 11, None, "step-ref", "did you mean `plan`"),
    "step-unknown-tool.prompt.md": (2, 21, None, "unknown-tool", "`open_browser`"),
    "unclosed-front-matter.prompt.md": (1, 1, None, "front-matter", "no closing `---`"),
}  # fmt: skip


def test_every_invalid_fixture_has_an_expectation() -> None:
    assert sorted(p.name for p in INVALID.glob("*.prompt.md")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_invalid_fixture_reports_its_error(name: str) -> None:
    line, column, field, code, words = EXPECTED[name]
    path = INVALID / name
    before = path.read_bytes()
    _, diagnostics = check_workflow(path)
    errors = [d for d in diagnostics if d.severity == "error"]
    assert len(errors) == 1, [str(d) for d in diagnostics]
    (error,) = errors
    assert (error.line, error.column, error.field, error.code) == (line, column, field, code)
    assert words in error.message
    assert path.read_bytes() == before  # checking never touches the file


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_load_raises_workflow_error_with_the_position(name: str) -> None:
    line, column, field, _, words = EXPECTED[name]
    with pytest.raises(WorkflowError) as info:
        load_workflow(INVALID / name)
    error = info.value
    assert error.exit_code == EXIT_INVALID_FILE
    assert (error.line, error.column, error.field) == (line, column, field)
    assert words in error.message
    assert str(error).startswith(f"{INVALID / name}:{line}:{column}: ")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("---\na: &x [*x]\n---\nHi.\n", "refers to itself"),
        ("---\n1: one\n---\nHi.\n", "keys must be strings"),
        ("---\ncommands:\n  x:\n    argv: 'unclosed \"quote'\n---\nHi.\n", "cannot split argv"),
        ("---\ncommands:\n  x:\n    argv: [' ', a]\n---\nHi.\n", "program) is empty"),
        ("---\ncommands:\n  x:\n    argv: [a]\n    shell: true\n---\nHi.\n", "one string"),
        ("---\ncommands:\n  x:\n    argv: [a]\n    cwd: /etc\n---\nHi.\n", "not an absolute path"),
        ("---\nretry:\n  initial_delay: 2m\n  max_delay: 1m\n---\nHi.\n", "longer than max_delay"),
        ("---\nbudget:\n  timeout: 1m\n  max_seconds: 30\n---\nHi.\n", "not both"),
        (
            "---\ncommands:\n  g:\n    argv: [echo, '{n}']\n    parameters:\n"
            "      n: {type: integer, default: x}\n---\nHi.\n",
            "argument `n` must be an integer",
        ),
        ("## Step 1: A {#bad id!}\nA.\n", "not a valid step id"),
        ("## Step 1: A\n> kind: robot\n\nA.\n", "kind must be one of"),
        ("## Step 1: A\n> kind: human · run: x\n\nA.\n", "cannot `run:`"),
        ("## Step 1: A\n> run: x 'open\n\nA.\n", "cannot read the run line"),
        ("## Step 1: A\n> tools: read_file; tools: list_files\n\nA.\n", "given twice"),
        ("## Step 1: A\nUse ${step:a}.\n", "refers to itself"),
        (
            "---\ncommands:\n  g:\n    argv: [echo, '{n}']\n    parameters:\n      n: {}\n"
            "---\n## Step 1: A\n> run: g n=1 m=2\n",
            "takes no argument `m`",
        ),
        (
            "---\ncommands:\n  g:\n    argv: [echo, '{n}']\n    parameters:\n"
            "      n: {type: integer}\n---\n## Step 1: A\n> run: g n=lots\n",
            "must be an integer",
        ),
        ("## Step 1: A\n> run: g nameonly\n", "name=value"),
    ],
)
def test_more_errors(text: str, words: str) -> None:
    with pytest.raises(WorkflowError) as info:
        parse_workflow(text, path="w.prompt.md")
    assert words in info.value.message
    assert info.value.line is not None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("---\na: " + "[" * 200 + "]" * 200 + "\n---\nHi.\n", "more than 32 levels deep"),
        ("---\ntemperature: .nan\n---\nHi.\n", "must be a finite number"),
        ("---\ninputs:\n  n: {type: number, default: .inf}\n---\n${input:n}\n", "finite number"),
        ("---\ncommands:\n  a: null\n---\nHi.\n", "must be a mapping, not null."),
        ("---\n!!python/object/apply:os.system [echo hi]\n---\nHi.\n", "is not allowed"),
        ("---\na: !!python/object/apply:os.system [echo hi]\n---\nHi.\n", "is not allowed"),
        ("---\n!custom key: 1\n---\nHi.\n", "the YAML tag `!custom` is not allowed"),
        ("---\na: b\x07c\n---\nHi.\n", "the character U+0007"),
        ("Hi\x00there.\n", "NUL character"),
    ],
)
def test_hostile_or_odd_front_matter_is_an_error_not_a_crash(text: str, words: str) -> None:
    with pytest.raises(WorkflowError) as info:
        parse_workflow(text, path="w.prompt.md")
    assert words in info.value.message


def test_anchors_and_merge_keys_work() -> None:
    wf = parse_workflow(
        "---\nx-base: &b {max_turns: 3}\nbudget:\n  <<: *b\n  max_cost_usd: 1\n---\nHi.\n",
        path="w.prompt.md",
    )
    assert (wf.budget.max_turns, wf.budget.max_cost_usd) == (3, 1.0)


def test_empty_sections_are_allowed() -> None:
    wf = parse_workflow(
        "---\ninputs:\ncommands:\nbudget:\nretry:\nparams:\n---\nHi.\n", path="w.prompt.md"
    )
    assert wf.inputs == {} and wf.commands == {} and wf.params == {}
    assert wf.diagnostics == ()


SEEDS = sorted((INVALID.parent).rglob("*.prompt.md")) + sorted(
    (INVALID.parent.parent.parent.parent / "workflows").glob("*.prompt.md")
)
NOISE = st.sampled_from([*"-:#>`{}$[]\n\r\t '\"*&!|%@,.0123456789axyz", "\u00e9", "\x00", "\x07"])


@given(
    seed=st.sampled_from(SEEDS),
    edits=st.lists(
        st.tuples(st.sampled_from(["put", "insert", "delete", "cut"]), st.floats(0, 1), NOISE),
        min_size=1,
        max_size=6,
    ),
)
@settings(max_examples=150, deadline=None)
def test_mutated_workflows_load_or_fail_with_a_position(
    seed: Path, edits: list[tuple[str, float, str]]
) -> None:
    text = seed.read_bytes().decode("utf-8", "replace")
    for op, where, char in edits:
        at = int(where * len(text))
        if op == "put":
            text = text[:at] + char + text[at + 1 :]
        elif op == "insert":
            text = text[:at] + char * 2 + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + 7 :]
        else:
            text = text[:at]
    try:
        parse_workflow(text, path="m.prompt.md")
    except WorkflowError as error:
        assert error.path == "m.prompt.md"
        assert error.line is not None or error.field is not None
