"""Reading the entries of a progress file exactly as ``render`` writes them, straight from the
file's bytes: the quick path of the parser, which reads every entry of a long run.

An entry is read here when it is exactly as ``render`` writes it: its marker with the fields in
render's order and values render writes as they are (no percent-encoding); then the heading,
the line above a tool's fence (or a tool's whole one-line form) exactly as render generates
them from the marker; then a ``` fence of text, json or markdown, or, for a message, Markdown
that starts with neither space, backtick nor "<". Anything else (a hand edit, an encoded
value, an escaped fence, damage) is left to the line reader (``entryread``), which gives the
same result for the entries this reads (the agreement tests check both ways), and positioned
errors and warnings for the rest::

    stop = read_as_written(data, pos, transcript, digests, actual, starts)
"""

from __future__ import annotations

import re
from hashlib import sha256 as _sha256
from sys import intern
from typing import NamedTuple

from .digest import ENTRY_DIGEST_HEX, head_parts
from .entry import ROLES, WRITTEN_META, Role, defer_meta
from .model import Entry
from .rawtext import EMPTY_MESSAGE
from .render import (
    EMPTY_RESULT,
    FENCED_ARGUMENTS,
    TOOL_ROLES,
    heading_label,
    inline_arguments_ok,
    tool_line_around_call,
)

# The marker and heading of an entry as render writes them, in one match: the fields in
# render's order, values as they are (no percent-encoding, no "--": checked apart, faster).
_WRITTEN_MARKER = re.compile(
    rb"<!-- flow:entry ([1-9][0-9]*) ([a-z_]+)(?: step=(V))?(?: call=(V))?(?: tool=(V))?( error)?"
    rb"(?: sidecar=(V))?(?: sha256=(V))?(?: bytes=(0|[1-9][0-9]*))?"
    rb"(META)"
    rb" d=([0-9a-f]{16}) -->\n"
    rb"### ([^\n]*)\n\n".replace(b"V", rb"[A-Za-z0-9_.:/~+@,-]+")
    # The meta fields as render writes them, in the same match (their groups uncaptured).
    .replace(b"META", re.sub(rb"\((?!\?)", b"(?:", WRITTEN_META))
)
_WRITTEN_FENCE = re.compile(rb"(`{3,})(?:text|json|markdown)\n")
_NEXT_MARK = b"\n<!-- flow:"
_BLANK_THEN_MARK = b"\n" + _NEXT_MARK
_EMPTY_RESULT = f" {EMPTY_RESULT}".encode()
_NO_ARGUMENTS = b" no arguments."
_ROLE_NAMES: dict[bytes, Role] = {role.encode(): role for role in ROLES}  # type: ignore[misc]


def read_as_written(
    data: bytes,
    pos: int,
    transcript: list[Entry],
    digests: list[str],
    actual: list[str | None],
    starts: list[int],
) -> int:
    """Read entries from ``pos`` in ``data`` for as long as each is exactly as ``render``
    writes it and continues the ids; append them, their stored digests, their actual digests
    (hashed from the bytes as they are) and where each starts; return where they stop.

    This reads every entry of a long run, so it is written for speed, about 4 microseconds an
    entry: one call per entry (``_content``), the digest hashed from the bytes, and what the
    entries of one shape share built once (``_Shape``; a run has a few shapes).
    """
    shapes: dict[tuple[bytes | None, ...], _Shape] = {}
    match, find = _WRITTEN_MARKER.match, data.find
    expected = len(transcript) + 1
    while True:
        marker = match(data, pos)
        if marker is None:
            return pos
        number, role_b, step_b, call_b, tool_b, error, sidecar, sha, size, meta_b, stored, head = (
            marker.groups()
        )
        role = _ROLE_NAMES.get(role_b)
        if role is None or int(number) != expected or find(b"--", pos + 4, marker.end(11)) >= 0:
            return pos
        shape = (role_b, step_b, tool_b, error, sidecar, sha, size)
        known = shapes.get(shape)
        if known is None:
            known = shapes[shape] = _shape(role, *shape[1:])
        if head != number + known.label:
            return pos
        entry = Entry(
            expected,
            role,
            "",
            known.step,
            None if call_b is None else call_b.decode(),
            known.tool,
            error is not None,
            None if sidecar is None else sidecar.decode(),
            None if sha is None else sha.decode(),
            None if size is None else int(size),
        )
        head_end = known.head_end
        if meta_b:
            cost_at = meta_b.find(b" cost=")
            if cost_at >= 0:
                cost = meta_b[cost_at + 6 :].partition(b" ")[0]
                try:
                    if repr(float(cost)).encode() != cost:
                        return pos  # the line reader reads (or names) any other form
                except ValueError:
                    return pos
            defer_meta(entry, meta_b)
            # Values hold no space, ``=`` or ``"``: the tokens become the digest head's JSON
            # pairs as they are (``digest._head_by_json``'s form).
            pairs = meta_b[1:].replace(b"=", b'","').replace(b" ", b'"],["')
            head_end = head_end[:-2] + b',null,[["' + pairs + b'"]]]\n'
        try:
            content = _content(data, marker.end(), entry, call_b, known)
        except UnicodeDecodeError:
            return pos
        if content is None:
            return pos
        raw, end = content
        # entry_digest(entry, raw), from the bytes at hand: plain values need no JSON escape.
        call_json = b"null" if call_b is None else b'"' + call_b + b'"'
        digest = _sha256(b"[" + number + known.head_start + call_json + head_end)
        digest.update(raw)
        transcript.append(entry)
        digests.append(stored.decode())
        actual.append(digest.hexdigest()[:ENTRY_DIGEST_HEX])
        starts.append(pos)
        pos = end
        expected += 1


