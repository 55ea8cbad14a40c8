"""The library API: start a run, resume one, ask where one stands, compact one.

The ``flow`` command is a thin layer over these functions; other programs and the tests call
them directly. Every call takes one ``RunOptions`` (provider, limits, workspace, permissions
...) and, where it has fields of its own, a request (``StartRequest``, ``ResumeRequest``).
``tests/guards/test_doctests.py`` runs this example from a folder holding ``workflows/``; ``echo``
is the offline dry-run provider:

    >>> from promptflow_resume import Limits, RunOptions, resume_run, run_status, start_run
    >>> outcome = start_run("workflows/release-notes.prompt.md", RunOptions(provider="echo"))
    >>> outcome.run.status, outcome.exit_code
    ('completed', 0)
    >>> again = resume_run(outcome.path, RunOptions(limits=Limits(max_cost=1.0)))  # nothing left
    >>> again.run.status, again.exit_code
    ('completed', 0)
    >>> run_status(outcome.path).to_dict()["steps_done"]  # the workflow's three steps
    3

Where each part lives: ``starting`` and ``resuming`` hold the steps of a start and a resume,
``attempt`` the attempt both end in, ``status`` and ``compaction`` the other two calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

# Re-exported from their homes: what callers of the API name (the outcome of a run, the
# options record and the requests, the choices of a resume, status and compaction).
from .run.attempt import Outcome as Outcome
from .run.attempt import answer_location as answer_location
from .run.attempt import approval_lines as approval_lines
from .run.attempt import run_summary as run_summary
from .run.compaction import CompactOutcome as CompactOutcome
from .run.compaction import compact_run as compact_run
from .run.requests import GivenInputs as GivenInputs
from .run.requests import ResolvedInputs as ResolvedInputs
from .run.requests import ResumeRequest as ResumeRequest
from .run.requests import StartRequest as StartRequest
from .run.requests import prepare_inputs as prepare_inputs
from .run.resumeplan import Choices as Choices
from .run.resumeplan import ResumePlan as ResumePlan
from .run.runoptions import Limits as Limits
from .run.runoptions import Permissions as Permissions
from .run.runoptions import RunOptions as RunOptions
from .run.status import StatusReport as StatusReport
from .run.status import run_status as run_status

if TYPE_CHECKING:
    from .run.approvals import Decided


def start_run(request: StartRequest | str | Path, options: RunOptions = RunOptions()) -> Outcome:
    """Start a new run of a workflow and execute it until it completes or stops.

    ``request`` is a ``StartRequest`` or just the workflow's path (no inputs, the default
    progress file).
    """
    from .run.start import start

    if not isinstance(request, StartRequest):
        request = StartRequest(request)
    return start(request, options)


def resume_run(
    progress_path: str | Path,
    options: RunOptions = RunOptions(),
    request: ResumeRequest = ResumeRequest(),
) -> Outcome:
    """Continue a stopped run from its checkpoint (see ``reconcile`` for the rules).

    ``request.decide`` (or ``recovery: model`` in the workflow) lets the run's model choose how
    an ambiguous state is resolved (see ``recovery``); a choice in ``request.choices`` wins."""
    from .run.resume import resume

    return resume(progress_path, options, request)


def decide_calls(
    progress_path: str | Path,
    call_ids: Sequence[str],
    *,
    approve: bool,
    every: bool = False,
    reason: str | None = None,
    by: str | None = None,
    where: str | None = None,
) -> Decided:
    """Approve or deny tool calls a run holds for a person's decision (docs/spec.md 4.17);
    ``by`` and ``where`` name who decided and where when it is not this machine's user (a
    pull request comment: the GitHub login and the comment's URL)."""
    from .run.approvals import decide

    return decide(
        progress_path, call_ids, approve=approve, every=every, reason=reason, by=by, where=where
    )


def answer_question(progress_path: str | Path, text: str) -> Path:
    """Write the answer a run waiting for input expects (``text``, or ``@FILE``'s content);
    returns the progress file written (a child's when the question is in a sub-workflow)."""
    from .run.approvals import answer, read_answer

    return answer(progress_path, read_answer(text))
