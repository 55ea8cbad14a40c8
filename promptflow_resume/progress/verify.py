"""Checking the transcript read from a progress file against its digests and front matter:
the count of entries, the chain of their digests, the entries edited by hand (a warning each,
with its line), and the shape of every sidecar link::

    actual, chain = verify(sc, front_matter, source, run, digests, known, report)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..base.errors import DigestError, SidecarError
from .digest import Chain, entry_digest
from .model import LoadReport, Run
from .scanner import Scanner
from .sidecar import check_link


def locate_entries(sc: Scanner, ids: list[int]) -> dict[int, int]:
    """Line numbers of the markers of entries ``ids`` (computed only when needed)."""
    wanted = set(ids)
    out: dict[int, int] = {}
    for match in re.finditer(r"^<!-- flow:entry ([0-9]+) ", sc.text, re.MULTILINE):
        entry_id = int(match.group(1))
        if entry_id in wanted and entry_id not in out:
            out[entry_id] = sc.line_of(match.start())
    return out


def verify(
    sc: Scanner,
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
    fm_line = re.search(r"^transcript\s*:", source, re.MULTILINE)
    fm_lineno = source.count("\n", 0, fm_line.start()) + 2 if fm_line else None
    _check_count(sc, recorded["entries"], len(run.transcript), fm_lineno)
    chain = Chain(zip((e.id for e in run.transcript), digests, strict=True))
    if chain.root() != recorded["digest"]:
        lines = locate_entries(sc, edited[:1])
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
        _report_edits(sc, run, edited, report)
    _check_sidecar_links(sc, run)
    return actual, chain


def _check_count(sc: Scanner, recorded: int, count: int, fm_lineno: int | None) -> None:
    """Raise a ``DigestError`` unless the body holds the ``recorded`` number of entries."""
    if count != recorded:
        missing = (
            "missing (deleted, or the file was cut short)"
            if count < recorded
            else "unexpected (added by hand)"
        )
        raise DigestError(
            f"the front matter records {recorded} transcript entries but the body "
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


def _report_edits(sc: Scanner, run: Run, edited: list[int], report: LoadReport) -> None:
    """Name the entries edited by hand in ``report``, each with its line."""
    report.edited_entries.extend(edited)
    where = locate_entries(sc, edited)
    for entry_id in edited:
        entry = run.transcript[entry_id - 1]
        report.warnings.append(
            f"{sc.path}:{where.get(entry_id, '?')}: entry {entry_id} "
            f"({entry.role.replace('_', ' ')}"
            f"{', step ' + entry.step if entry.step else ''}) was edited by hand; the edited "
            "text is what the model sees on resume."
        )


def _check_sidecar_links(sc: Scanner, run: Run) -> None:
    """Raise a ``SidecarError`` for the first sidecar link that names no file directly inside
    the run's sidecar folder (the link's shape only; files are checked by the store)."""
    stem = Path(sc.path).name.removesuffix(".md")
    for entry in run.transcript:
        if entry.sidecar is not None:
            problem = check_link(entry.sidecar, stem)
            if problem is not None:
                line = locate_entries(sc, [entry.id]).get(entry.id)
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
