"""``flow validate``: check progress files completely and decide the exit code.

Each file is loaded as a resume would load it (front matter, schema, transcript digests,
journal, sidecars); nothing is written. What a newer flow added (keys and marker fields this
flow does not know, a newer minor) is read and kept, as every reader does; ``strict`` refuses
it, accepting only what this flow writes itself (docs/spec.md 2.5). The exit code is 0 when
every file is valid, otherwise the code of the first file that failed (docs/spec.md §7)::

    checks = validate_files([Path("a/progress.md"), Path("b/progress.md")], strict=True)
    for check in checks.files:
        print(check.path, "valid" if check.error is None else check.error)
    sys.exit(checks.exit_code)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import EXIT_OK, FlowError, ProgressSchemaError
from .diskio import read_text
from .loading import load_progress
from .model import LoadReport, Run
from .parse import check_strict


@dataclass(frozen=True)
class FileCheck:
    """One file's result: its run and load report when valid, else the error."""

    path: Path
    run: Run | None = None
    report: LoadReport | None = None
    error: FlowError | None = None

    @property
    def valid(self) -> bool:
        """True when the file loaded without an error (warnings allowed)."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form of one file."""
        if self.error is not None:
            return {"path": str(self.path), "valid": False, "error": self.error.to_dict()}
        assert self.run is not None and self.report is not None  # a valid file has both
        return {
            "path": str(self.path),
            "valid": True,
            "run_id": self.run.run_id,
            "status": self.run.status,
            "entries": len(self.run.transcript),
            "edited_entries": self.report.edited_entries,
            "replayed_events": self.report.replayed_events,
            "warnings": self.report.warnings,
            "format": self.report.format,
            "unknown": self.report.unknown,
        }


@dataclass(frozen=True)
class Validation:
    """Every file's result, in the order given."""

    files: tuple[FileCheck, ...]

    @property
    def exit_code(self) -> int:
        """0 when every file is valid, else the first failing file's exit code."""
        for check in self.files:
            if check.error is not None:
                return check.error.exit_code
        return EXIT_OK

    def to_dict(self) -> list[dict[str, Any]]:
        """The ``--json`` form: one object per file."""
        return [check.to_dict() for check in self.files]


def check_file(path: Path, *, strict: bool = False) -> FileCheck:
    """Load ``path`` completely (with ``strict``, refusing what this flow does not write
    itself); a problem a user can cause is returned, not raised."""
    try:
        try:
            run, report = load_progress(path)
        except ProgressSchemaError:
            if strict:  # the same problems, with the keys this flow does not know among them
                check_strict(read_text(path), None, path=path)
            raise
        if strict:
            check_strict(read_text(path), report, path=path)
    except FlowError as error:
        return FileCheck(path, error=error)
    return FileCheck(path, run=run, report=report)


#: How much of a file ``looks_like_progress`` reads: a front matter's start and its version.
_HEAD_BYTES = 64 * 1024


def looks_like_progress(path: Path) -> bool:
    """True when ``path`` starts with front matter that has a ``flow_progress`` key (a run's
    file whatever its name: ``progress.md``, a ``flow share`` copy, the action's
    ``flow-runs/pr-N.md``), so a broken one is still checked; False for any other file (a
    README, a file that cannot be read)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError:
        return False
    lines = head.removeprefix(b"\xef\xbb\xbf").splitlines()
    if not lines or lines[0].rstrip() != b"---":
        return False
    for line in lines[1:]:
        if line.rstrip() == b"---":
            return False
        if line.startswith(b"flow_progress:"):
            return True
    return False


def validate_files(
    paths: Iterable[Path], *, strict: bool = False, only_runs: bool = False
) -> Validation:
    """Check each progress file completely; one file's failure does not stop the others.
    ``only_runs``: leave out the files that are not progress files (``looks_like_progress``),
    as a pre-commit hook given every Markdown file of a commit needs."""
    chosen = [p for p in paths if not only_runs or looks_like_progress(p)]
    return Validation(tuple(check_file(path, strict=strict) for path in chosen))
