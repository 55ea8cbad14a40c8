"""Loading workflow files: the step rule, ids, directives, context, positions, examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptflow_resume.base.errors import FileNotFoundFlowError, WorkflowError
from promptflow_resume.workflow import (
    check_workflow,
    editor_variables,
    load_workflow,
    parse_workflow,
    step_prompt,
)
from tests import support

ROOT = support.REPO
FIXTURES = ROOT / "tests" / "fixtures" / "workflows"
EXAMPLES = sorted((ROOT / "workflows").glob("*.prompt.md"))
GOLDEN = sorted(FIXTURES.glob("*.prompt.md"))


def parse(text: str):  # type: ignore[no-untyped-def]
    return parse_workflow(text, path="t.prompt.md")


def warnings_of(text: str) -> list[str]:
    wf = parse(text)
    return [d.code for d in wf.diagnostics if d.severity == "warning"]


# --- the step rule -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "title", "step_id"),
    [
        ("## Step 1: Analyze", "Analyze", "analyze"),
        ("## Step 1: Inspect the repo", "Inspect the repo", "inspect-the-repo"),
        ("### Step 2 — Build", "Build", "build"),
        ("### Step 2 – Build", "Build", "build"),
        ("## Step 3 - Test it", "Test it", "test-it"),
        ("## Step 4. Deploy", "Deploy", "deploy"),
        ("## Step 5) Verify", "Verify", "verify"),
        ("## Step 6 Ship", "Ship", "ship"),
        ("## Step 7", "Step 7", "step-7"),
        ("## Step 8:", "Step 8", "step-8"),
        ("## Step: Report", "Report", "report"),
        ("## STEP 1: Shout", "Shout", "shout"),
        ("# step 1: lower", "lower", "lower"),
        ("###### Step 1: Deep", "Deep", "deep"),
        ("## **Step 1:** Bold *prefix*", "Bold prefix", "bold-prefix"),
        ("## Step 1: Résumé the café", "Résumé the café", "resume-the-cafe"),
        ("## Step 1: Ship it {#release}", "Ship it", "release"),
        ("## Step 1: `flow` and C++!", "flow and C++!", "flow-and-c"),
    ],
)
def test_step_headings(heading: str, title: str, step_id: str) -> None:
    wf = parse(f"Context.\n\n{heading}\nDo the thing.\n")
    assert [(s.title, s.id) for s in wf.steps] == [(title, step_id)]
    assert wf.context == "Context."
    assert wf.steps[0].body == "Do the thing."


def test_setext_headings_are_steps_too() -> None:
    wf = parse("Step 1: First\n=============\nOne.\n\nStep 2: Second\n--------------\nTwo.\n")
    assert [s.id for s in wf.steps] == ["first", "second"]


@pytest.mark.parametrize(
    "heading",
    [
        "## Steps",
        "## Steps to reproduce",
        "## Step-by-step guide",
        "## Stepping stones",
        "## Role",
        "## Objectives",
        "## Output format",
        "## 1. Analyze",
        "## Next step: deploy",
        "## Step",
        "## Step:",
    ],
)
def test_section_headings_are_not_steps(heading: str) -> None:
    wf = parse(f"Intro.\n\n{heading}\nText.\n")
    assert [s.id for s in wf.steps] == ["main"]
    assert wf.steps[0].heading is None
    assert wf.context == ""
    assert heading in wf.steps[0].body


def test_headings_inside_fences_lists_and_quotes_are_not_steps() -> None:
    text = (
        "````markdown\n## Step 1: In a fence\n```\ninner\n```\n````\n\n"
        "- ## Step 2: In a list\n\n> ## Step 3: In a quote\n\n"
        "    ## Step 4: Indented code\n"
    )
    wf = parse(text)
    assert [s.id for s in wf.steps] == ["main"]


def test_numbered_list_under_steps_section_is_one_task() -> None:
    wf = load_workflow(FIXTURES / "sections-not-steps.prompt.md")
    assert len(wf.steps) == 1
    step = wf.steps[0]
    assert step.id == "main" and step.kind == "prompt"
    assert "## Steps\n1. Read the project's manifest" in step.body
    assert wf.diagnostics == ()


def test_file_without_steps_sends_its_body_as_the_task() -> None:
    wf = parse("---\ndescription: d\n---\n\nExplain ${input:x:this}.\n\n\n\nThanks.   \n")
    (step,) = wf.steps
    assert step.id == "main" and step.line == 4
    prompt = step_prompt(wf, step, inputs={"x": "it"}, step_outputs={}, editor={})
    assert prompt == "Explain it.\n\nThanks."


def test_step_prompt_is_title_and_text() -> None:
    wf = parse("Be brief.\n\n## Step 1: Plan\nPlan it.\n\n## Step 2: Do\nDo ${step:plan}.\n")
    editor = editor_variables(Path("."))
    second = step_prompt(wf, wf.steps[1], inputs={}, step_outputs={"plan": "P"}, editor=editor)
    assert second == "## Do\n\nDo P."


def test_a_section_after_the_last_step_is_shared_by_every_step() -> None:
    text = (
        "Intro.\n\n## Step 1: A\nDo A.\n\n## Step 2: B\nDo B.\n\n### Detail of B\nb\n\n"
        "## Output format\nJSON.\n\n### Detail\nx\n"
    )
    wf = parse(text)
    assert wf.steps[1].body == "Do B.\n\n### Detail of B\nb"
    assert wf.context == "Intro.\n\n## Output format\nJSON.\n\n### Detail\nx"
    assert not [d for d in wf.diagnostics if d.code == "section-in-step"]


def test_a_section_between_steps_still_belongs_to_its_step_with_a_warning() -> None:
    wf = parse("## Step 1: A\nDo A.\n\n## Notes\nN.\n\n## Step 2: B\nDo B.\n")
    assert wf.steps[0].body == "Do A.\n\n## Notes\nN."
    warned = [d for d in wf.diagnostics if d.code == "section-in-step"]
    assert len(warned) == 1 and warned[0].line == 4


def test_headings_inside_tag_blocks_are_never_steps() -> None:
    text = (
        "Write the plan with this template:\n\n<plan_template>\n# Plan: {Title}\n\n"
        "## Step 1: {Action}\n\nDo it.\n\n## STOP & COMMIT\n</plan_template>\n\n"
        "<details>\n\n## Step 2: Hidden\n\n</details>\n"
    )
    wf = parse(text)
    assert [s.id for s in wf.steps] == ["main"]
    assert "## Step 1: {Action}" in wf.steps[0].body
    assert not wf.diagnostics
    # Steps written inside a <workflow> block are the agent's own plan for one prompt.
    agent = parse(
        "Follow the <workflow>.\n\n<workflow>\n\n## Step 1: Read\n\nR.\n\n"
        "## Step 2: Write\n\nW.\n\n</workflow>\n"
    )
    assert [s.id for s in agent.steps] == ["main"]


def test_steps_false_keeps_the_file_one_prompt() -> None:
    wf = parse("---\nsteps: false\n---\nIntro.\n\n## Step 1: A\nDo A.\n\n## Step 2: B\nB.\n")
    assert [s.id for s in wf.steps] == ["main"]
    assert wf.context == "" and "## Step 2: B" in wf.steps[0].body


def test_deeper_sub_sections_are_part_of_the_step_silently() -> None:
    wf = parse("## Step 1: A\nDo A.\n\n### Details\nMore.\n")
    assert "### Details\nMore." in wf.steps[0].body
    assert wf.diagnostics == ()


# --- ids -----------------------------------------------------------------------------------


def test_duplicate_derived_ids_get_a_suffix_and_a_warning() -> None:
    wf = parse("## Step 1: Check\nA.\n\n## Step 2: Check\nB.\n\n## Step 3: Check\nC.\n")
    assert [s.id for s in wf.steps] == ["check", "check-2", "check-3"]
    assert [d.code for d in wf.diagnostics] == ["duplicate-step-id", "duplicate-step-id"]


def test_explicit_id_wins_over_a_derived_one() -> None:
    wf = parse("## Step 1: Build\nA.\n\n## Step 2: Compile {#build}\nB.\n")
    assert [s.id for s in wf.steps] == ["build-2", "build"]


def test_title_without_ascii_letters_gets_a_numbered_id() -> None:
    wf = parse("## Step 1: 分析\nA.\n\n## Step 2: ***\nB.\n")
    assert [s.id for s in wf.steps] == ["step-1", "step-2"]


def test_step_numbers_going_backwards_warn() -> None:
    assert warnings_of("## Step 2: A\nA.\n\n## Step 1: B\nB.\n") == ["step-number"]


# --- directives ----------------------------------------------------------------------------


def test_directive_sets_tools_and_turns_and_is_not_sent() -> None:
    text = (
        "---\ncommands:\n  bump:\n    argv: [echo, hi]\ntools: [bump]\n---\n"
        "## Step 1: A\n> tools: bump, edit/editFiles · max_turns: 5\n\nDo A.\n\n"
        "## Step 2: B\n> tools: none\n> max_turns: 2\nDo B.\n\n"
        "## Step 3: C\nDo C.\n"
    )
    wf = parse(text)
    a, b, c = wf.steps
    edit = ("read_file", "create_file", "replace_string_in_file", "insert_text", "delete_file")
    assert a.tools == ("bump", *edit, "write_file") and a.max_turns == 5
    assert a.body == "Do A."
    assert b.tools == () and b.max_turns == 2 and b.body == "Do B."
    assert c.tools is None and c.max_turns is None


def test_a_quote_that_is_not_a_directive_stays_prompt_text() -> None:
    wf = parse("## Step 1: A\n> Note: be careful with tools: they bite.\n\nDo A.\n")
    assert wf.steps[0].body.startswith("> Note: be careful")
    assert wf.steps[0].tools is None


def test_command_step_with_arguments() -> None:
    text = (
        "---\ncommands:\n  greet:\n    argv: [echo, 'hello {name}', '{times}']\n"
        "    parameters:\n      name: {type: string}\n      times: {type: integer, default: 1}\n"
        '---\n## Step 1: Greet\n> run: greet name="Ada Lovelace" times=2\n\nSays hello.\n'
    )
    (step,) = parse(text).steps
    assert step.kind == "command"
    assert step.command == "greet"
    assert step.command_args == {"name": "Ada Lovelace", "times": "2"}
    assert step.tools is None


def test_human_step() -> None:
    wf = parse("## Step 1: Draft\nDraft.\n\n## Step 2: Approve\n> kind: human\n\nOK?\n")
    human = wf.steps[1]
    assert human.kind == "human" and human.body == "OK?"
    assert step_prompt(wf, human, inputs={}, step_outputs={}, editor={}) == "OK?"


# --- positions and normalisation -------------------------------------------------------------


def test_crlf_bom_file_loads_like_its_lf_twin() -> None:
    path = FIXTURES / "crlf-bom.prompt.md"
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw  # the fixture really is CRLF+BOM
    wf = load_workflow(path)
    twin = parse_workflow(raw.decode("utf-8-sig").replace("\r\n", "\n"), path=path)
    assert wf.hash == twin.hash
    assert [s.hash for s in wf.steps] == [s.hash for s in twin.steps]
    assert wf.front_matter == {"description": "Windows-edited prompt", "mode": "edit"}
    assert [(s.id, s.line) for s in wf.steps] == [("outline", 7), ("draft", 10)]
    (topic,) = [v for v in wf.variables if v.kind == "input"]
    assert (topic.line, topic.column, topic.placeholder) == (8, 26, "line endings")


def test_tabs_and_setext_fixture() -> None:
    wf = load_workflow(FIXTURES / "tabs-setext.prompt.md")
    assert [s.id for s in wf.steps] == ["collect", "summarize"]
    assert "\tIndented code with ${input:source}" in wf.steps[0].body
    assert "\t- a nested item with a tab" in wf.steps[0].body


def test_mixed_steps_fixture() -> None:
    wf = load_workflow(FIXTURES / "steps-mixed.prompt.md")
    assert [(s.id, s.kind) for s in wf.steps] == [
        ("analyze-the-module", "prompt"),
        ("build", "prompt"),
        ("check-lint", "command"),
        ("test-again", "command"),
        ("approve", "human"),
        ("report", "prompt"),
    ]
    assert "## Step 9: Not a step" in wf.steps[0].body  # inside a nested fence
    assert wf.commands["lint"].argv == ("ruff", "check", ".")
    assert wf.commands["run_tests"].timeout == 300.0
    assert wf.retry.initial_delay == 0.5 and wf.retry.max_attempts == 3
    assert wf.params == {"temperature": 0.1}
    assert wf.diagnostics == ()


def test_copilot_agent_file_maps_tool_names() -> None:
    wf = load_workflow(FIXTURES / "copilot-agent.prompt.md")
    edit = ("read_file", "create_file", "replace_string_in_file", "insert_text", "delete_file")
    search = ("codebase_search", "search_files", "list_files")
    assert wf.tools == (*edit, "write_file", *search, "fetch_webpage")
    assert wf.tool_map["githubRepo"] == () and wf.tool_map["fetch"] == ("fetch_webpage",)
    assert not [d for d in wf.diagnostics if d.code == "unknown-tool"]
    # One line for every editor-only tool, at the first of them.
    editor = [
        (d.line, d.column, d.field, d.message) for d in wf.diagnostics if d.code == "editor-only"
    ]
    assert editor == [
        (6, 46, "$.tools", "editor-only tools not offered outside VS Code: `githubRepo`.")
    ]
    assert wf.front_matter["mode"] == "agent"


def test_unknown_keys_are_kept_and_reported() -> None:
    wf = load_workflow(FIXTURES / "unknown-keys.prompt.md")
    assert wf.front_matter["applyTo"] == "**/*.py"
    found = {d.field: d for d in wf.diagnostics}
    assert set(found) == {"$.applyTo", "$.temprature", "$.x-team"}
    assert "did you mean `temperature`" in found["$.temprature"].message
    assert found["$.temprature"].line == 4


def test_empty_front_matter_is_fine() -> None:
    wf = load_workflow(FIXTURES / "empty-front-matter.prompt.md")
    assert wf.front_matter == {} and wf.steps[0].line == 3


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_every_golden_fixture_loads(path: Path) -> None:
    wf = load_workflow(path)
    assert wf.steps and wf.errors == ()
    assert wf.hash.startswith("sha256:v1:") and len(wf.hash) == len("sha256:v1:") + 64


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_load_without_any_warning(path: Path) -> None:
    wf, diagnostics = check_workflow(path)
    assert wf is not None
    assert diagnostics == [], [str(d) for d in diagnostics]


def test_the_examples_are_there() -> None:
    names = {p.name for p in EXAMPLES}
    assert {
        "release-notes.prompt.md",
        "release-counter.prompt.md",
        "explain-file.prompt.md",
        "changelog-entry.prompt.md",
    } <= names


def test_release_notes_example_plan() -> None:
    wf = load_workflow(ROOT / "workflows" / "release-notes.prompt.md")
    assert [(s.id, s.kind) for s in wf.steps] == [
        ("changes", "prompt"),
        ("tests", "command"),
        ("notes", "prompt"),
    ]
    assert wf.steps[0].tools == ("git_log", "git_status") and wf.steps[0].max_turns == 6
    assert wf.steps[2].tools == ()
    assert all(c.idempotent for c in wf.commands.values())
    assert wf.budget.max_seconds == 600


def test_release_counter_is_the_contract_example() -> None:
    wf = load_workflow(ROOT / "workflows" / "release-counter.prompt.md")
    bump = wf.commands["bump"]
    assert bump.idempotent is False and bump.timeout == 30 and bump.env == ("HOME",)
    assert wf.tools == ("bump",) and wf.provider == "openai" and wf.model == "gpt-4o-mini"
    assert (wf.budget.max_turns, wf.budget.max_cost_usd) == (40, 0.5)
    assert [s.id for s in wf.steps] == ["inspect", "report"]
    assert wf.context == "You are a careful release assistant."


# --- file-level failures ---------------------------------------------------------------------


def test_missing_file_is_not_found() -> None:
    with pytest.raises(FileNotFoundFlowError) as info:
        load_workflow(FIXTURES / "nope.prompt.md")
    assert info.value.exit_code == 5
    with pytest.raises(FileNotFoundFlowError):
        check_workflow(FIXTURES / "nope.prompt.md")


def test_a_folder_and_a_huge_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkflowError, match="is a folder"):
        load_workflow(tmp_path)
    big = tmp_path / "big.prompt.md"
    big.write_text("x" * (1024 * 1024 + 1))
    wf, diagnostics = check_workflow(big)
    assert wf is None and "limited to 1,048,576 bytes" in diagnostics[0].message


def test_load_error_names_position_and_counts_the_rest() -> None:
    text = "## Step 1: A\nUse ${step:b} and ${step:c}.\n\n## Step 2: B\nB.\n"
    with pytest.raises(WorkflowError) as info:
        parse(text)
    error = info.value
    assert (error.path, error.line, error.column) == ("t.prompt.md", 2, 5)
    assert "1 more problem" in str(error) and "flow check t.prompt.md" in str(error)
    assert str(error).startswith("t.prompt.md:2:5: ")


def test_plain_copilot_prompt_with_a_selection() -> None:
    wf = load_workflow(FIXTURES / "copilot-plain.prompt.md")
    assert wf.front_matter == {} and [s.id for s in wf.steps] == ["main"]
    (warning,) = wf.diagnostics
    assert (warning.code, warning.line, warning.column) == ("editor-variable", 3, 1)
    assert "--selection TEXT or --selection @FILE" in warning.message
