"""Reading ``progress.md`` text back into a ``Run``: front matter, then a line scanner for the body.

The scanner looks only for our own markers (``<!-- flow:... -->`` lines at the start of a
line) and for the fences it wrote, never parsing Markdown. An entry exactly as ``render`` wrote
it is read straight from the file's bytes (``aswritten``) and hashed as it is; any other entry
(a hand edit, damage) is read line by line (``entryread``), which gives the same result for
the entries the first reads. The front matter block is ``frontblock``'s, the generated
sections ``sections``', the digests' check ``verify``'s. Line numbers are counted only for a
warning or an error, and everything positioned names ``path:line:col``::

    run, report = parse(text, path="progress.md")
    report.edited_entries      # ids of entries changed by hand (their edits are in ``run``)
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..base import notices
from ..base.errors import FlowError, ProgressSchemaError
from ..base.textnorm import undo_checkout_newlines
from .aswritten import read_as_written
from .digest import Chain
from .entryread import read_entries
from .frontblock import check_version, front_matter_block, migrate, version_line
from .frontmatter import normalize_yaml_values, read_front_matter
from .migrations import MIGRATIONS, Migration
from .model import FORMAT_MINOR, FORMAT_VERSION, LoadReport, Run
from .scanner import Scanner
from .schema import validate_front_matter
from .sections import conversation_end, conversation_start
from .sidecar import check_link
from .verify import locate_entries, verify
from .versions import format_notice, format_text

_id_of = operator.attrgetter("id")
_sidecar_of = operator.attrgetter("sidecar")
_ENTRY_MARK = "<!-- flow:entry "


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


def _body(
    sc: Scanner, start: int, run: Run, report: LoadReport
) -> tuple[list[str], list[str | None]]:
    """Scan the body from ``start``; fill ``run.transcript``; return the stored digests and
    the actual ones known so far (None where ``verify`` must compute them)."""
    pos = conversation_start(sc, start, report, run)
    digests: list[str] = []
    actual: list[str | None] = []
    try:
        data: bytes | None = sc.text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (text handed in, not read from a file)
        data = None
    at = len(sc.text[:pos].encode("utf-8", "surrogatepass"))
    pos = read_entries(sc, pos, run.transcript, digests, actual, report, data, at)
    conversation_end(sc, pos, run, report)
    return digests, actual


def parse_document(text: str, *, path: str | Path = "progress.md") -> Parsed:
    """Parse a whole progress file; see ``parse``. Also returns the digests the file recorded."""
    where = str(path)
    sc = Scanner(undo_checkout_newlines(text), where)
    data, source, body_start = front_matter_block(sc)
    version = check_version(data, source, where)
    if version != FORMAT_VERSION:
        body = sc.text[body_start:]
        data, body = migrate(data, body, version, where, version_line(source))
        sc = Scanner(sc.text[:body_start] + body, where)
    run = read_front_matter(data, path=where, source=source, line_offset=1)
    report = _report(run, version, data)
    digests, known = _body(sc, body_start, run, report)
    actual, chain = verify(sc, data, source, run, digests, known, report)
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

    def whole() -> Scanner:
        return Scanner(decode(data) if decode is not None else data.decode("utf-8"), where)

    first = data.find(b"\n" + _ENTRY_MARK.encode()) + 1
    head = _read_head(data, first, where) if data.startswith(b"---\n") and first else None
    if head is None:
        # Not a file flow wrote as it is (a byte order mark, CRLF line ends, no entries, an
        # older format ...), or a problem reported with its place in the whole file.
        return parse_document(whole().text, path=path)
    fm, source, run, report = head
    digests: list[str] = []
    actual: list[str | None] = []
    starts: list[int] = []
    end = read_as_written(data, first, run.transcript, digests, actual, starts)
    sc: Scanner | None = None
    if not _read_tail(data, end, run, where):
        # From ``end`` on, read the whole text as parse_document does.
        sc = whole()
        pos = len(data[:end].decode("utf-8"))
        pos = read_entries(sc, pos, run.transcript, digests, actual, report, data, end)
        conversation_end(sc, pos, run, report)
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
    # Edits or damage: verify reports them with their places in the whole file.
    checked, chain = verify(sc or whole(), fm, source, run, digests, actual, report)
    spans = [*starts, end] if starts else []
    _tell(where, report)
    return Parsed(run, report, digests, checked, chain, entry_spans=spans)


def _read_head(
    data: bytes, first: int, where: str
) -> tuple[dict[str, Any], str, Run, LoadReport] | None:
    """The front matter, its text, the run it records and a new report, read from the bytes
    before the first entry's marker at ``first``; None where the whole text must be read (an
    older format, a problem to report, sections not as flow writes them)."""
    try:
        # Everything up to the first entry's marker, decoded, is the start of the text
        # parse_document reads: the same positions, the same results.
        head = Scanner(data[: first + len(_ENTRY_MARK)].decode("utf-8"), where)
        fm, source, body_start = front_matter_block(head)
        if check_version(fm, source, where) != FORMAT_VERSION:
            return None
        run = read_front_matter(fm, path=where, source=source, line_offset=1)
        report = _report(run, FORMAT_VERSION, fm)
        at = conversation_start(head, body_start, report, run)  # counts characters, not bytes
    except (FlowError, UnicodeDecodeError):
        # Reported with its place in the whole file (the front matter might even run past
        # this start).
        return None
    if at != len(head.text) - len(_ENTRY_MARK):
        return None
    return fm, source, run, report


def _read_tail(data: bytes, end: int, run: Run, where: str) -> bool:
    """Whether the sections after the conversation, from ``end``, read on their own without a
    warning or an error (setting ``run.journal_seq``): their positions would be wrong in one,
    so those are left to the whole text."""
    if data.startswith(_ENTRY_MARK.encode(), end):
        return False
    try:
        tail_report = LoadReport()
        conversation_end(Scanner(data[end:].decode("utf-8"), where), 0, run, tail_report)
    except (FlowError, UnicodeDecodeError):
        return False
    return not tail_report.warnings


def check_strict(text: str, report: LoadReport | None, *, path: str | Path = "progress.md") -> None:
    """Raise ``ProgressSchemaError`` naming each part of a file that this flow does not write
    itself: keys and entry marker fields it does not know, and a newer minor (``flow validate
    --strict``, docs/spec.md 2.5), with every other problem of its front matter. ``report`` is
    the file's load report, None when it did not load (the front matter alone is checked)."""
    where = str(path)
    ours = format_text(FORMAT_VERSION, FORMAT_MINOR)
    if report is not None and not report.unknown and report.format == ours:
        return
    sc = Scanner(undo_checkout_newlines(text), where)
    data, source, _ = front_matter_block(sc)
    version = check_version(data, source, where)
    data, _ = migrate(data, "", version, where, version_line(source))
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
    lines = locate_entries(sc, [int(u.split()[1].rstrip(":")) for u in marked])
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
