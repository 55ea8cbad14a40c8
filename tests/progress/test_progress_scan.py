"""The quick transcript readers agree with the line-by-line one, and the digests with their
definition.

``parse`` reads each entry written exactly as ``render`` writes it straight from the bytes
(``aswritten.read_as_written``), and everything else (hand edits, encoded values, escaped
fences, damage) line by line (``entryread.read_entry``); ``parse_bytes`` reads a file flow wrote
from its bytes without decoding it whole. These tests parse the same text every way, on files
flow writes and on files edited at random, and require the same run, report, digests or error.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptflow_resume.base.errors import FlowError, ProgressFormatError
from promptflow_resume.progress import load_progress, render
from promptflow_resume.progress.digest import Chain, entry_digest, transcript_digest
from promptflow_resume.progress.entry import ROLES
from promptflow_resume.progress.examples import example_run, synthetic_run
from promptflow_resume.progress.model import Entry, Run
from promptflow_resume.progress.parse import parse_bytes, parse_document
from promptflow_resume.progress.render import marker_value

# The quick reader (entries as render writes them) and the line-by-line one.
aswritten = importlib.import_module("promptflow_resume.progress.aswritten")
entryread = importlib.import_module("promptflow_resume.progress.entryread")

# Values as real runs have them (plain), and values the quick reader leaves to read_entry:
# encoded characters, spaces, "--", backticks, more than 80 characters, non-ASCII.
STEPS = ["inspect", "report", "fix-1", "a.b:c", "é", "two words", "a--b", "x" * 81, "50%"]
CALLS = ["call_1", "toolu_01AbC", "c-2", "a`b", "call 3", "ç", "y" * 81]
TOOLS = ["read_file", "run-tests", "grep", "wéird", "t`t"]
CONTENTS = [
    "",
    "Plain text the model wrote.",
    "trailing space ",
    '{"path": "src/a.py"}',
    "line one\nline two\n",
    "```\ncode\n```",
    "# heading",
    "<!-- flow:entry 9 user d=0000000000000000 -->",
    "\nstarts with a blank line",
    "`tick` at the start",
    "<b>html</b> first",
    "tab\there",
    "ctrl \x01 char",
    "line\u2028separator",
    "    indented",
    "é and 😀",
]
# Lines spliced into a rendered file: pieces of our own structure, and near misses of it.
SNIPPETS = [
    "",
    " ",
    "```",
    "````",
    "```text",
    "### 2 · user",
    "### 3 · tool call · inspect",
    "Call `call_1` to `read_file` with these arguments:",
    "Result of `read_file` for call `call_1`:",
    "<!-- flow:entry 2 user d=0000000000000000 -->",
    "<!-- flow:entry 3 assistant step=inspect d=0123456789abcdef -->",
    "<!-- flow:section state -->",
    "%41",
    "\u3000",
    "\x1c",
    "`",
    "#",
    "<",
    "edited text",
]


@contextmanager
def line_by_line() -> Iterator[None]:
    """Parse with the quick reader switched off: every entry goes through ``read_entry``."""
    saved = aswritten._WRITTEN_MARKER
    aswritten._WRITTEN_MARKER = re.compile(rb"(?!)")
    try:
        yield
    finally:
        aswritten._WRITTEN_MARKER = saved


def outcome(text: str) -> tuple[Any, ...]:
    """Everything parsing tells a caller: the run, report and digests, or the error."""
    try:
        parsed = parse_document(text, path="run/progress.md")
    except FlowError as error:
        return ("error", type(error).__name__, str(error))
    return ("ok", parsed.run, parsed.report, parsed.stored_digests, parsed.actual_digests)


def outcome_of_bytes(data: bytes) -> tuple[Any, ...]:
    """``outcome`` for ``parse_bytes``."""
    try:
        parsed = parse_bytes(data, path="run/progress.md")
    except FlowError as error:
        return ("error", type(error).__name__, str(error))
    return ("ok", parsed.run, parsed.report, parsed.stored_digests, parsed.actual_digests)


def both_ways(text: str) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The outcome with the quick reader and without; reading the file's bytes must give the
    same as the quick reader."""
    quick = outcome(text)
    with line_by_line():
        slow = outcome(text)
    assert outcome_of_bytes(text.encode("utf-8")) == quick
    return quick, slow


