"""What a rendered progress file looks like: a reviewed snapshot, and the choice of content form."""

from __future__ import annotations

import pytest
from syrupy.assertion import SnapshotAssertion

from promptflow_resume.progress import parse, render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Entry, Run, StepState
from promptflow_resume.progress.render import entries_phrase, one_line
from tests.support.snapshots import MarkdownSnapshot


@pytest.fixture
def md_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(MarkdownSnapshot)


def test_example_progress_file(md_snapshot: SnapshotAssertion) -> None:
    assert render(example_run()) == md_snapshot


def _one(content: str, role: str = "assistant", **extra: object) -> str:
    run: Run = example_run()
    run.in_flight = []
    run.transcript = [Entry(1, role, content, step="s", **extra)]  # type: ignore[arg-type]
    text = render(run)
    assert parse(text)[0] == run
    start = text.index("### 1 ·")
    return text[start : text.index("<!-- flow:section state")]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Plain prose stays readable.", "### 1 · assistant · s\n\nPlain prose stays readable.\n\n"),
        (
            "A list:\n\n- one\n- two *emphasis* and `code`",
            "### 1 · assistant · s\n\nA list:\n\n- one\n- two *emphasis* and `code`\n\n",
        ),
        ("# Title\nbody", "### 1 · assistant · s\n\n# Title\nbody\n\n"),
        ("a\n---\nb", "### 1 · assistant · s\n\na\n---\nb\n\n"),
        ("<details>x</details>", "### 1 · assistant · s\n\n<details>x</details>\n\n"),
        ("```py\ncode\n```", "### 1 · assistant · s\n\n```py\ncode\n```\n\n"),
        ("```py\nunclosed", "### 1 · assistant · s\n\n````markdown\n```py\nunclosed\n````\n\n"),
        ("<!-- open", "### 1 · assistant · s\n\n```markdown\n<!-- open\n```\n\n"),
        ("<!-- flow:entry", "### 1 · assistant · s\n\n```markdown\n<!-- flow:entry\n```\n\n"),
        ("```json\n{}\n```", "### 1 · assistant · s\n\n````markdown\n```json\n{}\n```\n````\n\n"),
        ("_(no text)_", "### 1 · assistant · s\n\n```markdown\n_(no text)_\n```\n\n"),
        ("trailing space ", "### 1 · assistant · s\n\n```markdown\ntrailing space \n```\n\n"),
        ("\nleading blank", "### 1 · assistant · s\n\n```markdown\n\nleading blank\n```\n\n"),
        ("tab\there", "### 1 · assistant · s\n\ntab\there\n\n"),
        ("", "### 1 · assistant · s\n\n_(no text)_\n\n"),
        (
            "x\n```py\ncode\n````\n",
            "### 1 · assistant · s\n\n`````markdown\nx\n```py\ncode\n````\n\n`````\n\n",
        ),
        (
            "windows\r\nline\x07",
            '### 1 · assistant · s\n\n```flow-escaped\n"windows\\r\\n"\n"line\\u0007"\n```\n\n',
        ),
        ("lone \ud800 surrogate", '### 1 · assistant · s\n\n```flow-escaped\n"lone \\ud800 surrogate"\n```\n\n'),  # noqa: E501
    ],
    ids=[
        "prose", "markdown-list", "heading", "rule", "html", "closed-fence", "unclosed-fence",
        "unclosed-comment", "our-marker", "our-fence-first", "empty-placeholder",
        "trailing-space", "leading-blank",
        "tab", "empty", "fences", "control-chars", "surrogate",
    ],
)  # fmt: skip
def test_each_message_gets_the_most_readable_exact_form(content: str, expected: str) -> None:
    assert _one(content) == expected


def test_tool_calls_show_short_arguments_on_one_line() -> None:
    text = _one('{"path": "README.md"}', "tool_call", call_id="call_1", tool="read_file")
    assert text == (
        '### 1 · tool call · s\n\nCall `call_1` to `read_file` with `{"path": "README.md"}`.\n\n'
    )
    text = _one("", "tool_call", call_id="call_1", tool="now")
    assert text == "### 1 · tool call · s\n\nCall `call_1` to `now` with no arguments.\n\n"


