"""The Markdown body: shared context, step headings, and the directive line under a step.

The rule (docs/spec.md, "Steps"): a *top-level* heading (any level, ATX or setext) whose text
starts with the word ``Step`` followed by a number (``Step 1: Analyze``, ``Step 2 — Build``,
``Step 3``) or by a colon (``Step: Report``) starts a step. Headings inside lists, quotes,
code fences or tag blocks (``<plan_template>`` … ``</plan_template>``, ``<details>`` …) never
do, and neither do section headings such as ``## Steps`` or ``## Role``. A step runs until the
next step heading, or until a section heading at its level or above after the last step; text
before the first step and such trailing sections are shared context::

    parsed = parse_body(body, first_line=5, col=collector)
    parsed.context, [s.title for s in parsed.steps]
"""

from __future__ import annotations

import functools
import re
import shlex
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from .diagnostics import Collector, did_you_mean
from .source import LineIndex

_SEP = r"[:.)\-\u2013\u2014]"
_STEP_TITLED = re.compile(rf"^step\s+(?P<num>\d+)(?:\s*{_SEP}\s*|\s+)(?P<title>.*)$", re.I | re.S)
_STEP_NUMBER = re.compile(rf"^step\s+(?P<num>\d+)\s*{_SEP}?\s*$", re.I)
_STEP_COLON = re.compile(r"^step\s*:\s*(?P<title>.*)$", re.I | re.S)
_ID_SUFFIX = re.compile(r"\s*\{#(?P<id>[^{}]*)\}\s*$")
ID_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")
_DIRECTIVE_ITEM = re.compile(r"^\s*(?P<key>[A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(?P<value>.*?)\s*$", re.S)
_QUOTE_PREFIX = re.compile(r"^ {0,3}> ?")

DIRECTIVE_KEYS: tuple[str, ...] = ("tools", "max_turns", "kind", "run", "workflow", "inputs")
STEP_KINDS: tuple[str, ...] = ("prompt", "human", "command", "workflow")


@dataclass
class Directive:
    """The ``> key: value`` line(s) right under a step heading."""

    tools: list[tuple[str, int, int]] | None = None
    max_turns: int | None = None
    kind: str | None = None
    run: str | None = None
    run_args: dict[str, str] = field(default_factory=dict)
    #: ``workflow: child.prompt.md``: the sub-workflow to run (relative to this file).
    workflow: str | None = None
    #: ``inputs: name=value, …``: the sub-workflow's input values (may hold variables).
    inputs: dict[str, str] | None = None
    #: key -> (line, column) of each item, for later diagnostics.
    where: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class RawStep:
    """A step as found in the body, before it is checked against the front matter."""

    title: str
    #: The heading text without the ``{#id}`` suffix, as a reader sees it.
    heading: str
    number: int | None
    explicit_id: str | None
    level: int
    line: int
    column: int
    #: The step's own text (directive removed), newline-normalised but not yet cleaned.
    text: str
    #: Offsets of the step's whole region in the body (heading included).
    start: int
    end: int
    directive: Directive = field(default_factory=Directive)
    implicit: bool = False


@dataclass
class ParsedBody:
    """Shared context text plus the raw steps, in order."""

    context: str
    steps: list[RawStep]
    #: Offset where the first step starts (the context ends there).
    context_end: int


_TAG_OPEN = re.compile(r"^ {0,3}<([A-Za-z][\w.:-]*)(?:\s[^<>]*)?>\s*$")
_TAG_CLOSE = re.compile(r"^ {0,3}</([A-Za-z][\w.:-]*)\s*>\s*$")


def tag_blocks(body: str) -> list[tuple[int, int]]:
    """Offsets ``(start, end)`` of blocks that open with a line ``<tag ...>`` and close with a
    line ``</tag>`` (XML-like template blocks, HTML elements), outermost ones only."""
    ranges: list[tuple[int, int]] = []
    stack: list[tuple[str, int]] = []
    offset = 0
    for line in body.split("\n"):
        if (opened := _TAG_OPEN.match(line)) and not line.rstrip().endswith("/>"):
            stack.append((opened.group(1).lower(), offset))
        elif closed := _TAG_CLOSE.match(line):
            name = closed.group(1).lower()
            at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] == name), None)
            if at is not None:
                start = stack[at][1]
                del stack[at:]
                if not stack:
                    ranges.append((start, offset + len(line)))
        offset += len(line) + 1
    return ranges


