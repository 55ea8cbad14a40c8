"""promptflow-resume: run Markdown prompt workflows that survive crashes, budgets and edits.

The library API (the ``flow`` command is a thin layer over it)::

    from promptflow_resume import RunOptions, start_run, resume_run, run_status, load_progress

    outcome = start_run("workflows/triage-todos.prompt.md", RunOptions(provider="echo"))
    run, report = load_progress(outcome.path)
    print(run.status, report.edited_entries)

Names are imported on first use, so ``import promptflow_resume`` (and ``flow --help``) stays
cheap.
"""

from __future__ import annotations

from .base.lazyexports import lazy_exports
from .base.release import VERSION as __version__

#: Public name -> module that defines it.
_EXPORTS: dict[str, str] = {
    "start_run": "api",
    "resume_run": "api",
    "run_status": "run.status",
    "check_workflows": "check",
    "RunOptions": "run.runoptions",
    "Limits": "run.runoptions",
    "Permissions": "run.runoptions",
    "StartRequest": "run.requests",
    "ResumeRequest": "run.requests",
    "GivenInputs": "run.requests",
    "ResolvedInputs": "run.requests",
    "Outcome": "run.attempt",
    "Choices": "run.reconcile",
    "load_progress": "progress",
    "ProgressStore": "progress",
    "load_workflow": "workflow",
    "list_runs": "detect",
    "share_run": "sharing",
    "fork_run": "sharing",
    "rewind_run": "sharing",
    "FlowError": "base.errors",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__ = lazy_exports(__name__, _EXPORTS)
