"""Exact round trip of the progress format, and an independent CommonMark parser's view of it."""

from __future__ import annotations

import re
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from promptflow_resume.progress import parse, render
from promptflow_resume.progress.digest import entry_digest
from promptflow_resume.progress.entry import ROLES, EntryMeta
from promptflow_resume.progress.examples import example_run, synthetic_run
from promptflow_resume.progress.model import (
    RUN_STATUSES,
    STEP_STATUSES,
    WORKTREE_STATES,
    Attempt,
    Cursor,
    Entry,
    ErrorInfo,
    InFlight,
    Redactions,
    Run,
    RunConfig,
    StepState,
    Usage,
    WorkflowRef,
    WorktreeRef,
)
from promptflow_resume.progress.render import call_line, entry_marker, raw_ok

# Pieces that have broken Markdown-based formats: structure lines, our own markers, line
# ending and whitespace oddities, characters outside the BMP and control characters.
NASTY = [
    "# heading",
    "## Conversation",
    "### 3 · user · x",
    "```",
    "````",
    "`````python",
    "~~~",
    "---",
    "===",
    "***",
    "- - -",
    "<div>",
    "</div>",
    "<!-- note -->",
    "<!--",
    "-->",
    "<!-- flow:entry 1 user d=0000000000000000 -->",
    "<!-- flow:section state d=0000000000000000 -->",
    "<!-- flow:end seq=0 -->",
    "<script>",
    "\r\n",
    "\r",
    "\n",
    "\n\n",
    "\t",
    "  ",
    " \n",
    "😀",
    "é",
    "\u2028",
    "\x00",
    "\x85",
    "\x1b[31m",
    "\ufeff",
    "\ud800",
    "[ref]: /url",
    "[^1]: note",
    "$$",
    "> quote",
    "    indented",
    "| a | b |",
    "\\",
    "`",
    "``",
    "1. item",
    "- item",
    "* item",
    "**bold**",
    "|---|",
    "<details>",
    "</details>",
    "<pre>",
    "</pre>",
    "<?php",
    "?>",
    "<![CDATA[",
    "]]>",
    "<!DOCTYPE",
    "_(no text)_",
    "```markdown",
    "```json",
    "````text",
]
# Markdown as a model writes it: lines of headings, lists, quotes, tables, fences and prose.
markdown_line = st.one_of(
    st.sampled_from(NASTY),
    st.text(alphabet=string.ascii_letters + " .,`*_#>-|<!?[]()~:", max_size=20),
    st.builds(
        "".join,
        st.tuples(
            st.sampled_from(["# ", "## ", "- ", "1. ", "> ", "| ", "```", "~~~", "    ", "<"]),
            st.text(alphabet=string.ascii_letters + " `*-<>", max_size=12),
        ),
    ),
)
markdown = st.lists(markdown_line, min_size=1, max_size=12).map("\n".join)
content = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(NASTY)), max_size=8).map("".join)
# Front matter strings may hold any valid Unicode text (lone surrogates are not valid).
fm_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20)
name = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12)
stamp = st.from_regex(r"\A20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]Z\Z")
hashes = st.from_regex(r"\Asha256:v1:[0-9a-f]{8,64}\Z")
count = st.integers(min_value=0, max_value=10**9)
usage = st.builds(
    Usage,
    input_tokens=count,
    output_tokens=count,
    cached_tokens=count,
    cost_usd=st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False),
    turns=count,
)
json_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | fm_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(fm_text, inner, max_size=3),
    max_leaves=6,
)
optional = st.none() | fm_text


small = st.integers(min_value=0, max_value=10**12)
#: What format 7 records of a call on an entry's marker (docs/spec.md 13.4).
entry_meta = st.builds(
    EntryMeta,
    at=st.none()
    | st.from_regex(
        r"\A20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]\.[0-9]{3}Z\Z"
    ),
    ms=st.none() | small,
    model=st.none() | content,
    answered_by=st.none() | content,
    tokens=st.none() | st.tuples(small, small, small),
    cost=st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False),
    finish=st.none() | content,
    retries=st.none() | small,
    kind=st.none() | content,
    server=st.none() | content,
)