def test_tool_calls_fence_long_or_multi_line_arguments_as_json() -> None:
    arguments = '{\n  "path": "README.md"\n}'
    text = _one(arguments, "tool_call", call_id="call_1", tool="read_file")
    assert text == (
        "### 1 · tool call · s\n\nCall `call_1` to `read_file` with these arguments:\n\n"
        f"```json\n{arguments}\n```\n\n"
    )
    long = '{"text": "' + "x" * 300 + '"}'
    assert "```json\n" in _one(long, "tool_call", call_id="call_1", tool="write")


def test_tool_results_are_fenced_with_a_language_and_empty_ones_take_one_line() -> None:
    text = _one('{"ok": true}', "tool_result", call_id="c", tool="api")
    assert text.endswith('```json\n{"ok": true}\n```\n\n')
    text = _one("", "tool_result", call_id="c", tool="touch")
    assert text == "### 1 · tool result · s\n\nResult of `touch` for call `c`: _(no output)_\n\n"


def test_tool_results_show_output_error_flag_and_sidecar_link() -> None:
    text = _one(
        "no such file",
        "tool_result",
        call_id="call_1",
        tool="read_file",
        is_error=True,
        sidecar="progress.files/call_1-read_file.txt",
        sidecar_sha256="sha256:" + "a" * 64,
        sidecar_bytes=123456,
    )
    assert text == (
        "### 1 · tool result · s\n\nResult of `read_file` for call `call_1` · **error** · full "
        "output in [progress.files/call_1-read_file.txt](progress.files/call_1-read_file.txt) "
        "(123,456 bytes); the text below is a preview:\n\n```text\nno such file\n```\n\n"
    )


def test_front_matter_leaves_out_empty_optional_keys() -> None:
    run = example_run()
    run.reason = None
    run.in_flight = []
    run.attempts = []
    run.last_error = None
    run.keywords = []
    run.inputs = {}
    text = render(run)
    front = text[: text.index("\n---\n")]
    for key in (
        "reason:",
        "in_flight:",
        "attempts:",
        "last_error:",
        "keywords:",
        "inputs:",
        "parent:",
    ):
        assert f"\n{key}" not in front
    assert parse(text)[0] == run


def test_a_three_step_front_matter_is_short_and_repeats_no_field() -> None:
    run = example_run()
    run.in_flight, run.last_error, run.reason = [], None, None
    run.keywords = ["changes", "notes", "release", "summarize", "audience", "report", "tests"]
    first = next(iter(run.steps.values()))
    for sid in ("inspect", "report", "publish"):
        run.steps[sid] = StepState(
            status="completed",
            attempts=1,
            output_entry=first.output_entry,
            started=first.started,
            finished=first.finished,
            usage=first.usage,
            turns=first.usage.turns,
        )
        run.workflow.steps[sid] = run.workflow.hash
    text = render(run)
    front = text[4 : text.index("\n---\n")].split("\n")
    assert len(front) <= 60, len(front)
    # usage and keywords take one line each; a step's turns equal to its usage's are implied
    assert sum(line.lstrip().startswith("usage: {") for line in front) == len(run.steps) + 2
    assert "keywords: [changes, notes, release, summarize, audience, report, tests]" in front
    assert not any(line.strip().startswith("turns:") for line in front)
    assert parse(text)[0] == run


def test_long_cells_wrap_or_are_cut_between_words() -> None:
    run = example_run()
    run.keywords = [f"keyword{i}" for i in range(60)]
    text = render(run)
    assert "| **Keywords** | " + ", ".join(run.keywords) + " |" in text
    assert one_line("alpha beta gamma delta epsilon", 20) == "alpha beta gamma…"


@pytest.mark.parametrize(
    ("ids", "phrase"),
    [([3], "entry 3"), ([3, 5], "entries 3 and 5"), ([3, 5, 8], "entries 3, 5 and 8")],
)
def test_edited_entries_are_named_as_entries_not_counted(ids: list[int], phrase: str) -> None:
    assert entries_phrase(ids) == phrase