@dataclass(frozen=True)
class _Block:
    """A top-level block of the body: its offsets and, for a heading, its level and text."""

    kind: str  # "heading", "quote" or "other"
    start: int
    end: int
    level: int = 0
    #: A heading's text, markup removed.
    text: str = ""


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    # CommonMark as it is: a prompt file's steps do not depend on extensions. Entities stay
    # apart from the text around them (no text_join), so a heading keeps them as written.
    return MarkdownIt("commonmark").disable("text_join")


def _blocks(body: str) -> list[_Block]:
    """The body's top-level blocks, in order (CommonMark, markdown-it-py): each spans whole
    lines, up to the start of the line after its last one."""
    starts = [0]
    for line in body.split("\n")[:-1]:
        starts.append(starts[-1] + len(line) + 1)

    def offset(line: int) -> int:
        return starts[line] if line < len(starts) else len(body)

    tokens = _parser().parse(body)
    blocks: list[_Block] = []
    for i, token in enumerate(tokens):
        if token.level != 0 or token.nesting == -1 or token.map is None:
            continue
        start, end = offset(token.map[0]), offset(token.map[1])
        gap = blocks[-1].end if blocks else 0
        if body[gap:start].strip():
            # Link reference definitions leave no token; they are a block all the same (a
            # quote after one is not right under its heading).
            blocks.append(_Block("other", gap, start))
        if token.type == "heading_open":
            text = _plain(tokens[i + 1].children or [])
            blocks.append(_Block("heading", start, end, int(token.tag[1]), text))
        else:
            kind = "quote" if token.type == "blockquote_open" else "other"
            blocks.append(_Block(kind, start, end))
    return blocks


def parse_body(body: str, *, index: LineIndex, col: Collector, single: bool = False) -> ParsedBody:
    """Find the context and steps in ``body`` (normalised text); ``single`` keeps the whole
    body one step (``steps: false``)."""
    blocks = _blocks(body)
    tagged = tag_blocks(body)
    headings: list[tuple[int, _Block, RawStep | None]] = []
    for position, block in enumerate(blocks):
        if block.kind == "heading":
            if any(a <= block.start < b for a, b in tagged):
                continue  # a heading inside a template or HTML block is part of its text
            headings.append((position, block, _step_heading(block, body, index)))

    step_positions = [(pos, raw) for pos, _, raw in headings if raw is not None]
    if single or not step_positions:
        return ParsedBody(context="", steps=[_whole_body(body, index)], context_end=0)

    # After the last step, a section heading at its level or above ends it: such a section
    # (e.g. a closing "## Output format") is shared by every step, like the text before the
    # first step.
    last = step_positions[-1][1]
    tail = next(
        (
            block.start
            for _, block, found in headings
            if found is None and block.start > last.start and block.level <= last.level
        ),
        len(body),
    )
    steps: list[RawStep] = []
    for n, (pos, raw) in enumerate(step_positions):
        end = step_positions[n + 1][1].start if n + 1 < len(step_positions) else tail
        raw.end = end
        content_start = blocks[pos].end
        # The directive is the first block after the heading, if it is a `> key: value` quote.
        following = pos + 1
        if (
            following < len(blocks)
            and blocks[following].kind == "quote"
            and blocks[following].start < end
        ):
            quote = blocks[following]
            parsed = _parse_directive(body[quote.start : quote.end], quote.start, index, col)
            if parsed is not None:
                raw.directive, content_start = parsed
        raw.text = body[content_start:end]
        steps.append(raw)
    _warn_sections_in_steps(headings, steps, index, col)
    context = body[: steps[0].start]
    if tail < len(body):
        context = context.rstrip("\n") + "\n\n" + body[tail:] if context.strip() else body[tail:]
    return ParsedBody(context=context, steps=steps, context_end=steps[0].start)


def _whole_body(body: str, index: LineIndex) -> RawStep:
    """The one step of a body without step headings (or of ``steps: false``): all of it."""
    return RawStep(
        title="",
        heading="",
        number=None,
        explicit_id=None,
        level=0,
        line=index.first_line,
        column=1,
        text=body,
        start=0,
        end=len(body),
        implicit=True,
    )


