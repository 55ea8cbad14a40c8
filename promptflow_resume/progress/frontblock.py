"""The front matter block at the top of a progress file, as text: where it ends, its size limit,
its format version, and the migrations that bring an older one up to this flow's format.

What its keys mean is ``frontmatter``'s; this reads the block and its version only::

    data, source, body_start = front_matter_block(Scanner(text, "progress.md"))
    version = check_version(data, source, "progress.md")
"""

from __future__ import annotations

import re
from typing import Any

from ..base import yamlio
from ..base.errors import ProgressFormatError, UnsupportedVersionError
from .migrations import MIGRATIONS
from .model import FORMAT_VERSION
from .scanner import Scanner
from .versions import newer_format_error


def migrate(
    data: dict[str, Any], body: str, version: int, path: str, line: int | None
) -> tuple[dict[str, Any], str]:
    """The front matter and body of format ``version`` brought up to this flow's format (an
    error for a newer format, or one no migration starts from); ``line`` is the version's."""
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


def front_matter_block(sc: Scanner) -> tuple[dict[str, Any], str, int]:
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


def version_line(source: str) -> int | None:
    """The line of the file where the front matter ``source`` sets ``flow_progress``."""
    match = re.search(r"^flow_progress\s*:", source, re.MULTILINE)
    return source.count("\n", 0, match.start()) + 2 if match else None


def check_version(data: dict[str, Any], source: str, path: str) -> int:
    """The format version the front matter names; an error if it names none, or not a number."""
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
            line=version_line(source),
            column=1,
            field="$.flow_progress",
            hint=f"This flow writes and reads flow_progress: {FORMAT_VERSION}.",
        )
    return version
