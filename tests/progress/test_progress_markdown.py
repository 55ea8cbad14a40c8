"""Every fixture and example progress file, as a CommonMark + tables renderer (GitHub's kind)
shows it: one heading per entry, replies rendered as Markdown, no empty code blocks, nothing of
the front matter in the body."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from promptflow_resume.progress import load_progress, render
from promptflow_resume.progress.examples import example_run, synthetic_run
from promptflow_resume.progress.model import Run
from promptflow_resume.progress.render import raw_ok
from tests import support

ROOT = support.REPO
FILES = sorted((ROOT / "tests" / "fixtures" / "progress" / "valid").glob("*.md")) + sorted(
    (ROOT / "workflows" / "examples").glob("*.progress.md")
)
EXAMPLE = ROOT / "workflows" / "examples" / "triage-todos.progress.md"
MD = MarkdownIt("commonmark").enable("table")
_FRONT_KEY = re.compile(r"^(flow_progress|run_id|workflow|cursor|steps|usage|transcript):", re.M)


def _split(text: str) -> tuple[str, str]:
    assert text.startswith("---\n")
    end = text.index("\n---\n", 3)
    return text[4 : end + 1], text[end + 5 :]


def _segments(body: str) -> list[list[Token]]:
    """The tokens of each entry: from its heading to the next flow marker."""
    tokens = MD.parse(body)
    out: list[list[Token]] = []
    current: list[Token] | None = None
    for token in tokens:
        if token.type == "html_block" and token.content.startswith("<!-- flow:"):
            current = [] if token.content.startswith("<!-- flow:entry ") else None
            if current is not None:
                out.append(current)
        elif current is not None:
            current.append(token)
    return out


def check_structure(text: str, run: Run) -> None:
    """The structure assertions, for one file's text and the run it holds."""
    _, body = _split(text)
    assert _FRONT_KEY.search(body) is None, "front matter text in the body"
    tokens = MD.parse(body)
    # The body opens with a marker or the share note; no YAML-looking paragraph comes first.
    assert tokens[0].type in ("html_block", "blockquote_open")
    assert not [t for t in tokens if t.type == "fence" and not t.content.strip()], "empty block"
    segments = _segments(body)
    assert len(segments) == len(run.transcript)
    for entry, segment in zip(run.transcript, segments, strict=True):
        # One heading per entry, and it is the entry's own.
        assert segment[0].type == "heading_open" and segment[0].tag == "h3"
        assert segment[1].content.startswith(f"{entry.id} · ")
        own_h3 = [t for t in segment if t.type == "heading_open" and t.tag == "h3"]
        if "\n### " not in "\n" + entry.content:
            assert len(own_h3) == 1
        if entry.role in ("tool_call", "tool_result") or not raw_ok(entry.content):
            continue
        # A reply's own headings and lists render as headings and lists, not as code.
        lines = entry.content.split("\n")
        in_code = False
        for line in lines:
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            if re.match(r"#{1,6} ", line):
                level = "h" + str(len(line.split(" ")[0]))
                assert any(t.type == "heading_open" and t.tag == level for t in segment), line
            if re.match(r"(- |\* |\d+\. )", line):
                assert any(t.type in ("bullet_list_open", "ordered_list_open") for t in segment)
        assert not any(t.type == "fence" and t.info.strip() == "markdown" for t in segment)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture_and_example_renders_as_a_report(path: Path) -> None:
    run, _ = load_progress(path)
    check_structure(render(run), run)  # as flow writes it now (v1 fixtures are upgraded)
    if path == EXAMPLE:
        check_structure(path.read_text(encoding="utf-8"), run)  # as committed


def test_the_example_answer_is_rendered_not_fenced() -> None:
    run, _ = load_progress(EXAMPLE)
    _, body = _split(EXAMPLE.read_text(encoding="utf-8"))
    answer = _segments(body)[-1]
    assert [t.content for t in answer if t.type == "inline"][1] == "Task list"
    assert any(t.type == "heading_open" and t.tag == "h2" for t in answer)
    assert sum(t.type == "list_item_open" for t in answer) == 3
    assert not any(t.type == "fence" for t in answer)
    # A turn that only calls a tool: the call on one line, no code block.
    call = _segments(body)[3]
    assert [t.type for t in call] == [
        "heading_open",
        "inline",
        "heading_close",
        "paragraph_open",
        "inline",
        "paragraph_close",
    ]
    assert run.transcript[3].role == "tool_call"


@pytest.mark.parametrize("run", [example_run(), synthetic_run(40)], ids=["example", "synthetic"])
def test_generated_runs_render_as_reports(run: Run) -> None:
    check_structure(render(run), run)
