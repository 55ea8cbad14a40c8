"""What differs between two file snapshots, read from git, and the progress file's record of it.

``SnapshotRepo.diff`` runs ``git diff-tree -r -M --raw --numstat -z`` and reads its output with
``parse_diff``; ``Changes.record`` is the snapshot's entry in the front matter (the paths listed
up to ``LISTED_FILES`` each, the rest counted)::

    changes = parse_diff(output)
    snapshot = changes.record(entry=12, commit=commit, call_id="call_3", late=False)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .progress.filesnapshots import LISTED_FILES, FileSnapshot


@dataclass
class Changes:
    """What differs between two snapshots."""

    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    renamed: list[list[str]] = field(default_factory=list)
    insertions: int = 0
    deletions: int = 0
    binary: int = 0

    def stat(self) -> str:
        """``+12 -3`` (text lines), with ``, N binary`` when binary files changed."""
        if not (self.added or self.modified or self.deleted or self.renamed):
            return ""
        text = f"+{self.insertions} -{self.deletions}"
        return text + (f", {self.binary} binary" if self.binary else "")

    def record(self, entry: int, commit: str, call_id: str | None, late: bool) -> FileSnapshot:
        """The progress file's record of a snapshot with these changes."""
        lists = [self.added, self.modified, self.deleted]
        kept = [paths[:LISTED_FILES] for paths in lists]
        renamed = self.renamed[:LISTED_FILES]
        more = sum(len(p) - len(k) for p, k in zip(lists, kept, strict=True))
        more += len(self.renamed) - len(renamed)
        return FileSnapshot(
            entry=entry,
            commit=commit,
            call_id=call_id,
            added=kept[0],
            modified=kept[1],
            deleted=kept[2],
            renamed=renamed,
            more=more,
            stat=self.stat(),
            late=late,
        )


def parse_diff(output: str) -> Changes:
    """``git diff-tree -r -M --raw --numstat -z`` output as ``Changes``."""
    changes = Changes()
    tokens = output.split("\0")
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith(":"):
            status = token.split(" ")[-1][:1]
            if status in "RC":
                old, new = tokens[i + 1], tokens[i + 2]
                i += 3
                if status == "R":
                    changes.renamed.append([old, new])
                else:
                    changes.added.append(new)
                continue
            path = tokens[i + 1]
            i += 2
            {"A": changes.added, "D": changes.deleted}.get(status, changes.modified).append(path)
            continue
        i += 1
        if not token:
            continue
        added, _, rest = token.partition("\t")
        removed, _, path = rest.partition("\t")
        if not path:
            i += 2  # a rename's numstat line: the two paths follow
        if added == "-":
            changes.binary += 1
        elif added.isdigit() and removed.isdigit():
            changes.insertions += int(added)
            changes.deletions += int(removed)
    return changes