@st.composite
def entries(draw: st.DrawFn) -> list[Entry]:
    out = []
    for i in range(1, draw(st.integers(0, 6)) + 1):
        role = draw(st.sampled_from(ROLES))
        sidecar = draw(st.none() | st.from_regex(r"\Aprogress\.files/[a-z0-9][a-z0-9._-]{0,10}\Z"))
        out.append(
            Entry(
                id=i,
                role=role,  # type: ignore[arg-type]
                content=draw(content),
                step=draw(st.none() | content),
                call_id=draw(st.none() | content),
                tool=draw(st.none() | content),
                is_error=draw(st.booleans()),
                sidecar=sidecar,
                sidecar_sha256=draw(st.none() | content),
                sidecar_bytes=draw(st.none() | count),
                # A marker with no field is no metadata: it reads back as None.
                meta=draw(st.none() | entry_meta.filter(lambda m: m != EntryMeta())),
            )
        )
    return out


@st.composite
def runs(draw: st.DrawFn) -> Run:
    step_ids = draw(st.lists(name, max_size=3, unique=True))
    return Run(
        run_id=draw(st.from_regex(r"\A[a-z0-9][a-z0-9-]{0,30}\Z")),
        workflow=WorkflowRef(
            path=draw(name),
            hash=draw(hashes),
            steps={s: draw(hashes) for s in step_ids},
            name=draw(optional),
            description=draw(optional),
        ),
        status=draw(st.sampled_from(RUN_STATUSES)),  # type: ignore[arg-type]
        created=draw(stamp),
        updated=draw(stamp),
        config=RunConfig(
            provider=draw(st.from_regex(r"\A[a-z][a-z0-9_-]{0,10}\Z")),
            model=draw(optional),
            params=draw(st.dictionaries(fm_text, json_value, max_size=3)),
            budget=draw(
                st.dictionaries(
                    st.sampled_from(["max_turns", "max_cost_usd", "max_tokens", "max_seconds"]),
                    st.none() | st.integers(0, 10**6) | st.floats(0, 1e6),
                )
            ),
            base_url=draw(st.none() | name),
            recording=draw(st.none() | name),
        ),
        cursor=Cursor(step=draw(st.none() | name), index=draw(count), total=draw(count)),
        reason=draw(optional),
        inputs=draw(st.dictionaries(fm_text, json_value, max_size=3)),
        steps={
            s: StepState(
                status=draw(st.sampled_from(STEP_STATUSES)),  # type: ignore[arg-type]
                attempts=draw(count),
                output_entry=draw(st.none() | st.integers(1, 10**6)),
                started=draw(st.none() | stamp),
                finished=draw(st.none() | stamp),
                usage=draw(usage),
                turns=draw(count),
            )
            for s in step_ids
        },
        in_flight=draw(
            st.lists(
                st.builds(
                    InFlight,
                    call_id=fm_text,
                    tool=fm_text,
                    step=fm_text,
                    entry=st.integers(1, 10**6),
                    started=stamp,
                    idempotent=st.booleans(),
                ),
                max_size=2,
            )
        ),
        usage=draw(usage),
        attempts=draw(
            st.lists(
                st.builds(
                    Attempt,
                    n=st.integers(1, 100),
                    started=stamp,
                    ended=st.none() | stamp,
                    status=st.none() | st.sampled_from(RUN_STATUSES),
                    reason=optional,
                    usage=usage,
                    notes=st.lists(fm_text, max_size=2),
                    flow=st.none() | st.from_regex(r"\A(0|[1-9][0-9]{0,2})\.[0-9]\.[0-9]\Z"),
                ),
                max_size=2,
            )
        ),
        last_error=draw(
            st.none() | st.builds(ErrorInfo, type=fm_text, message=fm_text, at=stamp, step=optional)
        ),
        redactions=draw(st.builds(Redactions, count=count, where=st.lists(fm_text, max_size=2))),
        keywords=draw(st.lists(fm_text, max_size=3)),
        parent=draw(st.none() | st.dictionaries(fm_text, fm_text, max_size=2)),
        worktree=draw(
            st.none()
            | st.builds(
                WorktreeRef,
                path=name,
                branch=name,
                base=st.from_regex(r"\A[0-9a-f]{40}\Z"),
                state=st.sampled_from(WORKTREE_STATES),
            )
        ),
        transcript=draw(entries()),
        journal_seq=draw(st.integers(0, 1000)),
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_parse_of_render_is_the_same_run(run: Run) -> None:
    text = render(run)
    again, report = parse(text)
    assert again == run
    assert again.journal_seq == run.journal_seq
    assert report.edited_entries == []
    assert report.warnings == []
    assert render(again) == text  # re-rendering a loaded, unchanged run changes no byte


@settings(max_examples=300, deadline=None)
@given(content)
def test_any_message_content_survives_in_every_role(text: str) -> None:
    run = example_run()
    run.in_flight = []
    run.transcript = [
        Entry(i, role, text, step="s")  # type: ignore[arg-type]
        for i, role in enumerate(ROLES, start=1)
    ]
    again, _ = parse(render(run))
    assert [e.content for e in again.transcript] == [text] * len(ROLES)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(markdown, min_size=1, max_size=4))
