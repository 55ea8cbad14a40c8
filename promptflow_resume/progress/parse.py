"""Reading ``progress.md`` text back into a ``Run``: front matter, then a line scanner for the body.

The scanner looks only for our own markers (``<!-- flow:... -->`` lines at the start of a
line) and for the fences it wrote, never parsing Markdown. An entry exactly as ``render`` wrote
it is read straight from the file's bytes (``_read_as_written``) and hashed as it is; any other
entry (a hand edit, damage) is read line by line (``_entry``), which gives the same result for
the entries the first reads. Line numbers are counted only for a warning or an error, and
everything positioned names ``path:line:col``::

    run, report = parse(text, path="progress.md")
    report.edited_entries      # ids of entries changed by hand (their edits are in ``run``)
"""

from __future__ import annotations

import json
import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from hashlib import sha256 as _sha256
from pathlib import Path
from sys import intern
from typing import Any, NamedTuple, cast
from urllib.parse import unquote

from ..base import notices, yamlio
from ..base.errors import (
    DigestError,
    FlowError,
    ProgressFormatError,
    ProgressSchemaError,
    UnsupportedVersionError,
)
from ..base.textnorm import undo_checkout_newlines
from .digest import ENTRY_DIGEST_HEX, Chain, entry_digest, head_parts
from .frontmatter import normalize_yaml_values, read_front_matter
from .migrations import MIGRATIONS, Migration
from .model import (
    FIELD_NAME,
    FORMAT_MINOR,
    FORMAT_VERSION,
    META_KEYS,
    ROLES,
    WRITTEN_META,
    Entry,
    LoadReport,
    Role,
    Run,
    defer_meta,
    meta_from_fields,
)
from .rawtext import EMPTY_MESSAGE, OWN_FENCE_INFOS
from .render import (
    EMPTY_RESULT,
    ESCAPED_INFO,
    FENCED_ARGUMENTS,
    INPUT_TABLE_HEADER,
    TOOL_ROLES,
    call_head,
    conversation_preamble,
    heading,
    heading_label,
    inline_arguments_ok,
    input_rows,
    section_digest,
    tool_line,
    tool_line_around_call,
)
from .schema import validate_front_matter
from .sidecar import check_link
from .versions import format_notice, format_text, newer_format_error

_MARK = "<!-- flow:"
_ENTRY_RE = re.compile(r"<!-- flow:entry ([0-9]+) ([a-z_]+)((?: [^ ]+)*?) d=([0-9a-f]{16}) -->")
_SECTION_RE = re.compile(r"<!-- flow:section ([a-z]+)(?: d=([0-9a-f]{16}))?(?: .*)? -->")
#: The marker fields read above the entry's metadata (a malformed one is an error).
_FIELDS = frozenset({"step", "call", "tool", "sidecar", "sha256", "bytes", "covers"})
_COVERS = re.compile(r"[1-9][0-9]*-[1-9][0-9]*")
_END_RE = re.compile(r"<!-- flow:end seq=([0-9]+) -->")
_FENCE_OPEN = re.compile(r"(`{3,})([^`]*)")
# An entry exactly as ``render`` writes it is read by ``_read_as_written`` straight from the
# file's bytes: its marker with the fields in render's order and values render writes as they
# are (no percent-encoding); then the heading, the line above a tool's fence (or a tool's whole
# one-line form) exactly as render generates them from the marker; then a ``` fence of text,
# json or markdown, or, for a message, Markdown that starts with neither space, backtick nor
# "<". Anything else (a hand edit, an encoded value, an escaped fence, damage) is left to the
# line reader ``_entry``, which gives the same result for the entries this reads (the
# agreement tests check both ways), and positioned errors and warnings for the rest.
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
_id_of = operator.attrgetter("id")
_sidecar_of = operator.attrgetter("sidecar")
_EMPTY_RESULT = f" {EMPTY_RESULT}".encode()
_NO_ARGUMENTS = b" no arguments."
_ROLE_NAMES: dict[bytes, Role] = {role.encode(): role for role in ROLES}  # type: ignore[misc]
_FIX_BODY = (
    "Restore the file from version control, or undo the edit around that line; "
    "only the text of entries may be edited, keeping each flow:entry line and fence."
)


@dataclass
class Parsed:
    """Everything parsing found: the run, the report, and the digests the file recorded."""

    run: Run
    report: LoadReport
    #: Per-entry digests as written in the file (what the front matter's root chains over).
    stored_digests: list[str] = field(default_factory=list)
    #: Per-entry digests of the entries as read (``entry_digest``; differ where edited).
    actual_digests: list[str] = field(default_factory=list)
    #: The chain over ``stored_digests`` (its root is the front matter's transcript digest).
    chain: Chain = field(default_factory=Chain)
    #: Byte offsets in the file where each of the first entries' blocks starts, then where the
    #: last of them ends: the entries read straight from the bytes, as flow writes them (a
    #: writer reuses the bytes of those unedited when it folds). Empty for a whole-text parse.
    entry_spans: list[int] = field(default_factory=list)


