"""Showing a run to a person: in the terminal (rich) or as one self-contained HTML page.

Both views read a loaded ``Run`` and never write the progress file::

    from promptflow_resume.show import html_page, terminal_view
    run, _ = load_progress("progress.md")
    console.print(terminal_view(run))
    Path("run.html").write_text(html_page(run), encoding="utf-8")

``report`` gives ``flow show``'s outputs straight from a progress file's path: ``run_json``,
``write_html``, ``terminal_report``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazyexports import lazy_exports

if TYPE_CHECKING:
    from .console import terminal_view
    from .html import html_page
    from .prsummary import pr_summary
    from .report import run_json, terminal_report, write_html
    from .timeline import StepRow, timeline

__all__ = [
    "StepRow",
    "html_page",
    "pr_summary",
    "run_json",
    "terminal_report",
    "terminal_view",
    "timeline",
    "write_html",
]

# Lazy: the terminal view imports rich's Markdown renderer, the page markdown-it.
_EXPORTS = {
    "html_page": "html",
    "run_json": "report",
    "terminal_report": "report",
    "write_html": "report",
    "terminal_view": "console",
    "pr_summary": "prsummary",
    "StepRow": "timeline",
    "timeline": "timeline",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
