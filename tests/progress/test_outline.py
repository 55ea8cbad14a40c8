"""The progress file's outline stays the run's, and a run says what it leaves out in one line
(issue 43, item 7): an agent's body with ``# Workflow`` headings, a VS Code agent's dozen
extension tools, a folder of skills several of which cannot be used."""

from __future__ import annotations

from pathlib import Path

from markdown_it import MarkdownIt

from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import Entry
from promptflow_resume.progress.render import entry_block
from promptflow_resume.run.attempt import skipped_skills_line
from promptflow_resume.workflow import parse_workflow
from promptflow_resume.workflow.records import Diagnostic
from tests.support.flowproc import flow

#: The shape of the public Beast Mode agent's body (github/awesome-copilot, MIT).
AGENT = """---
name: beast
description: Keeps going until the problem is solved
tools: ['read', 'ms-python.python/getPythonEnvironmentInfo',
  'ms-python.python/installPythonPackage', 'vscjava.vscode-java-debug/debugJavaApplication',
  'extensions']
---
You are an agent: keep going until the query is resolved.

# Workflow
1. Fetch any URL given.

## 1. Fetch Provided URLs
- Use the fetch tool.

# Communication Guidelines
Be concise.
"""


def outline(text: str) -> list[tuple[int, str]]:
    """The headings a Markdown renderer sees in ``text`` (level, text)."""
    tokens = MarkdownIt("commonmark").parse(text)
    return [
        (int(t.tag[1]), tokens[i + 1].content)
        for i, t in enumerate(tokens)
        if t.type == "heading_open"
    ]


def test_an_agents_headings_do_not_join_the_runs_outline(tmp_path: Path) -> None:
    (tmp_path / "beast.agent.md").write_text(AGENT, encoding="utf-8")
    done = flow(
        "run", "beast.agent.md", "--task", "Fix it.", "--provider", "echo", "--new",
        "--progress", "run/progress.md", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "run" / "progress.md").read_text(encoding="utf-8")
    headings = outline(text.split("\n---\n", 1)[1])
    assert [h for h in headings if h[1] in ("Workflow", "Communication Guidelines")] == []
    assert (3, "1 · system") in headings and (2, "Conversation") in headings
    # The instructions read back exactly, and the model was sent them as written.
    run, _ = load_progress(tmp_path / "run" / "progress.md")
    assert run.transcript[0].content.startswith("You are an agent")
    assert "\n# Workflow\n" in run.transcript[0].content
    # One line for every tool left out: editor-only and extension tools together.
    said = [line for line in done.stderr.splitlines() if "not offered" in line]
    assert said == [
        "flow: editor-only tools not offered outside VS Code: `extensions`; tools of VS Code "
        "extensions, not offered outside VS Code (unless an MCP server of that name is "
        "configured): `ms-python.python/getPythonEnvironmentInfo`, "
        "`ms-python.python/installPythonPackage`, `vscjava.vscode-java-debug/debugJavaApplication`."
    ]


def test_deeper_headings_and_other_messages_stay_markdown() -> None:
    deep = Entry(id=1, role="system", content="Be careful.\n\n#### Rules\n- one")
    assert "```" not in entry_block(deep, "0" * 16)
    answer = Entry(id=3, role="assistant", content="## Summary\n\nDone.")
    assert "```" not in entry_block(answer, "0" * 16)  # a deliverable reads rendered
    shallow = Entry(id=1, role="system", content="Intro\n===\n\nText.")
    assert "```markdown" in entry_block(shallow, "0" * 16)


def test_check_names_extension_tools_in_one_warning() -> None:
    wf = parse_workflow(AGENT, path="beast.agent.md")
    (grouped,) = [d for d in wf.diagnostics if d.code == "extension-tools"]
    assert grouped.line == 4  # the first extension tool's line
    assert "`ms-python.python/installPythonPackage`" in grouped.message
    assert [d for d in wf.diagnostics if d.code == "unknown-tool"] == []


def test_skipped_skills_are_one_line() -> None:
    problems = [
        Diagnostic(
            "error", f"a skill needs `description`: what it does ({n}).", f"s{n}/SKILL.md", 2
        )
        for n in range(3)
    ]
    problems.append(Diagnostic("error", "second problem", "s0/SKILL.md", 5))
    line = skipped_skills_line(problems)
    assert line.startswith("3 skills skipped (flow skills shows why): s0/SKILL.md:2: a skill")
    assert line.count("SKILL.md") == 3 and "second problem" not in line
    assert skipped_skills_line(problems[:1]).startswith("skill skipped: s0/SKILL.md:2: error:")