@st.composite
def realistic_runs(draw: st.DrawFn) -> Run:
    """Runs whose entries are mostly like real ones, with odd values mixed in."""
    run = example_run()
    run.in_flight = []
    run.transcript = []
    for i in range(1, draw(st.integers(1, 8)) + 1):
        role = draw(st.sampled_from(ROLES))
        tool_entry = role in ("tool_call", "tool_result")
        sidecar = draw(st.sampled_from([None, None, None, "progress.files/out-1.txt"]))
        run.transcript.append(
            Entry(
                i,
                role,  # type: ignore[arg-type]
                draw(st.sampled_from(CONTENTS) | st.text(max_size=30)),
                step=draw(st.sampled_from([None, *STEPS])),
                call_id=draw(st.sampled_from(CALLS)) if tool_entry else None,
                tool=draw(st.sampled_from(TOOLS)) if tool_entry else None,
                is_error=role == "tool_result" and draw(st.booleans()),
                sidecar=sidecar if role == "tool_result" else None,
                sidecar_sha256="ab" * 32 if sidecar and role == "tool_result" else None,
                sidecar_bytes=draw(st.sampled_from([None, 0, 70000])) if sidecar else None,
            )
        )
    return run


def test_a_file_flow_writes_is_read_without_the_line_by_line_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = synthetic_run(60)
    text = render(run)
    slow_reads: list[int] = []
    real_entry = entryread.read_entry

    def counting(*args: Any) -> Any:
        slow_reads.append(args[1])
        return real_entry(*args)

    monkeypatch.setattr(entryread, "read_entry", counting)
    parsed = parse_document(text, path="run/progress.md")
    assert parsed.run.transcript == run.transcript
    assert slow_reads == []
    assert parsed.actual_digests == [entry_digest(e) for e in run.transcript]
    from_bytes = parse_bytes(text.encode("utf-8"), path="run/progress.md")
    assert slow_reads == []
    assert from_bytes.run == parsed.run
    assert from_bytes.actual_digests == parsed.actual_digests
    assert from_bytes.chain.root() == transcript_digest(run.transcript)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(realistic_runs())
def test_both_readers_agree_on_files_flow_writes(run: Run) -> None:
    quick, slow = both_ways(render(run))
    assert quick == slow
    assert quick[0] == "ok"
    assert quick[1].transcript == run.transcript


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(realistic_runs(), st.data())
def test_both_readers_agree_on_edited_files(run: Run, data: st.DataObject) -> None:
    text = render(run)
    head_end = text.index("\n---\n") + 5
    lines = text[head_end:].split("\n")
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(lines) - 1))
        snippet = data.draw(st.sampled_from(SNIPPETS))
        how = data.draw(st.sampled_from(["replace", "insert", "delete", "append", "prepend"]))
        if how == "replace":
            lines[at] = snippet
        elif how == "insert":
            lines.insert(at, snippet)
        elif how == "delete" and len(lines) > 1:
            del lines[at]
        elif how == "append":
            lines[at] += snippet
        else:
            lines[at] = snippet + lines[at]
    quick, slow = both_ways(text[:head_end] + "\n".join(lines))
    assert quick == slow


def small_run() -> Run:
    """Six entries: a reply, a call, an error result, a reply, a call, a sidecar result."""
    run = synthetic_run(6)
    run.transcript[2].is_error = True
    last = run.transcript[5]
    last.sidecar, last.sidecar_sha256 = "progress.files/o.txt", "ab" * 32
    last.sidecar_bytes = 70_000
    return run


