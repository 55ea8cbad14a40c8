"""promptflow-resume: run Markdown prompt workflows that survive crashes, budgets and edits.

The library API (the ``flow`` command is a thin layer over it)::

    from promptflow_resume import load_progress
    run, report = load_progress("progress.md")
"""

from __future__ import annotations

__version__ = "0.1.0"
