"""Batch runs: one workflow run per row of a data set, resumable row by row.

A batch lives in a folder: ``batch.md`` (the batch's checkpoint and a readable table of its
rows) and ``rows/<n>/progress.md`` (each row's own run, an ordinary progress file)::

    from promptflow_resume.batch import start_batch, resume_batch, batch_status

    outcome = start_batch("triage.prompt.md", "issues.jsonl", out="out", workers=4)
    print(outcome.batch.totals(), outcome.exit_code)
    outcome = resume_batch("out/batch.md")       # only the rows that did not complete

Modules: ``data`` (reading and checking rows), ``checkpoint`` (the batch file), ``worker``
(one row through the library API), ``rowoptions`` (the ``RunOptions`` every row runs with),
``local`` and ``ray_engine`` (where rows run), ``rowloop`` (the batch loop), ``runner``
(this API).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazyexports import lazy_exports

#: Where each public name lives: imported on first use, so reading one module (``flow status``
#: asks ``checkpoint.is_batch_file``) does not load the runner and its engines.
_EXPORTS = {
    "BATCH_FILE": "checkpoint",
    "Batch": "checkpoint",
    "RowState": "checkpoint",
    "is_batch_file": "checkpoint",
    "load_batch": "checkpoint",
    "BatchOutcome": "rowloop",
    "BatchReporter": "reporting",
    "BatchStatus": "runner",
    "batch_status": "runner",
    "resume_batch": "runner",
    "start_batch": "runner",
}

if TYPE_CHECKING:
    from .checkpoint import BATCH_FILE, Batch, RowState, is_batch_file, load_batch
    from .reporting import BatchReporter
    from .rowloop import BatchOutcome
    from .runner import (
        BatchStatus,
        batch_status,
        resume_batch,
        start_batch,
    )


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "BATCH_FILE",
    "Batch",
    "BatchOutcome",
    "BatchReporter",
    "BatchStatus",
    "RowState",
    "batch_status",
    "is_batch_file",
    "load_batch",
    "resume_batch",
    "start_batch",
]
