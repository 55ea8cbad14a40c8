"""Loading a run from disk for reading: the file parsed, the journal a crash left replayed,
the sidecars checked. Never writes; a live run is read as a consistent snapshot::

    run, report = load_progress(".flow/runs/r1/progress.md")
    report = validate_file(".flow/runs/r1/progress.md")      # flow validate
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..base import collector
from ..base.errors import DigestError, ProgressFormatError, SidecarError
from . import journal
from .digest import Chain
from .diskio import MAX_JOURNAL_BYTES, decode_text, read_bytes
from .journal import journal_path
from .journalreplay import replay
from .location import progress_file
from .model import Entry, LoadReport, Run
from .owner import owner_alive
from .parse import parse_bytes
from .sidecar import read_checked

_sidecar_of: Callable[[Entry], str | None] = operator.attrgetter("sidecar")


def _locate(data: bytes, entry_id: int) -> int | None:
    marker = b"\n<!-- flow:entry %d " % entry_id
    found = data.find(marker)
    return None if found == -1 else data.count(b"\n", 0, found) + 2


@dataclass
class Loaded:
    """A run as ``load`` read it, with what the store's first fold reuses of the file."""

    run: Run
    report: LoadReport
    #: The chain over the stored digests of the whole transcript (file and journal).
    chain: Chain
    has_journal: bool
    #: The file's bytes, and where its entries' blocks start and end (``Parsed.entry_spans``).
    data: bytes = b""
    spans: list[int] = field(default_factory=list)
    #: The stored digests of the whole transcript, and the digests of the file's entries as
    #: read (they differ for an entry edited by hand).
    digests: list[str] = field(default_factory=list)
    actual: list[str] = field(default_factory=list)


def load(path: Path, *, verify_sidecars: bool = True, live: bool = False) -> Loaded:
    """Load + replay a progress file (``verify_sidecars``: check each sidecar's bytes too).

    The journal is read before the file. A fold writes the file before it drops the journal,
    so whatever a live writer does in between, the file read second is the one the journal
    continues, or a later one that already holds every event read (they are then skipped).
    """
    jpath = journal_path(path)
    raw_journal = journal.read_raw(jpath, MAX_JOURNAL_BYTES)
    data = read_bytes(path)
    parsed = parse_bytes(data, path=path, decode=lambda raw: decode_text(raw, path))
    run, report, digests, chain = parsed.run, parsed.report, parsed.stored_digests, parsed.chain
    has_journal = raw_journal is not None
    if raw_journal is not None:
        events = journal.parse_events(raw_journal, jpath, run.run_id, report, live=live)
        run = replay(run, digests, chain, events, jpath, report, live=live)
    if verify_sidecars and any(map(_sidecar_of, run.transcript)):
        for entry in run.transcript:
            if entry.sidecar is None:
                continue
            _, problem = read_checked(path, entry)
            if problem is not None:
                raise SidecarError(
                    f"entry {entry.id} keeps its full output in the sidecar {entry.sidecar}, "
                    f"which {problem}.",
                    path=path,
                    line=_locate(data, entry.id),
                    column=1,
                    hint=(
                        f"Restore {entry.sidecar} from version control or a backup (sidecar "
                        "files travel with their progress file); the run cannot use that output "
                        "otherwise."
                    ),
                )
    return Loaded(
        run, report, chain, has_journal, data, parsed.entry_spans, digests, parsed.actual_digests
    )


#: How often a reader retries a live run whose files changed under it while it read them.
_READ_RETRIES = 5


def load_progress(path: str | Path) -> tuple[Run, LoadReport]:
    """Load a progress file: parse, replay its journal, verify sidecars. Never writes.

    A run with a live writer is read as a consistent snapshot; should its files still change
    mid-read in a way that does not fit together, the read is retried before any error.
    """
    p = progress_file(path)
    live = owner_alive(p)
    for attempt in range(_READ_RETRIES):
        try:
            with collector.long_lived():  # a long run's entries: many objects, no cycles
                loaded = load(p, live=live)
            return loaded.run, loaded.report
        except (ProgressFormatError, DigestError, SidecarError):
            if not live or attempt == _READ_RETRIES - 1:
                raise
            time.sleep(0.02 * (attempt + 1))
            live = owner_alive(p)
    raise AssertionError("unreachable")


def validate_file(path: str | Path) -> LoadReport:
    """Check a progress file completely (``flow validate``); raise the first problem found."""
    return load_progress(path)[1]
