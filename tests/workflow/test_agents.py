"""Custom agent files loaded as workflows: VS Code ``*.agent.md``, ``.github/agents/*.md`` and
Claude's ``.claude/agents/*.md``; their keys, warnings, errors, and the real agents in
``tests/fixtures/agents*``."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptflow_resume.base.errors import FileNotFoundFlowError
from promptflow_resume.workflow import load_workflow
from promptflow_resume.workflow.agentfile import TASK_INPUT, is_agent_file
from promptflow_resume.workflow.agentfind import agent_path, find_agents
from promptflow_resume.workflow.loader import check_workflow, workflow_files
from tests import support

FIXTURES = support.REPO / "tests" / "fixtures"
COPILOT = FIXTURES / "agents"
CLAUDE = FIXTURES / "agents-claude" / ".claude" / "agents"

REVIEWER = """---
name: reviewer
description: Reviews a change
argument-hint: the change to review
tools: ['search/codebase', 'read', 'todo']
model: GPT-4.1
handoffs:
  - label: Fix it
    agent: fixer
    prompt: Fix what the review found.
    send: true
---
You review changes carefully.

## Rules
Never edit files.
"""


def write(where: Path, name: str, text: str) -> Path:
    path = where / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def diagnostics(path: Path) -> list[tuple[str, int | None, int | None, str, str]]:
    _, found = check_workflow(path)
    return [(d.severity, d.line, d.column, d.code or "", d.message) for d in found]


def test_a_vs_code_agent_is_instructions_and_one_task_step(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, "reviewer.agent.md", REVIEWER))
    assert wf.kind == "agent" and wf.name == "reviewer"
    # Headings in an agent's body are its instructions, never steps.
    assert "You review changes carefully." in wf.context and "## Rules" in wf.context
    assert [s.id for s in wf.steps] == ["task"]
    assert wf.steps[0].body == "${input:task}"
    task = wf.inputs[TASK_INPUT]
    assert task.required and task.description == "the change to review"
    assert wf.model == "gpt-4.1"
    assert "read_file" in wf.tools and "manage_todo_list" in wf.tools
    assert wf.agent is not None
    assert wf.agent.argument_hint == "the change to review"
    (handoff,) = wf.agent.handoffs
    assert (handoff.label, handoff.agent, handoff.send, handoff.line) == (
        "Fix it",
        "fixer",
        True,
        8,
    )
    assert wf.agent.handoff("fix IT") is handoff
    assert wf.agent.dialect == "copilot" and wf.agent.user_invocable


def test_a_markdown_file_in_github_agents_is_an_agent(tmp_path: Path) -> None:
    path = write(tmp_path, ".github/agents/planner.md", "---\ndescription: Plans\n---\nPlan.\n")
    assert is_agent_file(path)
    assert not is_agent_file(tmp_path / "docs" / "planner.md")
    wf = load_workflow(path)
    assert (wf.kind, wf.name, wf.description) == ("agent", "planner", "Plans")
    # Without `tools:` an agent gets every built-in, as the hosts give theirs.
    assert "run_in_terminal" in wf.tools and "read_file" in wf.tools
    # A folder named on the command line stands for its agents too.
    assert workflow_files(path.parent) == [path]


def test_a_claude_agent_reads_claude_tools_and_models(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        ".claude/agents/auditor.md",
        "---\nname: auditor\ndescription: Audits\ntools: Read, Grep, Bash\n"
        "disallowedTools: Bash\nmodel: inherit\ncolor: red\n---\nAudit the code.\n",
    )
    wf = load_workflow(path)
    assert wf.agent is not None and wf.agent.dialect == "claude"
    # Bash is offered by `tools`, then taken away by `disallowedTools`.
    assert set(wf.tools) == {"read_file", "search_files"}
    assert wf.model is None  # inherit: the run's model (--model, or the provider's default)
    assert diagnostics(path) == []


def test_claude_disallowed_tools_alone_remove_from_every_tool(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        ".claude/agents/reader.md",
        "---\ndescription: Reads\ndisallowedTools: Write, Edit, Bash\nmodel: haiku\n---\nRead.\n",
    )
    wf = load_workflow(path)
    assert "run_in_terminal" not in wf.tools and "replace_string_in_file" not in wf.tools
    assert "read_file" in wf.tools and "fetch_webpage" in wf.tools
    assert (wf.provider, wf.model) == ("anthropic", "claude-haiku-4-5")


def test_unknown_keys_warn_and_never_fail(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "x.agent.md",
        "---\ndescription: X\nfavourite-colour: blue\nhooks: {}\nmetadata: {a: 1}\n---\nDo X.\n",
    )
    found = diagnostics(path)
    assert found == [
        (
            "warning",
            3,
            1,
            "unknown-key",
            "unknown front-matter key `favourite-colour` is kept but not used by flow.",
        )
    ]
    assert load_workflow(path).front_matter["favourite-colour"] == "blue"


def test_infer_warns_as_deprecated_and_still_counts(tmp_path: Path) -> None:
    path = write(tmp_path, "x.agent.md", "---\ndescription: X\ninfer: false\n---\nDo X.\n")
    ((severity, line, column, code, message),) = diagnostics(path)
    assert (severity, line, column, code) == ("warning", 3, 1, "deprecated-key")
    assert "user-invocable" in message and "disable-model-invocation" in message
    agent = load_workflow(path).agent
    assert agent is not None and not agent.model_invocable and agent.user_invocable


def test_duplicate_handoff_labels_are_an_error_at_the_second(tmp_path: Path) -> None:
    text = (
        "---\ndescription: X\nhandoffs:\n  - label: Go\n    agent: a\n"
        "  - label: Go\n    agent: b\n---\nDo X.\n"
    )
    path = write(tmp_path, "x.agent.md", text)
    ((severity, line, column, code, message),) = diagnostics(path)
    assert (severity, line, column, code) == ("error", 6, 12, "handoff")
    assert "two handoffs are labelled `Go` (the first is handoff 1)" in message


@pytest.mark.parametrize(
    ("front", "line", "column", "words"),
    [
        ("user-invocable: maybe", 3, 17, "$.user-invocable must be a boolean"),
        ("handoffs:\n  - agent: b", 4, 5, "label"),
        ("argument-hint: [a, b]", 3, 16, "$.argument-hint"),
        ("mcp-servers: [one]", 3, 14, "$.mcp-servers"),
    ],
)
def test_schema_errors_are_positioned(
    tmp_path: Path, front: str, line: int, column: int, words: str
) -> None:
    path = write(tmp_path, "x.agent.md", f"---\ndescription: X\n{front}\n---\nDo X.\n")
    _, found = check_workflow(path)
    errors = [f"{d.field} {d.message}" for d in found if d.severity == "error"]
    assert errors, found
    first = next(d for d in found if d.severity == "error")
    assert (first.line, first.column) == (line, column)
    assert words in errors[0]


def test_an_agent_without_instructions_warns(tmp_path: Path) -> None:
    path = write(tmp_path, "x.agent.md", "---\ndescription: X\n---\n")
    assert [(d[0], d[3]) for d in diagnostics(path)] == [("warning", "empty")]


@pytest.mark.parametrize("path", sorted(COPILOT.glob("*.agent.md")) + sorted(CLAUDE.glob("*.md")))
def test_real_agents_load_without_errors(path: Path) -> None:
    wf, found = check_workflow(path)
    assert wf is not None and wf.kind == "agent"
    assert [d for d in found if d.severity == "error"] == []
    # Every warning is about a tool only the editor or an unconfigured MCP server has.
    assert {d.code for d in found} <= {"editor-only", "unknown-tool"}, found
    assert wf.context.strip()


def test_real_claude_agents_translate(tmp_path: Path) -> None:
    debugger = load_workflow(CLAUDE / "structured-debugger.md")
    assert set(debugger.tools) == {"read_file", "run_in_terminal", "list_files", "search_files"}
    assert (debugger.provider, debugger.model) == ("anthropic", "claude-sonnet-4-5")
    architect = load_workflow(CLAUDE / "architect-review.md")
    assert (architect.provider, architect.model) == ("anthropic", "claude-opus-4-5")


def test_find_agents_orders_folders_and_reports_shadows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    extra = write(tmp_path, "extra/reviewer.agent.md", REVIEWER)
    local = write(work, ".github/agents/reviewer.md", "---\ndescription: local\n---\nR.\n")
    write(work, ".claude/agents/auditor.md", "---\ndescription: A\ntools: Read\n---\nA.\n")
    write(home, ".copilot/agents/helper.agent.md", "---\ndescription: H\n---\nH.\n")
    write(home, ".copilot/agents/notes.md", "not an agent: no .agent.md suffix")
    found = find_agents(work, extra=(extra.parent,))
    assert [(a.name, a.source) for a in found] == [
        ("reviewer", "--agents"),
        ("auditor", "workspace"),
        ("helper", "user"),
    ]
    assert found[0].shadows == (local,)
    assert agent_path("REVIEWER", work, (extra.parent,)) == extra
    assert agent_path("reviewer", work) == local
    with pytest.raises(FileNotFoundFlowError) as raised:
        agent_path("nobody", work)
    assert "no agent is called `nobody`" in str(raised.value)
    assert "agents found: reviewer, auditor, helper" in str(raised.value)


# A prompt file's `agent: NAME`.

PROMPT = """---
agent: {agent}
{extra}---
Shared context of the prompt file.

