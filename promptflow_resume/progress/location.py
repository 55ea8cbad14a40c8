"""Where a command's PROGRESS argument points: a progress file, or the run's folder.

``flow status .flow/runs/ID`` is ``flow status .flow/runs/ID/progress.md``: every command and
library function that takes a progress path resolves it here, once::

    progress_file(".flow/runs/20261121-232529-notes-3fa2")   # -> .../progress.md
    progress_file("out")                                      # -> out/batch.md (a batch)
"""

from __future__ import annotations

from pathlib import Path

from ..base.errors import FileNotFoundFlowError

#: The files a run's or a batch's folder is named for, tried in this order.
FOLDER_FILES = ("progress.md", "batch.md")


def progress_file(path: str | Path) -> Path:
    """``path`` itself, or for a folder the ``progress.md`` (else ``batch.md``) in it.

    A folder with neither raises FileNotFoundFlowError (exit 5); a path that does not exist is
    returned as it is, for the caller's own message.
    """
    p = Path(path)
    if not p.is_dir():
        return p
    for name in FOLDER_FILES:
        if (p / name).is_file():
            return p / name
    raise FileNotFoundFlowError(
        "this folder holds no progress.md (nor a batch's batch.md).",
        path=p,
        hint="Name a run's folder (.flow/runs/<run-id>) or its progress.md; "
        "`flow list` shows the runs.",
    )