class _Scanner:
    """Positions and errors over one text."""

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def line_at(self, pos: int) -> tuple[str, int]:
        """The line starting at ``pos`` and the position after its newline (or len)."""
        end = self.text.find("\n", pos)
        if end == -1:
            return self.text[pos:], len(self.text)
        return self.text[pos:end], end + 1

    def next_marker(self, pos: int) -> int:
        """Start of the next line at or after ``pos`` (a line start) that begins a marker."""
        if self.text.startswith(_MARK, pos):
            return pos
        found = self.text.find("\n" + _MARK, pos)
        return -1 if found == -1 else found + 1

    def fail(
        self,
        cls: type[ProgressFormatError] | type[DigestError],
        pos: int,
        message: str,
        hint: str = _FIX_BODY,
    ) -> Exception:
        return cls(message, path=self.path, line=self.line_of(pos), column=1, hint=hint)

    def truncated(self, what: str) -> ProgressFormatError:
        return ProgressFormatError(
            f"the file is truncated: {what}.",
            path=self.path,
            line=self.line_of(len(self.text)),
            column=1,
            hint=(
                "Restore it from version control or a backup; a file cut short cannot be "
                "resumed safely."
            ),
        )


def _migrate(
    data: dict[str, Any], body: str, version: int, path: str, line: int | None
) -> tuple[dict[str, Any], str]:
    if version > FORMAT_VERSION:
        raise newer_format_error(version, data.get("min_flow"), path=path, line=line)
    while version < FORMAT_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise UnsupportedVersionError(
                f"format version {version} is not one this flow can read or upgrade "
                f"(it reads version {FORMAT_VERSION}).",
                path=path,
                line=line,
                column=1,
                field="$.flow_progress",
                hint=(
                    f"Set flow_progress: {FORMAT_VERSION} only if the file really is in "
                    "that format."
                ),
            )
        data, body = step(data, body)
        version += 1
    return data, body


#: A front matter longer than this is refused before it is parsed: flow's holds the checkpoint
#: only (a few KB, tens of KB for a run of many steps), while the body may be large.
MAX_FRONT_MATTER_CHARS = 8 * 1024 * 1024


def _front_matter(sc: _Scanner) -> tuple[dict[str, Any], str, int]:
    """The front matter dict, its text, and where the body starts."""
    text = sc.text
    if not text or text.isspace():  # not text.strip(): that copies a large file
        raise ProgressFormatError(
            "the file is empty.",
            path=sc.path,
            hint=(
                "A progress file is written by `flow run`; restore this one from version "
                "control or start a new run."
            ),
        )
    if not text.startswith("---\n"):
        raise ProgressFormatError(
            "this is not a flow progress file: it does not start with a front matter block "
            "(a first line `---`).",
            path=sc.path,
            line=1,
            column=1,
            hint="Pass the progress.md a run wrote (under .flow/runs/<run-id>/ by default).",
        )
    end = text.find("\n---\n", 3)
    if end == -1:
        if text.endswith("\n---"):
            end = len(text) - 4
        else:
            raise sc.truncated("its front matter never ends (no closing `---` line)")
    source = text[4 : end + 1]
    if len(source) > MAX_FRONT_MATTER_CHARS:
        raise ProgressFormatError(
            f"the front matter is {len(source) / 1_000_000:.1f} MB, over the "
            f"{MAX_FRONT_MATTER_CHARS // (1024 * 1024)} MiB limit for a front matter; it was "
            "not parsed.",
            path=sc.path,
            line=1,
            column=1,
            hint="flow's front matter holds the checkpoint only (the conversation is in the "
            "body, large outputs in sidecar files); restore the file from version control.",
        )
    data = yamlio.load(source, path=sc.path, line_offset=1, unique_keys=True)
    if not isinstance(data, dict):
        raise ProgressFormatError(
            "the front matter is not a YAML mapping of keys to values.",
            path=sc.path,
            line=2,
            column=1,
            hint="Restore the front matter from version control.",
        )
    return data, source, end + 5


def _version_line(source: str) -> int | None:
    match = re.search(r"^flow_progress\s*:", source, re.MULTILINE)
    return source.count("\n", 0, match.start()) + 2 if match else None