## Step 1: Look
Look at the code.
"""


def prompt_file(where: Path, agent: str, extra: str = "") -> Path:
    return write(where, "p.prompt.md", PROMPT.format(agent=agent, extra=extra))


def test_agent_name_gives_instructions_tools_and_model(tmp_path: Path) -> None:
    write(tmp_path, ".github/agents/reviewer.agent.md", REVIEWER)
    wf = load_workflow(prompt_file(tmp_path, "reviewer"), workspace=tmp_path)
    assert wf.kind == "prompt"
    # The agent's body first, then the prompt file's own context.
    assert wf.context.startswith("You review changes carefully.")
    assert wf.context.endswith("Shared context of the prompt file.")
    assert wf.context.index("## Rules") < wf.context.index("Shared context")
    assert set(wf.tools) == {
        "codebase_search",
        "search_files",
        "list_files",
        "read_file",
        "manage_todo_list",
    }
    assert (wf.provider, wf.model) == ("openai", "gpt-4.1")
    assert TASK_INPUT not in wf.inputs


def test_the_prompt_files_tools_and_model_win(tmp_path: Path) -> None:
    write(tmp_path, ".github/agents/reviewer.agent.md", REVIEWER)
    path = prompt_file(tmp_path, "Reviewer", "tools: [fetch]\nmodel: Claude Sonnet 4.5\n")
    wf = load_workflow(path, workspace=tmp_path)
    assert wf.tools == ("fetch_webpage",)
    assert (wf.provider, wf.model) == ("anthropic", "claude-sonnet-4-5")
    assert wf.context.startswith("You review changes carefully.")


def test_agents_are_found_in_agent_dirs_first(tmp_path: Path) -> None:
    write(tmp_path, ".github/agents/reviewer.agent.md", REVIEWER)
    extra = write(tmp_path, "mine/reviewer.agent.md", "---\ndescription: M\n---\nMine.\n")
    path = prompt_file(tmp_path, "reviewer")
    wf = load_workflow(path, workspace=tmp_path, agent_dirs=(extra.parent,))
    assert wf.context.startswith("Mine.")


def test_a_changed_agent_changes_the_steps(tmp_path: Path) -> None:
    agent = write(tmp_path, ".github/agents/reviewer.agent.md", REVIEWER)
    path = prompt_file(tmp_path, "reviewer")
    before = load_workflow(path, workspace=tmp_path)
    agent.write_text(REVIEWER.replace("carefully", "quickly"), encoding="utf-8")
    body_changed = load_workflow(path, workspace=tmp_path)
    agent.write_text(REVIEWER.replace("'todo'", "'edit'"), encoding="utf-8")
    tools_changed = load_workflow(path, workspace=tmp_path)
    hashes = {before.hash, body_changed.hash, tools_changed.hash}
    assert len(hashes) == 3
    step_hashes = {wf.steps[0].hash for wf in (before, body_changed, tools_changed)}
    assert len(step_hashes) == 3


def test_an_unknown_agent_is_an_error_at_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write(tmp_path, ".github/agents/reviewer.agent.md", REVIEWER)
    path = prompt_file(tmp_path, "nobody")
    _, found = check_workflow(path, workspace=tmp_path)
    (error,) = [d for d in found if d.severity == "error"]
    assert (error.line, error.column, error.field, error.code) == (2, 8, "$.agent", "agent")
    assert error.message.startswith("no custom agent is called `nobody` (the built-in ones are")
    assert "(agents found: reviewer)" in error.message


def test_an_agent_with_errors_is_an_error_at_the_key(tmp_path: Path) -> None:
    write(
        tmp_path,
        ".github/agents/broken.agent.md",
        "---\nhandoffs:\n  - label: A\n    agent: x\n  - label: A\n    agent: y\n---\nB.\n",
    )
    _, found = check_workflow(prompt_file(tmp_path, "broken"), workspace=tmp_path)
    (error,) = [d for d in found if d.severity == "error"]
    assert (error.line, error.field) == (2, "$.agent")
    assert "the agent `broken` (" in error.message and "cannot be loaded" in error.message


@pytest.mark.parametrize("builtin", ["ask", "Agent", "edit"])
def test_builtin_agent_names_are_not_looked_up(tmp_path: Path, builtin: str) -> None:
    wf, found = check_workflow(prompt_file(tmp_path, builtin), workspace=tmp_path)
    assert wf is not None and [d for d in found if d.severity == "error"] == []
    assert wf.context == "Shared context of the prompt file."


def test_agent_plan_offers_only_tools_that_read(tmp_path: Path) -> None:
    extra = (
        "tools: [edit, read, search, changes, fetch, todos, think, runCommands, note, wipe]\n"
        "commands:\n"
        "  note: {description: Note, argv: [echo, n], idempotent: true}\n"
        "  wipe: {description: Wipe, argv: [echo, w]}\n"
    )
    path = prompt_file(tmp_path, "plan", extra)
    wf, found = check_workflow(path, workspace=tmp_path)
    assert wf is not None
    assert set(wf.tools) == {
        "read_file",
        "codebase_search",
        "search_files",
        "list_files",
        "get_changed_files",
        "fetch_webpage",
        "manage_todo_list",
        "think",
        "note",
    }
    ((severity, line, code, message),) = [(d.severity, d.line, d.code, d.message) for d in found]
    assert (severity, line, code) == ("warning", 3, "plan-tools")
    assert "`edit`, `runCommands`, `wipe` are not offered" in message


def test_agent_ask_keeps_its_rule(tmp_path: Path) -> None:
    path = prompt_file(tmp_path, "ask", "tools: [edit, fetch, runCommands]\n")
    wf = load_workflow(path, workspace=tmp_path)
    assert set(wf.tools) == {"read_file", "fetch_webpage"}


def test_a_folder_given_twice_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = write(tmp_path, ".github/agents/reviewer.agent.md", REVIEWER)
    (found,) = find_agents(tmp_path, extra=(tmp_path / ".github" / "agents",))
    assert (found.name, found.source, found.shadows) == ("reviewer", "--agents", ())
    assert found.path == path
