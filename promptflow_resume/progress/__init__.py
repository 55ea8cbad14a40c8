"""The progress file: format v1 (``render``/``parse``), validation, and durable storage.

``progress.md`` holds one run: YAML front matter is the checkpoint, the Markdown body is the
readable conversation. Everything that touches the disk format lives in this package::

    from promptflow_resume.progress import ProgressStore, load_progress, render, parse

    run, report = load_progress("progress.md")       # never writes
    store, run, report = ProgressStore.open("progress.md")
    store.save(run, new_entries)                      # one durable event, O(1)
    store.checkpoint(run)                             # fold into progress.md
    store.close()
"""

from __future__ import annotations

from .digest import entry_digest, transcript_digest
from .frontmatter import from_front_matter, to_front_matter
from .model import FORMAT_VERSION, Entry, LoadReport, Run
from .parse import MIGRATIONS, Migration, parse
from .render import render
from .sidecar import SIDECAR_THRESHOLD, is_binary, needs_sidecar
from .store import (
    MAX_FILE_BYTES,
    ProgressStore,
    journal_path,
    load_progress,
    lock_path,
    owner_path,
    validate_file,
)

__all__ = [
    "FORMAT_VERSION",
    "MAX_FILE_BYTES",
    "MIGRATIONS",
    "SIDECAR_THRESHOLD",
    "Entry",
    "LoadReport",
    "Migration",
    "ProgressStore",
    "Run",
    "entry_digest",
    "from_front_matter",
    "is_binary",
    "journal_path",
    "load_progress",
    "lock_path",
    "needs_sidecar",
    "owner_path",
    "parse",
    "render",
    "to_front_matter",
    "transcript_digest",
    "validate_file",
]
