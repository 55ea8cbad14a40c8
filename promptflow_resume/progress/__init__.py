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

import sys
import types
from typing import TYPE_CHECKING, Any

from ..base.lazyexports import lazy_exports

#: Public name -> the module of this package that defines it. Imported on first use, so a
#: module that needs only the records (``progress.model``) does not load the parser, the
#: schema checker and the store with them.
_EXPORTS: dict[str, str] = {
    "ChildNode": "children",
    "entry_digest": "digest",
    "transcript_digest": "digest",
    "from_front_matter": "frontmatter",
    "to_front_matter": "frontmatter",
    "FORMAT_VERSION": "model",
    "Entry": "model",
    "LoadReport": "model",
    "Run": "model",
    "MIGRATIONS": "parse",
    "Migration": "parse",
    "parse": "parse",
    "render": "render",
    "SIDECAR_THRESHOLD": "sidecar",
    "is_binary": "sidecar",
    "needs_sidecar": "sidecar",
    "progress_file": "location",
    "SCHEMA_NAMES": "schema",
    "schema_text": "schema",
    "MAX_FILE_BYTES": "diskio",
    "MAX_JOURNAL_BYTES": "diskio",
    "ProgressStore": "store",
    "journal_path": "journal",
    "load_progress": "loading",
    "lock_path": "locking",
    "owner_path": "owner",
    "validate_file": "loading",
    "FileCheck": "validate",
    "Validation": "validate",
    "validate_files": "validate",
    "version_text": "versions",
}

if TYPE_CHECKING:
    from .children import ChildNode
    from .digest import entry_digest, transcript_digest
    from .diskio import MAX_FILE_BYTES, MAX_JOURNAL_BYTES
    from .frontmatter import from_front_matter, to_front_matter
    from .journal import journal_path
    from .loading import load_progress, validate_file
    from .location import progress_file
    from .locking import lock_path
    from .model import FORMAT_VERSION, Entry, LoadReport, Run
    from .owner import owner_path
    from .parse import MIGRATIONS, Migration, parse
    from .render import render
    from .schema import SCHEMA_NAMES, schema_text
    from .sidecar import SIDECAR_THRESHOLD, is_binary, needs_sidecar
    from .store import ProgressStore
    from .validate import FileCheck, Validation, validate_files
    from .versions import version_text


class _Package(types.ModuleType):
    """This package, keeping the functions ``parse`` and ``render`` under their names: the
    import system sets an attribute for each submodule it loads, and two share those names."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("parse", "render") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "FORMAT_VERSION",
    "MAX_FILE_BYTES",
    "MAX_JOURNAL_BYTES",
    "MIGRATIONS",
    "SCHEMA_NAMES",
    "SIDECAR_THRESHOLD",
    "ChildNode",
    "Entry",
    "FileCheck",
    "LoadReport",
    "Migration",
    "ProgressStore",
    "Run",
    "Validation",
    "entry_digest",
    "from_front_matter",
    "is_binary",
    "journal_path",
    "load_progress",
    "lock_path",
    "needs_sidecar",
    "owner_path",
    "parse",
    "progress_file",
    "render",
    "schema_text",
    "to_front_matter",
    "transcript_digest",
    "validate_file",
    "validate_files",
    "version_text",
]
