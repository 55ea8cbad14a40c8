"""The person's trust in a test's workspace: what ``flow trust DIR`` records, made in process.

Tests of hooks and MCP servers work in a folder the person owns, so they trust it the way a
person would before running flow there (docs/spec.md 10.9); the tests in ``tests/hostile/``
play the stranger and leave folders untrusted.
"""

from __future__ import annotations

from pathlib import Path

from promptflow_resume.trust import trust_folder


def trusted(folder: Path) -> Path:
    """Trust ``folder`` as its files are now (again, after a test changed one); returns it."""
    trust_folder(folder)
    return folder