def _check_version(data: dict[str, Any], source: str, path: str) -> int:
    if "flow_progress" not in data:
        raise ProgressFormatError(
            "this is not a flow progress file: its front matter has no `flow_progress` key.",
            path=path,
            line=2,
            column=1,
            field="$.flow_progress",
            hint="Pass the progress.md a run wrote; workflow files are checked with `flow check`.",
        )
    version = data["flow_progress"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise UnsupportedVersionError(
            f"expected a whole number format version; found {version!r}.",
            path=path,
            line=_version_line(source),
            column=1,
            field="$.flow_progress",
            hint=f"This flow writes and reads flow_progress: {FORMAT_VERSION}.",
        )
    return version


def _parse_marker(sc: _Scanner, pos: int, line: str) -> tuple[Entry, str]:
    match = _ENTRY_RE.fullmatch(line)
    if match is None:
        raise sc.fail(
            ProgressFormatError,
            pos,
            "this flow:entry line is malformed; expected "
            "`<!-- flow:entry <id> <role> [fields] d=<16 hex digits> -->`.",
        )
    entry_id, role, rest, digest = match.groups()
    if role not in ROLES:
        raise sc.fail(
            ProgressFormatError,
            pos,
            f"unknown entry role {role!r}; expected one of {', '.join(ROLES)}.",
        )
    entry = Entry(id=int(entry_id), role=role, content="")  # type: ignore[arg-type]
    meta: dict[str, str] = {}
    for token in rest.split():
        key, eq, value = token.partition("=")
        if not eq:
            if key == "error":
                entry.is_error = True
                continue
            raise sc.fail(
                ProgressFormatError, pos, f"unknown flag {key!r} on this flow:entry line."
            )
        try:
            value = unquote(value, errors="surrogatepass")
        except UnicodeDecodeError:
            raise sc.fail(
                ProgressFormatError,
                pos,
                f"the field {token!r} on this flow:entry line is not percent-encoded UTF-8 "
                "(a %XX sequence was cut or changed).",
            ) from None
        if key == "step":
            entry.step = value
        elif key == "call":
            entry.call_id = value
        elif key == "tool":
            entry.tool = value
        elif key == "sidecar":
            entry.sidecar = value
        elif key == "sha256":
            entry.sidecar_sha256 = value
        elif key == "bytes" and value.isdigit():
            entry.sidecar_bytes = int(value)
        elif key == "covers" and _COVERS.fullmatch(value):
            first, _, last = value.partition("-")
            if not int(first) <= int(last) < entry.id:
                raise sc.fail(
                    ProgressFormatError,
                    pos,
                    f"the field {token!r} on this flow:entry line names entries {first} to "
                    f"{last}; a compaction covers earlier entries, first id not above the last.",
                )
            entry.covers = (int(first), int(last))
        elif (
            key in META_KEYS or (FIELD_NAME.fullmatch(key) and key not in _FIELDS)
        ) and key not in meta:
            # A field this flow does not know is a newer flow's: kept (docs/spec.md 2.5). One
            # it knows with a malformed value is not.
            meta[key] = value
        else:
            raise sc.fail(
                ProgressFormatError,
                pos,
                f"unknown or malformed field {token!r} on this flow:entry line.",
            )
    if meta:
        try:
            entry.meta = meta_from_fields(meta)
        except ValueError as error:
            raise sc.fail(
                ProgressFormatError, pos, f"malformed field on this flow:entry line: {error}."
            ) from None
    return entry, digest


def _skip_blank(sc: _Scanner, pos: int) -> int:
    text = sc.text
    while pos < len(text):
        line, after = sc.line_at(pos)
        if line.strip():
            return pos
        pos = after
    return pos


def _fenced(
    sc: _Scanner, entry: Entry, open_pos: int, ticks: int, info: str, body_start: int
) -> tuple[str, int]:
    """Content of the fence opened at ``open_pos``; returns it and the position after the close."""
    text = sc.text
    needle = "\n" + "`" * ticks
    q = body_start - 1
    while True:
        q = text.find(needle, q)
        if q == -1:
            raise sc.truncated(
                f"the fence of entry {entry.id} opened on line {sc.line_of(open_pos)} "
                "is never closed"
            )
        close, after = sc.line_at(q + 1)
        if close.rstrip(" \t").strip("`") == "":
            break
        q += 1
    body = text[body_start:q] if q >= body_start else ""
    if info == ESCAPED_INFO:
        pieces = []
        for offset, line in enumerate(body.split("\n") if body else []):
            try:
                piece = json.loads(line)
            except (ValueError, RecursionError):  # deep nesting: not a string literal either
                piece = None
            if not isinstance(piece, str):
                raise ProgressFormatError(
                    f"entry {entry.id} is in escaped form, so each line of its fence must be one "
                    'JSON string literal such as "text\\n"; this line is not.',
                    path=sc.path,
                    line=sc.line_of(body_start) + offset,
                    column=1,
                    hint=(
                        'Fix the quoting on that line (escape " as \\" and \\ as \\\\), '
                        "or restore the file."
                    ),
                )
            pieces.append(piece)
        body = "".join(pieces)
    return body, after


def _read_as_written(
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

    One loop, without a function call per entry (the digest is hashed here from the bytes,
    what a shape shares is built once): this reads every entry of a long run, so it is
    written for speed, about 4 microseconds an entry.
    """
    # What entries of one shape (role, step, tool, error and sidecar fields) share: the step
    # and tool as strings, the heading after the id, the digest's head line and the tool
    # line around the id or call id. A run has a few shapes.
    shapes: dict[tuple[bytes | None, ...], _Shape] = {}
    match, fence_match = _WRITTEN_MARKER.match, _WRITTEN_FENCE.match
    find, startswith = data.find, data.startswith
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
        at = marker.end()
        raw: bytes | None = None
        try:
            if role in TOOL_ROLES:
                # The line above the fence, or the tool's whole one-line form.
                line_end = find(b"\n", at)
                if line_end < 0 or call_b is None or len(call_b) > 80:
                    return pos  # a call id render shortens: the line reader decides
                line = data[at:line_end]
                call_span = known.line_before + b"`" + call_b + b"`"
                if startswith(_BLANK_THEN_MARK, line_end):
                    if role == "tool_result":
                        if line != call_span + known.line_after + _EMPTY_RESULT:
                            return pos
                        raw = b""
                    else:
                        rest = line[len(call_span) + len(known.call_head_after) :]
                        if not line.startswith(call_span + known.call_head_after):
                            return pos
                        if rest != _NO_ARGUMENTS:
                            if rest[:2] != b" `" or rest[-2:] != b"`.":
                                return pos
                            entry.content = rest[2:-2].decode()
                            if not inline_arguments_ok(entry.content):
                                return pos
                        raw = entry.content.encode()
                    end = line_end + 2
                elif line != call_span + known.line_after or not startswith(b"\n\n", line_end):
                    return pos
                else:
                    at = line_end + 2
            if raw is None:
                fence = fence_match(data, at)
                if fence is not None:
                    # The first line from here that starts with the fence's backticks must
                    # close it: exactly those backticks, a blank line, the next marker.
                    ticks = fence.group(1)
                    close = find(b"\n" + ticks, fence.end() - 1)
                    end = close + 1 + len(ticks)
                    if close < 0 or not startswith(_BLANK_THEN_MARK, end):
                        return pos
                    raw = data[fence.end() : close]
                    entry.content = raw.decode()
                    end += 2
                else:
                    # A message's Markdown, up to the next marker.
                    end = find(_NEXT_MARK, at)
                    if role in TOOL_ROLES or end < 0 or data[at : at + 1] in (b"`", b"<"):
                        return pos
                    text = data[at:end].decode()
                    if not text or text[0].isspace():
                        return pos
                    text = text.strip()
                    entry.content = "" if text == EMPTY_MESSAGE else text
                    raw = entry.content.encode()
                    end += 1
        except UnicodeDecodeError:
            return pos
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


class _Shape(NamedTuple):
    """What ``_read_as_written`` builds once for the entries of one shape."""

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


def _entry(sc: _Scanner, pos: int, report: LoadReport) -> tuple[Entry, str, int]:
    """Parse the entry whose marker line starts at ``pos``; return it, its digest, next marker."""
    text = sc.text
    line, after = sc.line_at(pos)
    entry, digest = _parse_marker(sc, pos, line)
    head_pos = after
    head, after = sc.line_at(head_pos)
    if not head.startswith("#"):
        raise sc.fail(
            ProgressFormatError,
            head_pos,
            f"expected the heading of entry {entry.id} (a line like `{heading(entry)}`) "
            "right after its flow:entry line.",
        )
    if head != heading(entry):
        report.warnings.append(
            f"{sc.path}:{sc.line_of(head_pos)}: the heading of entry {entry.id} was edited; "
            "headings are labels generated from the flow:entry line, so the edit has no effect."
        )
    pos = _skip_blank(sc, after)
    if entry.role in TOOL_ROLES:
        meta_start = pos
        while True:
            if pos >= len(text):
                raise sc.truncated(f"entry {entry.id} ends before its fenced block")
            line, after = sc.line_at(pos)
            if line.startswith("```") or line.startswith(_MARK):
                break
            pos = after
        if line.startswith(_MARK):
            one = _one_line_content(entry, text[meta_start:pos].strip())
            if one is None:
                raise sc.fail(
                    ProgressFormatError,
                    pos,
                    f"entry {entry.id} ({entry.role.replace('_', ' ')}) has no fenced block; its "
                    "arguments or output must stay inside a ``` fence (or, for short arguments, "
                    "in the backticks of its `Call … with `…`.` line).",
                )
            entry.content, unedited = one
            if not unedited:
                report.warnings.append(
                    f"{sc.path}:{sc.line_of(meta_start)}: the line of entry {entry.id} was "
                    "edited outside its backticks; the call id and tool come from the flow:entry "
                    "line, so that edit has no effect."
                )
            return entry, digest, pos
        meta = text[meta_start:pos].strip()
        if meta != tool_line(entry):
            report.warnings.append(
                f"{sc.path}:{sc.line_of(meta_start)}: the line above the fence of entry {entry.id} "
                "was edited; it is generated from the flow:entry line, so the edit has no effect."
            )
    if pos >= len(text):
        raise sc.truncated(f"it ends inside entry {entry.id}")
    line, after = sc.line_at(pos)
    opening = _FENCE_OPEN.fullmatch(line)
    info = opening.group(2).strip() if opening else ""
    if opening and (info in OWN_FENCE_INFOS or entry.role in TOOL_ROLES):
        content, after_close = _fenced(sc, entry, pos, len(opening.group(1)), info, after)
        nxt = sc.next_marker(after_close)
        if nxt == -1:
            raise sc.truncated(f"it ends after entry {entry.id} without the end marker")
        if text[after_close:nxt].strip():
            raise sc.fail(
                ProgressFormatError,
                _skip_blank(sc, after_close),
                f"this text follows the closing fence of entry {entry.id} and belongs to no "
                "entry; move it inside the fence or delete it.",
            )
        entry.content = content
        return entry, digest, nxt
    if entry.role in TOOL_ROLES:
        raise sc.fail(
            ProgressFormatError, pos, f"entry {entry.id} must keep its content in a ``` fence."
        )
    nxt = sc.next_marker(pos)
    if nxt == -1:
        raise sc.truncated(f"it ends inside entry {entry.id}")
    entry.content = text[pos:nxt].strip()
    if entry.content == EMPTY_MESSAGE:
        entry.content = ""
    return entry, digest, nxt


_ONE_LINE_CALL = re.compile(r"(.*) with (?:`([^`]+)`|no arguments)\.")


def _one_line_content(entry: Entry, line: str) -> tuple[str, bool] | None:
    """The content of a tool entry written on one line (no fence) and whether its generated
    part is unedited; None if ``line`` is not such a line (a call with no or short arguments,
    or a result with no output)."""
    if entry.role == "tool_result":
        if line.endswith(f": {EMPTY_RESULT}"):
            return "", line == f"{tool_line(entry)} {EMPTY_RESULT}"
        return None
    match = _ONE_LINE_CALL.fullmatch(line)
    if match is None or not match.group(1).startswith("Call "):
        return None
    arguments = match.group(2) or ""
    # Any length: a hand edit may lengthen the arguments (the next write fences them).
    if arguments and not inline_arguments_ok(arguments, limit=len(arguments)):
        return None
    return arguments, f"{match.group(1)} with" == call_head(entry)


def _check_swallowed(sc: _Scanner, transcript: list[Entry], next_pos: int) -> None:
    """Name an unclosed fence when the entry before a gap in the ids holds the missing marker."""
    if not transcript:
        return
    missing = f"<!-- flow:entry {len(transcript) + 1} "
    previous = transcript[-1]
    if previous.content.startswith(missing) or ("\n" + missing) in previous.content:
        start = sc.text.rfind(f"\n<!-- flow:entry {previous.id} ", 0, next_pos) + 1
        fence = sc.text.find("\n```", start) + 1
        raise ProgressFormatError(
            f"the fence of entry {previous.id} opened on line {sc.line_of(fence)} is not closed "
            f"before entry {len(transcript) + 1}, so it swallows that entry (its closing fence "
            "was deleted or shortened).",
            path=sc.path,
            line=sc.line_of(fence),
            column=1,
            hint=_FIX_BODY,
        )


def _section_marker(sc: _Scanner, pos: int) -> tuple[str, str | None, int]:
    line, after = sc.line_at(pos)
    match = _SECTION_RE.fullmatch(line)
    if match is None:
        raise sc.fail(
            ProgressFormatError, pos, "expected a `<!-- flow:section NAME ... -->` line here."
        )
    return match.group(1), match.group(2), after


def _check_generated(
    sc: _Scanner, name: str, recorded: str | None, start: int, end: int, report: LoadReport
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
    sc: _Scanner, recorded: str | None, start: int, end: int, run: Run, report: LoadReport
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


def _conversation_start(
    sc: _Scanner, start: int, report: LoadReport, run: Run | None = None
) -> int:
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


def _conversation_end(sc: _Scanner, pos: int, run: Run, report: LoadReport) -> None:
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


def _body(
    sc: _Scanner, start: int, run: Run, report: LoadReport
) -> tuple[list[str], list[str | None]]:
    """Scan the body from ``start``; fill ``run.transcript``; return the stored digests and
    the actual ones known so far (None where ``_verify`` must compute them)."""
    pos = _conversation_start(sc, start, report, run)
    digests: list[str] = []
    actual: list[str | None] = []
    try:
        data: bytes | None = sc.text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (text handed in, not read from a file)
        data = None
    at = len(sc.text[:pos].encode("utf-8", "surrogatepass"))
    pos = _entries(sc, pos, run.transcript, digests, actual, report, data, at)
    _conversation_end(sc, pos, run, report)
    return digests, actual


def _entries(
    sc: _Scanner,
    pos: int,
    transcript: list[Entry],
    digests: list[str],
    actual: list[str | None],
    report: LoadReport,
    data: bytes | None,
    at: int,
) -> int:
    """Read the entries from ``pos`` on, appending to ``transcript``, ``digests`` (as stored)
    and ``actual`` (None where not computed yet); return where the conversation ends.

    ``data`` is ``sc.text`` in UTF-8 and ``at`` the offset of ``pos`` in it: entries as
    ``render`` writes them are read from there by ``_read_as_written``, the others (None:
    all) line by line by ``_entry``.
    """
    text = sc.text
    while True:
        if data is not None:
            end = _read_as_written(data, at, transcript, digests, actual, [])
            pos += len(data[at:end].decode("utf-8"))
            at = end
        if not text.startswith("<!-- flow:entry ", pos):
            return pos
        marker_pos = pos
        entry, digest, pos = _entry(sc, pos, report)
        if entry.id != len(transcript) + 1:
            _check_swallowed(sc, transcript, marker_pos)
            raise DigestError(
                f"entry ids must count up from 1 in order; expected entry {len(transcript) + 1} "
                f"here but found entry {entry.id}: entries were deleted, duplicated or moved.",
                path=sc.path,
                line=sc.line_of(marker_pos),
                column=1,
                hint=(
                    "Restore the file from version control; to drop the end of a run use "
                    "`flow rewind`."
                ),
            )
        if entry.meta is not None and entry.meta.extra:
            fields = ", ".join(key for key, _ in entry.meta.extra)
            report.unknown.append(f"entry {entry.id}: {fields}")
        transcript.append(entry)
        digests.append(digest)
        actual.append(None)
        if data is not None:
            at += len(text[marker_pos:pos].encode("utf-8"))


def _locate_entries(sc: _Scanner, ids: list[int]) -> dict[int, int]:
    """Line numbers of the markers of entries ``ids`` (computed only when needed)."""
    wanted = set(ids)
    out: dict[int, int] = {}
    for match in re.finditer(r"^<!-- flow:entry ([0-9]+) ", sc.text, re.MULTILINE):
        entry_id = int(match.group(1))
        if entry_id in wanted and entry_id not in out:
            out[entry_id] = sc.line_of(match.start())
    return out


def _verify(
    sc: _Scanner,
    fm: dict[str, Any],
    source: str,
    run: Run,
    digests: list[str],
    known: list[str | None],
    report: LoadReport,
) -> tuple[list[str], Chain]:
    """Check the transcript against its digests and the front matter; report hand edits;
    return the actual digest of every entry and the chain over the stored ones."""
    recorded = fm["transcript"]
    actual = [
        entry_digest(e) if a is None else a for e, a in zip(run.transcript, known, strict=True)
    ]
    edited = [e.id for e, a, d in zip(run.transcript, actual, digests, strict=True) if a != d]
    count = len(run.transcript)
    fm_line = re.search(r"^transcript\s*:", source, re.MULTILINE)
    fm_lineno = source.count("\n", 0, fm_line.start()) + 2 if fm_line else None
    if count != recorded["entries"]:
        missing = (
            "missing (deleted, or the file was cut short)"
            if count < recorded["entries"]
            else "unexpected (added by hand)"
        )
        raise DigestError(
            f"the front matter records {recorded['entries']} transcript entries but the body "
            f"has {count}: entries are {missing}.",
            path=sc.path,
            line=fm_lineno,
            column=1,
            field="$.transcript.entries",
            hint=(
                "Restore the file from version control. Entries cannot be added or removed by "
                "hand; to continue from an earlier point use `flow rewind`."
            ),
        )
    chain = Chain(zip((e.id for e in run.transcript), digests, strict=True))
    if chain.root() != recorded["digest"]:
        lines = _locate_entries(sc, edited[:1])
        suspect = (
            f" Entry {edited[0]}'s d= value does not match its text, so its d= value was "
            "probably changed."
            if edited
            else ""
        )
        raise DigestError(
            "the digests on the flow:entry lines do not add up to the front matter's "
            "transcript.digest: a d= value was changed, or entries were reordered or replaced "
            "(this is corruption, not an ordinary edit of a message)." + suspect,
            path=sc.path,
            line=lines.get(edited[0]) if edited else fm_lineno,
            column=1,
            field="$.transcript.digest",
            hint=(
                "Restore the file from version control. To change a message, edit its text "
                "and leave the flow:entry line as it is."
            ),
        )
    if edited:
        report.edited_entries.extend(edited)
        where = _locate_entries(sc, edited)
        for entry_id in edited:
            entry = run.transcript[entry_id - 1]
            report.warnings.append(
                f"{sc.path}:{where.get(entry_id, '?')}: entry {entry_id} "
                f"({entry.role.replace('_', ' ')}"
                f"{', step ' + entry.step if entry.step else ''}) was edited by hand; the edited "
                "text is what the model sees on resume."
            )
    stem = Path(sc.path).name.removesuffix(".md")
    for entry in run.transcript:
        if entry.sidecar is not None:
            problem = check_link(entry.sidecar, stem)
            if problem is not None:
                from ..base.errors import SidecarError

                line = _locate_entries(sc, [entry.id]).get(entry.id)
                raise SidecarError(
                    f"entry {entry.id} links to the sidecar {entry.sidecar!r}, which {problem}.",
                    path=sc.path,
                    line=line,
                    column=1,
                    hint=(
                        f"Sidecar links must name a file directly inside {stem}.files/; "
                        "restore the flow:entry line."
                    ),
                )
    return actual, chain


def parse_document(text: str, *, path: str | Path = "progress.md") -> Parsed:
    """Parse a whole progress file; see ``parse``. Also returns the digests the file recorded."""
    where = str(path)
    sc = _Scanner(undo_checkout_newlines(text), where)
    data, source, body_start = _front_matter(sc)
    version = _check_version(data, source, where)
    if version != FORMAT_VERSION:
        body = sc.text[body_start:]
        data, body = _migrate(data, body, version, where, _version_line(source))
        sc = _Scanner(sc.text[:body_start] + body, where)
    run = read_front_matter(data, path=where, source=source, line_offset=1)
    report = _report(run, version, data)
    digests, known = _body(sc, body_start, run, report)
    actual, chain = _verify(sc, data, source, run, digests, known, report)
    _tell(where, report)
    return Parsed(run, report, stored_digests=digests, actual_digests=actual, chain=chain)


def _report(run: Run, version: int, data: dict[str, Any]) -> LoadReport:
    """A new load report naming the format the file was written in and the keys it holds
    that this flow does not know."""
    minor = data.get("flow_progress_minor") if version == FORMAT_VERSION else None
    written_in = format_text(version, minor if isinstance(minor, int) else None)
    return LoadReport(format=written_in, unknown=list(run.kept.paths) if run.kept else [])


def _tell(path: str, report: LoadReport) -> None:
    """Tell once that the file holds what this flow does not know (``notices``)."""
    text = format_notice(path, report.format, report.unknown)
    if text is not None:
        notices.notify(f"format:{os.path.abspath(path)}", text)


def parse_bytes(
    data: bytes,
    *,
    path: str | Path = "progress.md",
    decode: Callable[[bytes], str] | None = None,
) -> Parsed:
    """Parse the bytes of a progress file: the result of ``parse_document(decode(data))``
    (``decode`` defaults to strict UTF-8; the store's names the position of a bad byte).

    The entries of a file as flow wrote it are read straight from the bytes, hashed as they
    are and decoded one by one, so a long file is never decoded whole. The text is decoded
    whole, and read as ``parse_document`` reads it, from the first thing that is not as flow
    wrote it (a hand edit, damage), so every warning and error names its place in the file.
    """
    where = str(path)

    def whole() -> _Scanner:
        return _Scanner(decode(data) if decode is not None else data.decode("utf-8"), where)

    first = data.find(b"\n<!-- flow:entry ") + 1
    if not data.startswith(b"---\n") or first == 0:
        # Not a file flow wrote as it is (a byte order mark, CRLF line ends, no entries ...).
        return parse_document(whole().text, path=path)
    try:
        # Everything up to the first entry's marker, decoded, is the start of the text
        # parse_document reads: the same positions, the same results.
        head = _Scanner(data[: first + len(b"<!-- flow:entry ")].decode("utf-8"), where)
        fm, source, body_start = _front_matter(head)
        if _check_version(fm, source, where) != FORMAT_VERSION:
            return parse_document(whole().text, path=path)
        run = read_front_matter(fm, path=where, source=source, line_offset=1)
        report = _report(run, FORMAT_VERSION, fm)
        at = _conversation_start(head, body_start, report, run)  # counts characters, not bytes
    except (FlowError, UnicodeDecodeError):
        # Reported with its place in the whole file (the front matter might even run past
        # this start).
        return parse_document(whole().text, path=path)
    if at != len(head.text) - len("<!-- flow:entry "):
        return parse_document(whole().text, path=path)
    digests: list[str] = []
    actual: list[str | None] = []
    starts: list[int] = []
    end = _read_as_written(data, first, run.transcript, digests, actual, starts)
    read_to_end = False
    if not data.startswith(b"<!-- flow:entry ", end):
        # The sections after the conversation, read on their own (their positions would be
        # wrong in a warning or an error, so those are left to the whole text).
        try:
            tail_report = LoadReport()
            _conversation_end(_Scanner(data[end:].decode("utf-8"), where), 0, run, tail_report)
            read_to_end = not tail_report.warnings
        except (FlowError, UnicodeDecodeError):
            pass
    sc: _Scanner | None = None
    if not read_to_end:
        # From ``end`` on, read the whole text as parse_document does.
        sc = whole()
        pos = len(data[:end].decode("utf-8"))
        pos = _entries(sc, pos, run.transcript, digests, actual, report, data, end)
        _conversation_end(sc, pos, run, report)
    recorded = fm["transcript"]
    chain = Chain(zip(map(_id_of, run.transcript), digests, strict=True))
    stem = Path(where).name.removesuffix(".md")
    if (
        sc is None
        and actual == digests  # so none is None
        and recorded["entries"] == len(run.transcript)
        and recorded["digest"] == chain.root()
        and not (
            any(map(_sidecar_of, run.transcript))
            and any(e.sidecar is not None and check_link(e.sidecar, stem) for e in run.transcript)
        )
    ):
        known = cast(list[str], actual)
        _tell(where, report)
        return Parsed(run, report, digests, known, chain, entry_spans=[*starts, end])
    # Edits or damage: _verify reports them with their places in the whole file.
    checked, chain = _verify(sc or whole(), fm, source, run, digests, actual, report)
    spans = [*starts, end] if starts else []
    _tell(where, report)
    return Parsed(run, report, digests, checked, chain, entry_spans=spans)


def check_strict(text: str, report: LoadReport | None, *, path: str | Path = "progress.md") -> None:
    """Raise ``ProgressSchemaError`` naming each part of a file that this flow does not write
    itself: keys and entry marker fields it does not know, and a newer minor (``flow validate
    --strict``, docs/spec.md 2.5), with every other problem of its front matter. ``report`` is
    the file's load report, None when it did not load (the front matter alone is checked)."""
    where = str(path)
    ours = format_text(FORMAT_VERSION, FORMAT_MINOR)
    if report is not None and not report.unknown and report.format == ours:
        return
    sc = _Scanner(undo_checkout_newlines(text), where)
    data, source, _ = _front_matter(sc)
    version = _check_version(data, source, where)
    data, _ = _migrate(data, "", version, where, _version_line(source))
    problems: list[FlowError] = []
    try:
        validate_front_matter(normalize_yaml_values(data), path=where, source=source, line_offset=1)
    except ProgressSchemaError as error:
        problems.extend(error.problems)
    minor = data.get("flow_progress_minor")
    if isinstance(minor, int) and minor > FORMAT_MINOR:
        line = re.search(r"^flow_progress_minor\s*:", source, re.MULTILINE)
        problems.append(
            FlowError(
                f"the file is of minor {minor}, newer than this flow writes ({FORMAT_MINOR}).",
                path=where,
                line=source.count("\n", 0, line.start()) + 2 if line else None,
                column=1 if line else None,
                field="$.flow_progress_minor",
            )
        )
    marked = [u for u in (report.unknown if report else []) if u.startswith("entry ")]
    lines = _locate_entries(sc, [int(u.split()[1].rstrip(":")) for u in marked])
    for item in marked:
        number, _, names = item[len("entry ") :].partition(": ")
        problems.append(
            FlowError(
                f"entry {number}'s flow:entry line has fields this flow does not know: {names}.",
                path=where,
                line=lines.get(int(number)),
                column=1,
            )
        )
    if not problems:
        return
    problems.sort(key=lambda problem: problem.line or 0)
    first = problems[0]
    more = len(problems) - 1
    raise ProgressSchemaError(
        first.message + (f" ({more} more problem{'s' if more > 1 else ''}.)" if more else ""),
        problems=problems,
        path=where,
        line=first.line,
        column=first.column,
        field=first.field,
        hint=(
            f"--strict accepts only what this flow writes (progress format {ours}); without "
            "it the file is read and what this flow does not know is kept as it is."
        ),
    )


def parse(text: str, *, path: str | Path = "progress.md") -> tuple[Run, LoadReport]:
    """Parse progress-file ``text`` into a ``Run`` (with transcript) and a ``LoadReport``.

    Raises a ``ProgressFormatError``, ``ProgressSchemaError``, ``UnsupportedVersionError``,
    ``DigestError`` or ``SidecarError`` (link shape only; files are checked by
    ``load_progress``) naming ``path:line:col``.
    """
    parsed = parse_document(text, path=path)
    return parsed.run, parsed.report


__all__ = [
    "MIGRATIONS",
    "Migration",
    "Parsed",
    "check_strict",
    "parse",
    "parse_bytes",
    "parse_document",
]
