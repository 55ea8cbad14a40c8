"""``flow show``'s three outputs, each from the progress file's path: JSON, a page, a view.

Each reads the file only (``load_progress``) and shows the run's effective state (a dead
owner's ``running`` run is ``interrupted``, ``progress.state``)::

    data = run_json(Path("progress.md"))             # usage and the step time line
    write_html(Path("progress.md"), Path("run.html"))  # one self-contained page
    console.print(terminal_report(Path("progress.md"), result_lines=5))
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.durable import replace_file
from ..base.textnorm import without_surrogates
from ..progress import load_progress
from ..progress.diskio import storage_error
from ..progress.model import Run
from ..progress.state import RunState, run_state

if TYPE_CHECKING:
    from rich.console import RenderableType


def _load(path: Path) -> tuple[Run, RunState]:
    run, _report = load_progress(path)
    return run, run_state(path, run.status, run.reason)


def run_json(path: Path) -> dict[str, Any]:
    """``flow show --json``: the run's facts (``runview``: state, usage, steps, approvals,
    permissions) and its file snapshots, as JSON-ready data."""
    from ..run.runview import run_facts

    run, state = _load(path)
    return {
        "path": str(path),
        **run_facts(run, state).to_dict(),
        # The file snapshots, one per call that can change files (docs/spec.md 12).
        "snapshots": asdict(run.snapshots) if run.snapshots is not None else None,
    }


def write_html(path: Path, out: Path) -> None:
    """``flow show --html OUT``: write the run as one self-contained page to ``out``.

    Folders above ``out`` are created; the page replaces ``out`` atomically. A failure to
    write is a ``StorageError`` naming ``out`` (the progress file is never written)."""
    from .html import html_page

    run, report = load_progress(path)
    state = run_state(path, run.status, run.reason)
    page = html_page(
        run,
        source=path.name,
        state=state,
        progress=path,
        out_dir=out.absolute().parent,
        edited=report.edited_entries,
    )
    # A lone surrogate in the transcript (kept exactly there) cannot be UTF-8 in a page.
    data = without_surrogates(page).encode("utf-8")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        replace_file(out, data)
    except OSError as error:
        raise storage_error(error, out, "write the page", resumable=False) from None


def terminal_report(path: Path, *, result_lines: int = 5) -> RenderableType:
    """``flow show``: the run for a terminal, each tool output cut to ``result_lines``."""
    from .console import terminal_view

    run, state = _load(path)
    return terminal_view(run, result_lines=result_lines, state=state, source=str(path))