def _content(
    data: bytes, at: int, entry: Entry, call_b: bytes | None, known: _Shape
) -> tuple[bytes, int] | None:
    """Set the content of ``entry``, whose heading ends at ``at``, from the bytes after it;
    return those bytes (what its digest hashes) and where the next entry starts, or None where
    it is not exactly as render writes it (``UnicodeDecodeError`` where it is not UTF-8)."""
    role = entry.role
    if role in TOOL_ROLES:
        # The line above the fence, or the tool's whole one-line form.
        line_end = data.find(b"\n", at)
        if line_end < 0 or call_b is None or len(call_b) > 80:
            return None  # a call id render shortens: the line reader decides
        line = data[at:line_end]
        call_span = known.line_before + b"`" + call_b + b"`"
        if data.startswith(_BLANK_THEN_MARK, line_end):
            if role == "tool_result":
                if line != call_span + known.line_after + _EMPTY_RESULT:
                    return None
                return b"", line_end + 2
            rest = line[len(call_span) + len(known.call_head_after) :]
            if not line.startswith(call_span + known.call_head_after):
                return None
            if rest != _NO_ARGUMENTS:
                if rest[:2] != b" `" or rest[-2:] != b"`.":
                    return None
                entry.content = rest[2:-2].decode()
                if not inline_arguments_ok(entry.content):
                    return None
            return entry.content.encode(), line_end + 2
        if line != call_span + known.line_after or not data.startswith(b"\n\n", line_end):
            return None
        at = line_end + 2
    fence = _WRITTEN_FENCE.match(data, at)
    if fence is not None:
        # The first line from here that starts with the fence's backticks must close it:
        # exactly those backticks, a blank line, the next marker.
        ticks = fence.group(1)
        close = data.find(b"\n" + ticks, fence.end() - 1)
        end = close + 1 + len(ticks)
        if close < 0 or not data.startswith(_BLANK_THEN_MARK, end):
            return None
        raw = data[fence.end() : close]
        entry.content = raw.decode()
        return raw, end + 2
    # A message's Markdown, up to the next marker.
    end = data.find(_NEXT_MARK, at)
    if role in TOOL_ROLES or end < 0 or data[at : at + 1] in (b"`", b"<"):
        return None
    text = data[at:end].decode()
    if not text or text[0].isspace():
        return None
    text = text.strip()
    entry.content = "" if text == EMPTY_MESSAGE else text
    return entry.content.encode(), end + 1


class _Shape(NamedTuple):
    """What ``read_as_written`` builds once for the entries of one shape (role, step, tool,
    error and sidecar fields): the step and tool as strings, the heading after the id, the
    digest's head line and the tool line around the id or call id."""

    step: str | None
    tool: str | None
    #: The heading after the entry's id.
    label: bytes
    #: The digest's head line before and after the call id.
    head_start: bytes
    head_end: bytes
    #: For a tool entry: its line before and after the call id's code span, and for a call
    #: what its one-line form says between the call id and the arguments.
    line_before: bytes
    line_after: bytes
    call_head_after: bytes


def _shape(
    role: Role,
    step_b: bytes | None,
    tool_b: bytes | None,
    error: bytes | None,
    sidecar_b: bytes | None,
    sha_b: bytes | None,
    size_b: bytes | None,
) -> _Shape:
    """The ``_Shape`` of the entries with these marker fields (interning step and tool)."""
    step = None if step_b is None else intern(step_b.decode())
    tool = None if tool_b is None else intern(tool_b.decode())
    sidecar = None if sidecar_b is None else sidecar_b.decode()
    size = None if size_b is None else int(size_b)
    sha = None if sha_b is None else sha_b.decode()
    start, end = head_parts(role, step, tool, error is not None, sidecar, sha, size)
    before, after = tool_line_around_call(role, tool, error is not None, sidecar, size)
    return _Shape(
        step,
        tool,
        f" · {heading_label(role, step)}".encode(),
        start.encode(),
        end.encode() + b"\n",
        before.encode(),
        after.encode(),
        after.removesuffix(FENCED_ARGUMENTS).encode(),
    )