def _warn_sections_in_steps(
    headings: list[tuple[int, _Block, RawStep | None]],
    steps: list[RawStep],
    index: LineIndex,
    col: Collector,
) -> None:
    """Sections after a step at the step's own level or above belong to that step: say so,
    since a reader may take e.g. a trailing "## Output format" as shared by all steps."""
    for _, block, found in headings:
        if found is not None:
            continue
        owner = next((s for s in steps if s.start <= block.start < s.end), None)
        if owner is not None and block.level <= owner.level:
            line, column = index.position(block.start)
            col.warning(
                f"the section `{block.text.strip()}` is part of the step `{owner.heading}` (a "
                "step runs until the next step heading), so only that step sees it; move it "
                "above the first step to share it with every step, or make it a step of its "
                "own.",
                line=line,
                column=column,
                code="section-in-step",
            )


def _step_heading(block: _Block, body: str, index: LineIndex) -> RawStep | None:
    text = " ".join(block.text.split())
    explicit_id: str | None = None
    suffix = _ID_SUFFIX.search(text)
    if suffix:
        explicit_id = suffix.group("id").strip()
        text = text[: suffix.start()].rstrip()
    number: int | None = None
    title: str
    if match := _STEP_NUMBER.match(text):
        number = int(match.group("num"))
        title = f"Step {number}"
    elif match := _STEP_TITLED.match(text):
        number = int(match.group("num"))
        title = match.group("title").strip() or f"Step {number}"
    elif match := _STEP_COLON.match(text):
        title = match.group("title").strip()
        if not title:
            return None
    else:
        return None
    line, column = index.position(block.start)
    return RawStep(
        title=title,
        heading=text,
        number=number,
        explicit_id=explicit_id,
        level=block.level,
        line=line,
        column=column,
        text="",
        start=block.start,
        end=len(body),
    )


def _plain(tokens: list[Any]) -> str:
    """The text of a heading's inline tokens, markup removed."""
    parts = []
    for token in tokens:
        if token.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif token.type == "text_special" and token.info == "entity":
            parts.append(token.markup)  # `&amp;` as written: step ids come from this text
        elif token.children:
            parts.append(_plain(token.children))
        else:
            parts.append(token.content)
    return "".join(parts)


def _split_items(line: str) -> list[tuple[int, str]]:
    """Split on `·` and `;` outside quotes; returns (offset in line, item)."""
    items: list[tuple[int, str]] = []
    quote: str | None = None
    start = 0
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in ";\u00b7":
            items.append((start, line[start:i]))
            start = i + 1
    items.append((start, line[start:]))
    return [(off, item) for off, item in items if item.strip()]


def _parse_directive(
    quote: str, start: int, index: LineIndex, col: Collector
) -> tuple[Directive, int] | None:
    """The directive in a block quote and the offset where it ends, or None for prompt text.

    Only the quote's ``>`` lines are the directive: a line without ``>`` right after them (a
    "lazy" continuation, which Markdown would fold into the quote) starts the step's text.
    """
    entries, offset = _directive_items(quote, start, index)
    if not entries or entries[0][0] not in DIRECTIVE_KEYS:
        return None
    directive = Directive()
    for key, value, line, column, value_column in entries:
        if key not in DIRECTIVE_KEYS:
            shown = f"`{key}`" if key else f"`{value}`"
            col.error(
                f"{shown} is not a step directive{did_you_mean(key, DIRECTIVE_KEYS)}; a "
                f"directive line holds `key: value` items with keys {', '.join(DIRECTIVE_KEYS)}, "
                "separated by `·`, `;` or new `>` lines.",
                line=line,
                column=column,
                code="directive",
            )
            continue
        if key in directive.where:
            col.error(
                f"`{key}` is given twice for this step.", line=line, column=column, code="directive"
            )
            continue
        directive.where[key] = (line, column)
        if key == "tools":
            directive.tools = _tool_names(value, line, value_column)
        elif key == "max_turns":
            if value.isdigit() and int(value) > 0:
                directive.max_turns = int(value)
            else:
                col.error(
                    f"max_turns must be a whole number above 0 (got `{value}`).",
                    line=line,
                    column=column,
                    code="directive",
                )
        elif key == "kind":
            if value.lower() in STEP_KINDS:
                directive.kind = value.lower()
            else:
                col.error(
                    f"kind must be one of: {', '.join(STEP_KINDS)} (got `{value}`).",
                    line=line,
                    column=column,
                    code="directive",
                )
        elif key == "run":
            _parse_run(value, directive, line, column, col)
        elif key == "workflow":
            _parse_workflow(value, directive, line, column, col)
        elif key == "inputs":
            _parse_inputs(value, directive, line, column, col)
    return directive, min(offset, start + len(quote))


