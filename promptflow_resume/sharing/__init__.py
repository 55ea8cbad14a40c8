"""Sharing and editing runs: share, fork, rewind, log and clean (the library behind the CLI).

Each function takes the path of a ``progress.md`` and works through the progress package, so
what it writes is exactly what ``flow`` itself writes::

    from promptflow_resume.sharing import share_run, fork_run, rewind_run, run_log, clean_runs

    copy = share_run(".flow/runs/<id>/progress.md", "docs/runs/release.md")   # PR-safe copy
    new = fork_run(copy, at_step="report")        # a new run from the start of step "report"
    backup = rewind_run(new, to_step="report")    # in place; entries archived, file backed up
    for attempt in run_log(new):
        print(attempt.n, attempt.status, attempt.reason)
    report = clean_runs(".flow/runs", older_than="30d", statuses=["completed"], dry_run=True)

``share``, ``fork`` and ``rewind`` return richer result records than the ``*_run`` shortcuts.
"""

from __future__ import annotations

from .clean import CleanItem, CleanReport, clean_runs
from .fork import ForkResult, fork, fork_run
from .log import AttemptView, RunLog, read_log, run_log
from .rewind import RewindResult, rewind, rewind_run
from .share import ShareResult, share, share_run

__all__ = [
    "AttemptView",
    "CleanItem",
    "CleanReport",
    "ForkResult",
    "RewindResult",
    "RunLog",
    "ShareResult",
    "clean_runs",
    "fork",
    "fork_run",
    "read_log",
    "rewind",
    "rewind_run",
    "run_log",
    "share",
    "share_run",
]
