"""``flow show``: a run in the terminal, or as one self-contained HTML page."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .app import app, out, print_json
from .options import ProgressArg


@app.command("show")
def show(
    path: ProgressArg,
    html: Path | None = typer.Option(
        None,
        "--html",
        metavar="OUT",
        help="Write the run as one self-contained HTML page to this file.",
    ),
    lines: int = typer.Option(
        5,
        "--lines",
        min=0,
        metavar="N",
        help="Lines of each tool output to show in the terminal (an edit's diff: at least 200).",
    ),
    width: int | None = typer.Option(
        None,
        "--width",
        min=40,
        metavar="COLUMNS",
        help="Width of the terminal output (default: the terminal's).",
    ),
    json_output: bool = typer.Option(
        False, "--json", help="Print the run's usage and step time line as JSON."
    ),
) -> None:
    """Show a run: its steps on a time line (time, turns, tokens, cost) and the conversation
    rendered as Markdown, tool outputs collapsed. Reads the file only."""
    from ..progress import load_progress
    from ..progress.state import run_state

    run, _ = load_progress(path)
    state = run_state(path, run.status, run.reason)
    if json_output and html is None:
        from dataclasses import asdict

        from ..show.timeline import timeline

        print_json(
            {
                "path": str(path),
                "run_id": run.run_id,
                "status": state.status,
                "reason": state.reason,
                "recorded_status": run.status,
                "owner_alive": state.owner_alive,
                "resumable": state.resumable,
                "state": state.text(),
                "usage": asdict(run.usage),
                "entries": len(run.transcript),
                "steps": [asdict(row) for row in timeline(run)],
            }
        )
        return
    if html is not None:
        from ..base.durable import replace_file
        from ..base.textnorm import without_surrogates
        from ..progress.store import storage_error
        from ..show.html import html_page

        # A lone surrogate in the transcript (kept exactly there) cannot be UTF-8 in a page.
        page = without_surrogates(
            html_page(
                run, source=path.name, state=state, progress=path, out_dir=html.absolute().parent
            )
        ).encode("utf-8")
        try:
            html.parent.mkdir(parents=True, exist_ok=True)
            replace_file(html, page)
        except OSError as error:
            raise storage_error(error, html, "write the page", resumable=False) from None
        out(f"wrote {html}")
        return
    from ..base.printing import console as people_console
    from ..show.terminal import terminal_view

    console = people_console(file=sys.stdout, width=width, highlight=False, emoji=False)
    console.print(terminal_view(run, result_lines=lines, state=state, source=str(path)))