SIDECAR_LINE = (
    "Result of `read_file` for call `call_5` · full output in "
    "[progress.files/o.txt](progress.files/o.txt) (70,000 bytes); the text below is a preview:"
)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("### 2 · tool call · inspect", "### 2 · call", "heading of entry 2"),
        ("### 2 · tool call · inspect", "### 7 · tool call · inspect", "heading of entry 2"),
        ("### 4 · assistant · report", "### 4 · assistant", "heading of entry 4"),
        ("Call `call_2` to", "Call `call_9` to", "line of entry 2 was edited outside"),
        ("Call `call_5` to", "Call `call_9` to", "line of entry 5 was edited outside"),
        ("`call_2` · **error**:", "`call_2`:", "line above the fence of entry 3"),
        (SIDECAR_LINE, "Result of `read_file` for call `call_5`:", "fence of entry 6"),
        ("(70,000 bytes)", "(70000 bytes)", "fence of entry 6"),
        ("(70,000 bytes)", "(size ?)", "fence of entry 6"),
        ("step=inspect at=", "step=%69nspect at=", None),
        ("```text\nsrc/", "```text\nSRC/", "entry 3 (tool result, step inspect) was edited"),
        ("The build passed", "The build failed", "entry 1 (assistant, step inspect) was edited"),
    ],
)
def test_edits_the_quick_reader_hands_over_are_reported(
    old: str, new: str, expected: str | None
) -> None:
    text = render(small_run())
    assert old in text
    quick, slow = both_ways(text.replace(old, new, 1))
    assert quick == slow
    assert quick[0] == "ok"
    warnings = quick[2].warnings
    if expected is None:
        assert warnings == []
    else:
        assert any(expected in w for w in warnings), warnings


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("src/module_0003.py | 12", "```\nsrc/module_0003.py | 12", "follows the closing fence"),
        ("\n<!-- flow:entry 5 ", "\n<!-- flow:entry 6 ", "expected entry 5"),
        ("```\n\n<!-- flow:entry 4 ", "```\n\nstray\n<!-- flow:entry 4 ", "belongs to no entry"),
        ("tool_call step=report", "tool_call step=report bogus", "unknown flag"),
        ("tool_call step=report", "tool_call step=r%C3port", "not percent-encoded UTF-8"),
        (
            "\n<!-- flow:entry 1 ",
            "\n<!-- flow:section extra -->\n<!-- flow:entry 1 ",
            "expected a `<!-- flow:section",
        ),
        (
            f"\n  digest: {transcript_digest(small_run().transcript)}\n",
            f"\n  digest: sha256:{'0' * 64}\n",
            "do not add up",
        ),
    ],
)
def test_damage_gives_the_same_positioned_error_either_way(
    old: str, new: str, expected: str
) -> None:
    text = render(small_run())
    assert old in text
    quick, slow = both_ways(text.replace(old, new, 1))
    assert quick == slow
    assert quick[0] == "error"
    assert re.search(r"progress\.md:\d+:1: ", quick[2])
    assert expected in quick[2]


@pytest.mark.parametrize("blank", [" ", "\t", "\u3000", "\xa0", "\x1c"])
def test_a_blank_line_before_a_fence_is_skipped_either_way(blank: str) -> None:
    # Any line str.strip() empties is blank to the reader, Unicode spaces included.
    text = render(small_run())
    text = text.replace(
        "### 1 · assistant · inspect\n\nThe build",
        f"### 1 · assistant · inspect\n\n{blank}\n```markdown\nThe build",
    )
    text = text.replace("\n\n<!-- flow:entry 2 ", "\n```\n\n<!-- flow:entry 2 ")
    quick, slow = both_ways(text)
    assert quick == slow
    assert quick[0] == "ok"
    assert quick[1].transcript[0].content.startswith("The build passed")
    assert quick[2].edited_entries == []


def test_an_empty_fence_is_closed_by_the_line_after_it() -> None:
    run = small_run()
    run.transcript[1].content = ""
    run.transcript[2] = Entry(3, "assistant", "Some text.", step="inspect")
    # Version 1 wrote an empty ```json fence for a call without arguments (now one line);
    # a hand edit leaves a lone fence line at the end of the next message.
    text = render(run).replace(
        "Call `call_2` to `read_file` with no arguments.",
        "Call `call_2` to `read_file` with these arguments:\n\n```json\n```",
    )
    text = text.replace("Some text.\n", "Some text.\n```\n", 1)
    quick, slow = both_ways(text)
    assert quick == slow
    assert quick[0] == "ok"
    assert quick[1].transcript[1].content == ""
    assert quick[1].transcript[2].content == "Some text.\n```"
    assert quick[2].edited_entries == [3]


def test_a_file_flow_writes_is_never_decoded_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    data = render(small_run())
    expected = parse_document(data, path="run/progress.md")
    decoded: list[int] = []
    str_reads: list[int] = []
    real_entry = entryread.read_entry

    def counting(sc: Any, pos: int, *rest: Any) -> Any:
        str_reads.append(pos)
        return real_entry(sc, pos, *rest)

    def decode(raw: bytes) -> str:
        decoded.append(len(raw))
        return raw.decode("utf-8")

    monkeypatch.setattr(entryread, "read_entry", counting)
    parsed = parse_bytes(data.encode("utf-8"), path="run/progress.md", decode=decode)
    assert parsed.run == expected.run
    assert parsed.actual_digests == expected.actual_digests
    assert decoded == []
    assert str_reads == []
    # An edited entry: the text is decoded whole once, to name the edit's line.
    edited = data.replace("The build passed", "The build failed", 1).encode("utf-8")
    parsed = parse_bytes(edited, path="run/progress.md", decode=decode)
    assert decoded == [len(edited)]
    assert parsed.report.edited_entries == [1]