#: One ``key: value`` item of a directive: key, value, line, column of the item, column of
#: the value (the key is "" for an item without a colon).
_Item = tuple[str, str, int, int, int]


def _directive_items(quote: str, start: int, index: LineIndex) -> tuple[list[_Item], int]:
    """The items of a quote's ``>`` lines and the offset where those lines end."""
    entries: list[_Item] = []
    offset = start
    for raw_line in quote.split("\n"):
        prefix = _QUOTE_PREFIX.match(raw_line)
        if prefix is None and raw_line.strip():
            break
        skip = prefix.end() if prefix else 0
        for item_offset, item in _split_items(raw_line[skip:]):
            lead = len(item) - len(item.lstrip())
            line, column = index.position(offset + skip + item_offset + lead)
            match = _DIRECTIVE_ITEM.match(item)
            key = match.group("key").lower().replace("-", "_") if match else ""
            value = match.group("value") if match else item.strip()
            value_column = column + (match.start("value") - lead if match else 0)
            entries.append((key, value, line, column, value_column))
        offset += len(raw_line) + 1
    return entries, offset


def _tool_names(value: str, line: int, value_column: int) -> list[tuple[str, int, int]]:
    """The tool names of a ``tools:`` item, each with its position (none for ``none``)."""
    tools: list[tuple[str, int, int]] = []
    if value.strip().strip("[]").strip().lower() not in ("", "none"):
        at = 0
        for part in value.split(","):
            name = part.strip().strip("[]'\"`")
            if name:
                name_column = value_column + at + part.index(name[0])
                tools.append((name, line, name_column))
            at += len(part) + 1
    return tools


def _parse_run(value: str, directive: Directive, line: int, column: int, col: Collector) -> None:
    try:
        words = shlex.split(value)
    except ValueError as exc:
        col.error(f"cannot read the run line: {exc}.", line=line, column=column, code="directive")
        return
    if not words:
        col.error(
            "run needs the name of a declared command, e.g. `> run: bump`.",
            line=line,
            column=column,
            code="directive",
        )
        return
    directive.run = words[0]
    for word in words[1:]:
        name, eq, arg = word.partition("=")
        if not eq or not name:
            col.error(
                f"run arguments are written name=value (got `{word}`); quote values with "
                'spaces: name="two words".',
                line=line,
                column=column,
                code="directive",
            )
            continue
        directive.run_args[name] = arg


def _parse_workflow(
    value: str, directive: Directive, line: int, column: int, col: Collector
) -> None:
    path = value.strip().strip("`'\"").strip()
    if not path:
        col.error(
            "workflow needs the path of a workflow file, relative to this one, e.g. "
            "`> workflow: review.prompt.md`.",
            line=line,
            column=column,
            code="directive",
        )
        return
    directive.workflow = path


def _parse_inputs(value: str, directive: Directive, line: int, column: int, col: Collector) -> None:
    """``name=value, name2="two words"``: commas (or spaces) separate, quotes as in a shell."""
    lexer = shlex.shlex(value, posix=True)
    lexer.whitespace += ","
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError as exc:
        col.error(
            f"cannot read the inputs line: {exc}.", line=line, column=column, code="directive"
        )
        return
    directive.inputs = {}
    for word in words:
        name, eq, arg = word.partition("=")
        if not eq or not name.strip():
            col.error(
                f"sub-workflow inputs are written name=value, separated by commas (got "
                f'`{word}`); quote values with commas or spaces: name="a, b".',
                line=line,
                column=column,
                code="directive",
            )
            continue
        directive.inputs[name.strip()] = arg


def slugify(text: str) -> str:
    """A step id from a title: ASCII lower-case words joined by ``-`` (at most 64 chars)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(slug) > 64:
        slug = slug[:64].rsplit("-", 1)[0] or slug[:64]
    return slug
