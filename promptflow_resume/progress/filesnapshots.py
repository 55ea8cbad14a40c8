"""The records of a run's file snapshots (``snapshots:`` in the front matter, docs/spec.md 12):
the working tree after each tool call that can change files, as a git commit, and the files
it changed::

    snaps = Snapshots(root=".", ref="refs/flow/r1/snapshots")
    last = snaps.last_taken()
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FileSnapshot:
    """The working tree after one tool call that can change files, as a git commit
    (``snapshots.calls[]``, docs/spec.md 12).

    ``entry`` is the call's ``tool_result`` entry (0: the run's base, taken before its first
    call). ``commit`` None means the result is recorded and the snapshot is due (a crash came
    between them; resume takes it then and marks it ``late``). The lists name the files that
    differ from the snapshot before (at most ``LISTED_FILES`` each; ``more`` counts the rest).
    """

    entry: int
    commit: str | None = None
    call_id: str | None = None
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    #: ``[from, to]`` pairs.
    renamed: list[list[str]] = field(default_factory=list)
    more: int = 0
    #: ``+12 -3`` (lines added and removed in text files), ``, 1 binary`` when there are any.
    stat: str = ""
    #: Taken on resume, after a crash between the call and its snapshot.
    late: bool = False

    def files(self) -> int:
        """How many files the call changed (listed or not)."""
        return (
            len(self.added) + len(self.modified) + len(self.deleted) + len(self.renamed) + self.more
        )


#: How many paths a snapshot record lists per kind of change.
LISTED_FILES = 20


@dataclass
class Snapshots:
    """A run's file snapshots (``snapshots:``): the repository's work tree they are of, the
    ref that keeps their commits, and one record per call."""

    #: The repository's top folder: relative to the progress file's folder (forward slashes)
    #: when the path is short that way, else absolute.
    root: str
    #: ``refs/flow/<run-id>/snapshots``: one ref per run, the tip of a chain of commits.
    ref: str
    calls: list[FileSnapshot] = field(default_factory=list)

    def last_taken(self, before: int | None = None) -> FileSnapshot | None:
        """The last snapshot with a commit (of an entry below ``before``, when given)."""
        for snap in reversed(self.calls):
            if snap.commit is not None and (before is None or snap.entry < before):
                return snap
        return None