@pytest.mark.parametrize(
    ("near", "line_of"),
    [("src/module_0003.py", "src/module_0003.py"), ("## Execution state", "## Execution state")],
)
def test_a_byte_that_is_not_utf8_is_named_where_it_is(
    tmp_path: Path, near: str, line_of: str
) -> None:
    text = render(small_run())
    at = text.index(near)
    data = text.encode("utf-8")
    where = len(text[:at].encode("utf-8"))
    path = tmp_path / "progress.md"
    path.write_bytes(data[:where] + b"\xff" + data[where + 1 :])
    with pytest.raises(ProgressFormatError, match="not UTF-8") as caught:
        load_progress(path)
    assert caught.value.line == text[:at].count("\n") + 1
    assert caught.value.column == 1


SPACES = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


@pytest.mark.parametrize("space", SPACES, ids=[hex(ord(s)) for s in SPACES])
def test_the_quick_reader_knows_every_character_strip_removes(space: str) -> None:
    # A message that starts with any character str.strip() removes is read alike either way.
    text = render(small_run())
    old = "### 1 · assistant · inspect\n\nThe build"
    assert old in text
    quick, slow = both_ways(text.replace(old, old.replace("The build", f"{space}The build")))
    assert quick == slow
    assert quick[0] == "ok"
    assert quick[1].transcript[0].content.startswith("The build passed")


entry_fields = st.builds(
    Entry,
    id=st.integers(1, 10**9),
    role=st.sampled_from(ROLES),
    content=st.text(),
    step=st.none() | st.text(max_size=8),
    call_id=st.none() | st.text(max_size=8),
    tool=st.none() | st.text(max_size=8),
    is_error=st.booleans(),
    sidecar=st.none() | st.text(max_size=8),
    sidecar_sha256=st.none() | st.text(max_size=8),
    sidecar_bytes=st.none() | st.integers(0, 10**12),
)


def defined_digest(e: Entry) -> str:
    """The entry digest as docs/spec.md defines it."""
    head = json.dumps(
        [
            e.id,
            e.role,
            e.step,
            e.call_id,
            e.tool,
            e.is_error,
            e.sidecar,
            e.sidecar_sha256,
            e.sidecar_bytes,
        ],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    data = head.encode("ascii") + b"\n" + e.content.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:16]


@settings(max_examples=300, deadline=None)
@given(entry_fields)
def test_entry_digest_is_the_defined_hash(entry: Entry) -> None:
    assert entry_digest(entry) == defined_digest(entry)


@pytest.mark.parametrize(
    "odd",
    [
        {"sidecar_bytes": 12.0},
        {"sidecar_bytes": True},
        {"is_error": 1},
        {"id": True},
        {"step": 5},
    ],
)
def test_entry_digest_of_values_replayed_from_a_hand_made_journal(odd: dict[str, Any]) -> None:
    entry = Entry(3, "tool_result", "out", step="s", call_id="c", tool="t")
    for key, value in odd.items():
        setattr(entry, key, value)
    assert entry_digest(entry) == defined_digest(entry)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**6), st.from_regex(r"\A[0-9a-f]{16}\Z"))))
def test_a_chain_built_at_once_equals_one_built_entry_by_entry(
    pairs: list[tuple[int, str]],
) -> None:
    one_by_one = Chain()
    for entry_id, digest in pairs:
        one_by_one.add(entry_id, digest)
    at_once = Chain(pairs)
    assert at_once.root() == one_by_one.root()
    assert at_once.count == one_by_one.count == len(pairs)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_marker_values_are_percent_encoded_as_defined(value: str) -> None:
    encoded = quote(value.encode("utf-8", "surrogatepass"), safe="_.:/~+@,-")
    while "--" in encoded:
        encoded = encoded.replace("--", "-%2D")
    assert marker_value(value) == encoded
