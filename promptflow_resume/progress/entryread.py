"""Reading the entries of a progress file line by line: whatever is not exactly as ``render``
writes it (a hand edit, an encoded value, an escaped fence, damage).

Entries as render writes them are read from the bytes by ``aswritten``; from the first that is
not, ``read_entries`` reads each entry here (``read_entry``), with a positioned warning for an
edit that has no effect and a positioned error for what cannot be read::

    pos = read_entries(sc, pos, transcript, digests, actual, report, data, at)
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

from ..base.errors import DigestError, ProgressFormatError
from .aswritten import read_as_written
from .entry import FIELD_NAME, META_KEYS, ROLES, meta_from_fields
from .model import Entry, LoadReport
from .rawtext import EMPTY_MESSAGE, OWN_FENCE_INFOS
from .render import (
    EMPTY_RESULT,
    ESCAPED_INFO,
    TOOL_ROLES,
    call_head,
    heading,
    inline_arguments_ok,
    tool_line,
)
from .scanner import FIX_BODY, MARK, Scanner, skip_blank

_ENTRY_RE = re.compile(r"<!-- flow:entry ([0-9]+) ([a-z_]+)((?: [^ ]+)*?) d=([0-9a-f]{16}) -->")
#: The marker fields read above the entry's metadata (a malformed one is an error).
_FIELDS = frozenset({"step", "call", "tool", "sidecar", "sha256", "bytes", "covers"})
_COVERS = re.compile(r"[1-9][0-9]*-[1-9][0-9]*")
_FENCE_OPEN = re.compile(r"(`{3,})([^`]*)")


def _parse_marker(sc: Scanner, pos: int, line: str) -> tuple[Entry, str]:
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


def _fenced(
    sc: Scanner, entry: Entry, open_pos: int, ticks: int, info: str, body_start: int
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


def read_entry(sc: Scanner, pos: int, report: LoadReport) -> tuple[Entry, str, int]:
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
    pos = skip_blank(sc, after)
    if entry.role in TOOL_ROLES:
        pos, one_line = _tool_line(sc, entry, pos, report)
        if one_line:
            return entry, digest, pos
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
                skip_blank(sc, after_close),
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


def _tool_line(sc: Scanner, entry: Entry, pos: int, report: LoadReport) -> tuple[int, bool]:
    """Read the line of tool entry ``entry`` from ``pos`` (after its heading): the line above
    its fence, or its whole one-line form (then its content is set). Return where its fence
    starts and False, or where the next marker starts and True."""
    text = sc.text
    meta_start = pos
    while True:
        if pos >= len(text):
            raise sc.truncated(f"entry {entry.id} ends before its fenced block")
        line, after = sc.line_at(pos)
        if line.startswith("```") or line.startswith(MARK):
            break
        pos = after
    if line.startswith(MARK):
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
        return pos, True
    meta = text[meta_start:pos].strip()
    if meta != tool_line(entry):
        report.warnings.append(
            f"{sc.path}:{sc.line_of(meta_start)}: the line above the fence of entry {entry.id} "
            "was edited; it is generated from the flow:entry line, so the edit has no effect."
        )
    return pos, False


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


def _check_swallowed(sc: Scanner, transcript: list[Entry], next_pos: int) -> None:
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
            hint=FIX_BODY,
        )


def read_entries(
    sc: Scanner,
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
    ``render`` writes them are read from there by ``read_as_written``, the others (None:
    all) line by line by ``read_entry``.
    """
    text = sc.text
    while True:
        if data is not None:
            end = read_as_written(data, at, transcript, digests, actual, [])
            pos += len(data[at:end].decode("utf-8"))
            at = end
        if not text.startswith("<!-- flow:entry ", pos):
            return pos
        marker_pos = pos
        entry, digest, pos = read_entry(sc, pos, report)
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