def test_arbitrary_markdown_round_trips_and_keeps_the_structure(texts: list[str]) -> None:
    run = example_run()
    run.in_flight = []
    run.transcript = [
        Entry(i, ROLES[i % 3], text, step="s")  # type: ignore[arg-type]
        for i, text in enumerate(texts, start=1)
    ]
    text = render(run)
    again, report = parse(text)
    assert [e.content for e in again.transcript] == texts
    assert report.warnings == []
    assert render(again) == text
    _markdown_it_view(run)


@given(st.text(alphabet=string.ascii_letters + " .,!?'", min_size=1, max_size=40).map(str.strip))
def test_plain_prose_is_written_raw_not_fenced(text: str) -> None:
    if not text:
        return
    run = example_run()
    run.transcript = [Entry(1, "assistant", text)]
    run.in_flight = []
    body = render(run)
    assert f"### 1 · assistant\n\n{text}\n\n<!--" in body


def _body_lines(text: str) -> tuple[int, list[str]]:
    """The line index where the body starts (after the closing ---) and all lines."""
    lines = text.split("\n")
    close = lines.index("---", 1)
    return close, lines


def _markdown_it_view(run: Run) -> None:
    """Assert an independent CommonMark parser sees exactly the structure we wrote."""
    text = render(run)
    close, lines = _body_lines(text)
    # The front matter must end where we think on GitHub too: no YAML line may look like a
    # delimiter (--- or ..., which Jekyll-style front matter also accepts).
    assert not any(line in ("---", "...") for line in lines[1:close])
    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(text)
    for token in tokens:
        if token.map and token.level == 0:
            start, end = token.map
            assert end <= close + 1 or start > close, f"{token.type} spans the front matter end"
    body_tokens = md.parse("\n".join(lines[close + 1 :]))
    body = lines[close + 1 :]
    sections = [line for line in body if line.startswith("<!-- flow:section ")]
    # Content may quote our marker syntax (inside fences, or not at a line start), so build
    # the expected list from the run: three sections before the conversation, the entries,
    # then state and end.
    markers = [
        *sections[:3],
        *(entry_marker(e, entry_digest(e)) for e in run.transcript),
        sections[-1],
        body[-2],
    ]
    assert body[-2].startswith("<!-- flow:end ")
    at = [
        i
        for i, t in enumerate(body_tokens)
        if t.type == "html_block" and t.content.startswith("<!-- flow:")
    ]
    # Every marker is its own top-level HTML block: nothing swallowed or leaked.
    assert [body_tokens[i].content.rstrip("\n") for i in at] == markers
    assert all(body_tokens[i].level == 0 for i in at)
    for n, entry in enumerate(run.transcript):
        segment = body_tokens[at[3 + n] + 1 : at[4 + n]]
        # Each entry opens with its one h3 heading (the content may hold headings of its own).
        assert segment[0].type == "heading_open" and segment[0].tag == "h3"
        assert segment[1].content.split(" · ")[0] == str(entry.id)
        own = [t for t in segment if t.type == "fence" and t.level == 0]
        if entry.role in ("tool_call", "tool_result") or not raw_ok(entry.content):
            one_line = entry.role == "tool_call" and call_line(entry) is not None
            if one_line or not entry.content:
                assert not own, "a one-line entry has no code block"
                continue
            assert own, f"entry {entry.id} should be fenced"
            token = own[-1]
            if token.info.strip() != "flow-escaped":
                assert token.content == entry.content + "\n"
            assert token.content, "no empty code blocks"


def test_markdown_it_sees_one_heading_per_entry_in_the_example() -> None:
    _markdown_it_view(example_run())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_markdown_it_sees_the_structure_we_wrote(run: Run) -> None:
    _markdown_it_view(run)


def test_a_long_run_round_trips() -> None:
    run = synthetic_run(300)
    text = render(run)
    assert parse(text)[0] == run
    assert re.search(r"^transcript:\n  entries: 300\n", text, re.MULTILINE)
