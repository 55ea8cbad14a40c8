"""Snapshot files a reviewer reads as they are: one ``.md`` file per snapshot (syrupy)::

def test_page(md_snapshot: SnapshotAssertion) -> None:
    assert render(run) == md_snapshot
"""

from __future__ import annotations

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode


class MarkdownSnapshot(SingleFileSnapshotExtension):
    """One readable ``.md`` file per snapshot, so a reviewer sees the rendered text."""

    file_extension = "md"
    _write_mode = WriteMode.TEXT
