"""Writing copies of a run: keep hand-edit marks, copy sidecar files, add a header for readers.

The text always comes from the progress package's renderer, so a copy is byte-for-byte what
the store itself would write; the only addition is an optional block of YAML comment lines at
the top of the front matter (GitHub hides them; every YAML reader skips them; the next save by
flow drops them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..base.errors import SidecarError
from ..base.safeopen import read_regular
from ..progress.digest import Chain, entry_digest
from ..progress.diskio import MAX_FILE_BYTES, read_text
from ..progress.frontmatter import written_front_matter
from ..progress.model import Entry, LoadReport, Run
from ..progress.parse import parse_document
from ..progress.render import render_document
from ..progress.sidecar import folder_name, read_checked


def edited_digests(path: Path, report: LoadReport) -> dict[int, str]:
    """The digests ``path`` records for its hand-edited entries (id -> digest).

    A copy that kept these digests still shows those entries as edited, so a resume of the copy
    treats them exactly as a resume of the original would (e.g. a tool result written by hand).
    """
    if not report.edited_entries:
        return {}
    parsed = parse_document(read_text(path), path=path)
    stored = dict(zip((e.id for e in parsed.run.transcript), parsed.stored_digests, strict=True))
    return {i: stored[i] for i in report.edited_entries if i in stored}


def render_copy(
    run: Run, *, path: Path, keep: Mapping[int, str] | None = None, header: str = ""
) -> str:
    """The progress-file text of ``run``; ``keep`` overrides digests of edited entries.

    ``header`` (lines of text) is written as a blockquote at the top of the body, where
    GitHub shows it (it is not part of any section, and the next save drops it).
    """
    keep = keep or {}
    digests = [keep.get(e.id) or entry_digest(e) for e in run.transcript]
    chain = Chain(zip((e.id for e in run.transcript), digests, strict=True))
    fm = written_front_matter(
        run,
        entries=len(run.transcript),
        digest=chain.root(),
        path=path,
        context="refusing to write an invalid copy (a bug): ",
    )
    text = render_document(run, fm, digests)
    if header:
        body = text.index("\n---\n\n") + len("\n---\n\n")
        quote = "".join(f"> {line}".rstrip() + "\n" for line in header.splitlines())
        text = text[:body] + quote + "\n" + text[body:]
    return text


def read_sidecar(path: Path, entry: Entry) -> bytes:
    """The verified bytes of ``entry``'s sidecar beside ``path``."""
    data, problem = read_checked(path, entry)
    if data is None:
        raise SidecarError(
            f"entry {entry.id}'s sidecar {entry.sidecar} {problem}.",
            path=path,
            hint=f"Restore {entry.sidecar} from version control or a backup, then try again.",
        )
    return data


def sidecar_folder(path: Path) -> Path:
    """The sidecar folder of a progress file: ``progress.md`` -> ``progress.files/``."""
    return path.parent / folder_name(path)


def archive_files(path: Path) -> list[Path]:
    """Archived transcript entries (``archive-attempt-*``) in the run's sidecar folder."""
    folder = sidecar_folder(path)
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(p for p in folder.iterdir() if p.name.startswith("archive-attempt-"))


def read_archive(path: Path) -> bytes:
    """The bytes of an archive file: a regular file, not a link, within the file size limit."""
    data = read_regular(path, MAX_FILE_BYTES, what="archive file")
    if data is None or len(data) > MAX_FILE_BYTES:
        raise SidecarError(
            f"the archive file {path.name} has gone, or is over the "
            f"{MAX_FILE_BYTES // (1024 * 1024)} MiB limit.",
            path=path,
            hint="Restore it from version control or a backup, then try again.",
        )
    return data
