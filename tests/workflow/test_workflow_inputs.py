"""Inputs, variables and rendering: what values a run gets and what text the model sees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_INPUT, FileNotFoundFlowError, InputError
from promptflow_resume.workflow import (
    InputDecl,
    context_prompt,
    editor_variables,
    load_inputs_file,
    load_workflow,
    parse_workflow,
    render_text,
    resolve_inputs,
    step_argv,
    step_command_args,
    step_prompt,
    step_tools,
    validate_editor,
)
from tests import support

ROOT = support.REPO
FIXTURES = ROOT / "tests" / "fixtures" / "workflows"


def typed_workflow():  # type: ignore[no-untyped-def]
    return load_workflow(FIXTURES / "inputs-typed.prompt.md")


def test_defaults_and_placeholders_fill_what_is_not_given() -> None:
    values = resolve_inputs(typed_workflow(), {})
    assert values == {
        "version": "1.2.3",  # the placeholder, since nothing else gives a value
        "rc": 1,
        "ratio": 0.5,
        "dry_run": True,
        "platforms": ["linux", "macos"],
        "channel": "blog",
        "notes": None,
    }


def test_given_strings_are_converted_to_the_declared_type() -> None:
    given = {
        "version": "2.0.0",
        "rc": "3",
        "ratio": "0.25",
        "dry_run": "no",
        "platforms": "linux, windows",
        "channel": "none",
        "notes": "ship it",
    }
    values = resolve_inputs(typed_workflow(), given)
    assert values == {
        "version": "2.0.0",
        "rc": 3,
        "ratio": 0.25,
        "dry_run": False,
        "platforms": ["linux", "windows"],
        "channel": "none",
        "notes": "ship it",
    }


def test_values_from_a_file_keep_their_types(tmp_path: Path) -> None:
    file = tmp_path / "inputs.yaml"
    file.write_text("rc: 2\nratio: 1\ndry_run: false\nplatforms: [bsd]\nversion: '1.0'\n")
    values = resolve_inputs(typed_workflow(), load_inputs_file(file))
    assert (values["rc"], values["ratio"], values["dry_run"]) == (2, 1, False)
    assert values["platforms"] == ["bsd"] and values["version"] == "1.0"


def test_all_bad_values_are_reported_in_one_error() -> None:
    given = {"rc": "three", "dry_run": "maybe", "channel": "tv", "ratio": "nan"}
    with pytest.raises(InputError) as info:
        resolve_inputs(typed_workflow(), given)
    message = info.value.message
    assert info.value.exit_code == EXIT_INPUT
    for words in (
        "`rc` must be an integer",
        "`dry_run` must be true or false",
        "`channel` must be one of: blog, mailing-list, none",
        "`ratio` must be a finite number",
    ):
        assert words in message


def test_a_number_in_a_file_for_a_string_input_must_be_quoted() -> None:
    with pytest.raises(InputError, match="quote it"):
        resolve_inputs(typed_workflow(), {"version": 1.5})


def test_missing_inputs_are_listed_together_with_how_to_pass_them() -> None:
    example = load_workflow(ROOT / "workflows" / "changelog-entry.prompt.md")
    with pytest.raises(
        InputError, match=r"missing input: `change` \(What changed, in one sentence\)"
    ):
        resolve_inputs(example, {})
    text = (
        "---\ninputs:\n  a: {description: First thing}\n  b: {type: integer}\n---\n"
        "${input:a} ${input:b} ${input:c:3}\n"
    )
    wf = parse_workflow(text, path="x.prompt.md")
    with pytest.raises(InputError) as info:
        resolve_inputs(wf, {})
    error = str(info.value)
    assert "missing inputs: `a` (First thing), `b` (integer)." in error
    assert "`c`" not in error  # its placeholder gives it a value
    assert "--input NAME=VALUE" in error and "--inputs FILE" in error


def test_unknown_given_input_is_refused_with_a_suggestion() -> None:
    with pytest.raises(InputError) as info:
        resolve_inputs(typed_workflow(), {"verison": "1"})
    assert "has no input `verison` (did you mean `version`?)" in info.value.message


def test_a_placeholder_that_does_not_fit_the_type_is_only_a_hint() -> None:
    wf = parse_workflow(
        "---\ninputs:\n  n: {type: integer}\n---\nMake ${input:n:how many} items.\n",
        path="x.prompt.md",
    )
    assert wf.inputs["n"].placeholder == "how many"
    with pytest.raises(InputError, match="missing input: `n`"):
        resolve_inputs(wf, {})


def test_terminal_is_asked_for_required_inputs_only() -> None:
    asked: list[InputDecl] = []
    answers = iter(["7", ""])

    def ask(decl: InputDecl) -> str:
        asked.append(decl)
        return next(answers)

    wf = parse_workflow(
        "---\ninputs:\n  opt: {required: false}\n  d: {default: x}\n  n: {type: integer}\n---\n"
        "${input:who:the team} ${input:n} ${input:opt} ${input:d}\n",
        path="x.prompt.md",
    )
    values = resolve_inputs(wf, {}, ask=ask)
    assert [d.name for d in asked] == ["n", "who"]  # declared inputs first, then used ones
    assert asked[1].placeholder == "the team"
    assert values == {"who": "the team", "n": 7, "opt": None, "d": "x"}


def test_terminal_is_asked_again_after_a_wrong_answer() -> None:
    shown: list[str | None] = []
    answers = iter(["seven", "", "7"])

    def ask(decl: InputDecl) -> str:
        shown.append(decl.description)
        return next(answers)

    wf = parse_workflow(
        "---\ninputs:\n  n: {type: integer, description: How many}\n---\n${input:n}\n",
        path="x.prompt.md",
    )
    assert resolve_inputs(wf, {}, ask=ask) == {"n": 7}
    assert shown[0] == "How many"
    assert shown[1] is not None and shown[1].startswith("must be an integer")
    assert shown[2] is not None and shown[2].startswith("a value is required")


def test_terminal_gives_up_after_three_wrong_answers() -> None:
    wf = parse_workflow("---\ninputs:\n  n: {type: integer}\n---\n${input:n}\n", path="x.md")
    with pytest.raises(InputError, match="after 3 tries"):
        resolve_inputs(wf, {}, ask=lambda decl: "nope")


# --- inputs files -------------------------------------------------------------------------


def test_inputs_file_yaml_and_json(tmp_path: Path) -> None:
    yaml_file = tmp_path / "in.yaml"
    yaml_file.write_text("audience: the team\ncount: 3\n")
    assert load_inputs_file(yaml_file) == {"audience": "the team", "count": 3}
    json_file = tmp_path / "in.json"
    json_file.write_text(json.dumps({"audience": "devs"}))
    assert load_inputs_file(json_file) == {"audience": "devs"}
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_inputs_file(empty) == {}


def test_inputs_file_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundFlowError):
        load_inputs_file(tmp_path / "missing.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(InputError, match="must map input names to values, not a list"):
        load_inputs_file(listed)
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": }')
    with pytest.raises(InputError) as info:
        load_inputs_file(broken)
    assert (info.value.line, info.value.column) == (1, 7)


# --- rendering ------------------------------------------------------------------------------


def test_render_substitutes_flow_variables_and_leaves_the_rest() -> None:
    text = (
        "Hi ${input:who:you}, see ${step:plan}. File ${fileBasename} in ${workspaceFolderBasename}."
        " Shell: ${HOME} ${1} ${env:PATH} $HOME {input:who}"
    )
    editor = editor_variables(Path("/work/project"), Path("src/app.py"))
    rendered = render_text(
        text, inputs={"who": "Ada"}, step_outputs={"plan": "the plan"}, editor=editor
    )
    assert rendered == (
        "Hi Ada, see the plan. File app.py in project."
        " Shell: ${HOME} ${1} ${env:PATH} $HOME {input:who}"
    )


def test_render_is_one_pass() -> None:
    rendered = render_text(
        "${input:a} ${step:s}",
        inputs={"a": "${input:b}"},
        step_outputs={"s": "${step:s}"},
        editor={},
    )
    assert rendered == "${input:b} ${step:s}"


def test_render_writes_typed_values_readably() -> None:
    rendered = render_text(
        "${input:l}|${input:b}|${input:n}|${input:f}",
        inputs={"l": ["a", "b"], "b": False, "n": None, "f": 0.5},
        step_outputs={},
        editor={},
    )
    assert rendered == "a, b|false||0.5"


def test_render_names_every_missing_value() -> None:
    with pytest.raises(InputError) as info:
        render_text(
            "${input:x} ${step:s} ${file} ${input:x}", inputs={}, step_outputs={}, editor={}
        )
    message = info.value.message
    assert message.count("${input:x}") == 1
    assert "--input x=VALUE" in message
    assert "the step `s` has no output yet" in message
    assert "${file} (pass --file PATH)" in message


def test_editor_variables_from_workspace_and_file(tmp_path: Path) -> None:
    values = editor_variables(tmp_path, Path("docs/guide.md"), selection="chosen")
    assert values["workspaceFolder"] == str(tmp_path)
    assert values["workspaceFolderBasename"] == tmp_path.name
    assert values["file"] == str(tmp_path / "docs" / "guide.md")
    assert values["fileBasename"] == "guide.md"
    assert values["fileBasenameNoExtension"] == "guide"
    assert values["fileExtname"] == ".md"
    assert values["fileDirname"] == str(tmp_path / "docs")
    assert values["relativeFile"] == "docs/guide.md"
    assert values["relativeFileDirname"] == "docs"
    assert values["selection"] == values["selectedText"] == "chosen"
    assert "file" not in editor_variables(tmp_path)


def test_validate_editor_reports_what_a_terminal_lacks(tmp_path: Path) -> None:
    wf = load_workflow(FIXTURES / "editor-variables.prompt.md")
    with pytest.raises(InputError) as info:
        validate_editor(wf, editor_variables(tmp_path))
    assert "${relativeFile} (pass --file PATH)" in info.value.message
    assert "${workspaceFolder}" not in info.value.message
    validate_editor(wf, editor_variables(tmp_path, Path("a.py")))  # complete: no error


def test_editor_fixture_keeps_shell_variables() -> None:
    wf = load_workflow(FIXTURES / "editor-variables.prompt.md")
    editor = editor_variables(Path("/repo"), Path("pkg/mod.py"))
    prompt = step_prompt(wf, wf.steps[0], inputs={}, step_outputs={}, editor=editor)
    assert "Document `pkg/mod.py` (mod, extension .py) in the\nworkspace /repo." in prompt
    assert 'cp "${HOME}/.config/tool.toml" "${TMPDIR:-/tmp}/"' in prompt
    assert "Write the documentation next to the file, in `/repo/pkg`." in prompt


def test_near_misses_of_flow_variables_warn() -> None:
    wf = parse_workflow("Use ${Input:x} and ${workspacefolder}.\n", path="x.md")
    messages = [d.message for d in wf.diagnostics]
    assert any("write `input:` in lower case" in m for m in messages)
    assert any("did you mean `${workspaceFolder}`?" in m for m in messages)


def test_variables_in_front_matter_warn() -> None:
    wf = parse_workflow("---\ndescription: Explain ${input:x}\n---\nHi ${input:x}.\n", path="x.md")
    (warning,) = wf.diagnostics
    assert (warning.line, warning.column) == (2, 22)
    assert "not substituted in the front matter" in warning.message


def test_declared_and_used_inputs_are_cross_checked() -> None:
    wf = parse_workflow(
        "---\ninputs:\n  topic: {}\n  unused: {}\n---\nWrite about ${input:topci}.\n", path="x.md"
    )
    codes = {d.code: d for d in wf.diagnostics}
    assert "did you mean `topic`" in codes["undeclared-input"].message
    assert codes["undeclared-input"].line == 6
    assert codes["unused-input"].field == "$.inputs.unused"


def test_conflicting_placeholders_warn_and_the_first_wins() -> None:
    wf = parse_workflow("${input:a:one} and ${input:a:two}\n", path="x.md")
    assert wf.inputs["a"].placeholder == "one"
    assert [d.line for d in wf.diagnostics] == [1]


# --- prompts and command steps ----------------------------------------------------------------


def test_context_and_step_prompts_of_the_mixed_fixture() -> None:
    wf = load_workflow(FIXTURES / "steps-mixed.prompt.md")
    editor = editor_variables(Path("/src/demo"))
    values = resolve_inputs(wf, {"module": "pkg/core.py"})
    assert context_prompt(wf, inputs=values, editor=editor) == (
        "You are a senior engineer working on demo.\n\nKeep changes small."
    )
    build = wf.step("build")
    assert build is not None
    prompt = step_prompt(
        wf, build, inputs=values, step_outputs={"analyze-the-module": "- bug 1"}, editor=editor
    )
    assert prompt.startswith("## Build\n\nFix the worst problem from this list:\n\n- bug 1\n")
    assert step_tools(wf, build) == ("read_file", "run_tests")
    report = wf.step("report")
    assert report is not None and step_tools(wf, report) == wf.tools


def test_command_step_arguments_and_argv() -> None:
    wf = load_workflow(FIXTURES / "steps-mixed.prompt.md")
    again = wf.step("test-again")
    assert again is not None
    kwargs = {"inputs": {"module": "pkg/my tests"}, "step_outputs": {}, "editor": {}}
    assert step_command_args(wf, again, **kwargs) == {"path": "pkg/my tests"}  # type: ignore[arg-type]
    argv = step_argv(wf, again, **kwargs)  # type: ignore[arg-type]
    assert argv == ["python", "-m", "pytest", "-q", "pkg/my tests"]
    lint = wf.step("check-lint")
    assert lint is not None
    assert step_argv(wf, lint, **kwargs) == ["ruff", "check", "."]  # type: ignore[arg-type]
    assert step_tools(wf, lint) == ()
