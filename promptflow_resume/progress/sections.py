"""Reading the generated sections of a progress file: those before the conversation (the
Configuration section's input table among them), the text between the Conversation heading and
the first entry, the sections after the conversation and the end marker.

Sections are generated from the front matter, so an edit of one has no effect and is named in
a warning; the end marker carries the journal's sequence number::

    pos = conversation_start(sc, body_start, report, run)   # where the first entry starts
    conversation_end(sc, end_of_entries, run, report)
"""

from __future__ import annotations

import re

from ..base.errors import ProgressFormatError
from .model import LoadReport, Run
from .render import INPUT_TABLE_HEADER, conversation_preamble, input_rows, section_digest
from .scanner import Scanner

_SECTION_RE = re.compile(r"<!-- flow:section ([a-z]+)(?: d=([0-9a-f]{16}))?(?: .*)? -->")
_END_RE = re.compile(r"<!-- flow:end seq=([0-9]+) -->")


def _section_marker(sc: Scanner, pos: int) -> tuple[str, str | None, int]:
    line, after = sc.line_at(pos)
    match = _SECTION_RE.fullmatch(line)
    if match is None:
        raise sc.fail(
            ProgressFormatError, pos, "expected a `<!-- flow:section NAME ... -->` line here."
        )
    return match.group(1), match.group(2), after


def _check_generated(
    sc: Scanner, name: str, recorded: str | None, start: int, end: int, report: LoadReport
) -> None:
    if recorded is not None and section_digest(sc.text[start:end]) != recorded:
        report.warnings.append(
            f"{sc.path}:{sc.line_of(start)}: the {name} section was edited; it is generated from "
            "the front matter, so the edit has no effect (edit the front matter instead)."
        )


def _is_blockquote(text: str) -> bool:
    """True for a note above the first section that is all one blockquote (``flow share``
    writes one; it is for readers and dropped at the next save)."""
    return all(line.startswith(">") for line in text.strip().split("\n"))


def _input_cells(text: str) -> dict[str, str]:
    """Input name -> value, as the rows of a Configuration section's input table show them."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    if INPUT_TABLE_HEADER not in lines:
        return out
    for line in lines[lines.index(INPUT_TABLE_HEADER) + 2 :]:
        match = _INPUT_ROW_RE.fullmatch(line)
        if match is None:
            break
        out[match.group(1)] = match.group(2)
    return out


_INPUT_ROW_RE = re.compile(r"\| ((?:[^|\\]|\\.)*) \| ((?:[^|\\]|\\.)*) \|")


def _check_inputs(
    sc: Scanner, recorded: str | None, start: int, end: int, run: Run, report: LoadReport
) -> None:
    """Name the inputs edited in the front matter: the Configuration section still shows the
    values flow last wrote (unless it was edited itself, and then it tells nothing)."""
    text = sc.text[start:end]
    if recorded is None or section_digest(text) != recorded:
        return
    shown = _input_cells(text)
    now = _input_cells(INPUT_TABLE_HEADER + "\n|---|---|\n" + "\n".join(input_rows(run.inputs)))

    def plain(value: str | None) -> str:
        return "(not set)" if value is None else value.replace("\\|", "|")

    for name in [*shown, *(n for n in now if n not in shown)]:
        if shown.get(name) != now.get(name):
            report.edited_inputs.append(
                f"{plain(name)}: {plain(shown.get(name))} -> {plain(now.get(name))}"
            )


def conversation_start(sc: Scanner, start: int, report: LoadReport, run: Run | None = None) -> int:
    """Read the generated sections from ``start`` up to the conversation; return where its
    first entry (or whatever follows its heading) starts. With ``run``, name the inputs its
    front matter changed since flow wrote the Configuration section."""
    text = sc.text
    pos = sc.next_marker(start)
    if pos == -1:
        raise sc.truncated("the body has no flow:section markers (it ends after the front matter)")
    if text[start:pos].strip() and not _is_blockquote(text[start:pos]):
        report.warnings.append(
            f"{sc.path}:{sc.line_of(start)}: text before the first section is ignored."
        )
    while True:
        name, recorded, after = _section_marker(sc, pos)
        if name == "conversation":
            break
        nxt = sc.next_marker(after)
        if nxt == -1:
            raise sc.truncated(f"it ends inside the {name} section")
        _check_generated(sc, name, recorded, after, nxt, report)
        if name == "configuration" and run is not None:
            _check_inputs(sc, recorded, after, nxt, run, report)
        pos = nxt
    pos = sc.next_marker(after)
    if pos == -1:
        raise sc.truncated("it ends inside the conversation")
    if text[after:pos] != conversation_preamble(not text.startswith("<!-- flow:entry ", pos)):
        report.warnings.append(
            f"{sc.path}:{sc.line_of(after)}: text between the Conversation heading and the first "
            "entry was edited; it is not part of any entry, so the edit has no effect."
        )
    return pos


def conversation_end(sc: Scanner, pos: int, run: Run, report: LoadReport) -> None:
    """Read the generated sections after the conversation, from ``pos``, and the end marker."""
    text = sc.text
    while not text.startswith("<!-- flow:end", pos):
        name, recorded, after = _section_marker(sc, pos)
        nxt = sc.next_marker(after)
        if nxt == -1:
            raise sc.truncated(f"it ends inside the {name} section (the end marker is missing)")
        _check_generated(sc, name, recorded, after, nxt, report)
        pos = nxt
    line, after = sc.line_at(pos)
    match = _END_RE.fullmatch(line)
    if match is None:
        raise sc.fail(
            ProgressFormatError, pos, "expected the end marker `<!-- flow:end seq=N -->`."
        )
    if text[after:].strip():
        raise sc.fail(
            ProgressFormatError,
            after,
            "text after the end marker belongs to no section; delete it (notes may go into a "
            "message of the conversation instead).",
        )
    run.journal_seq = int(match.group(1))
