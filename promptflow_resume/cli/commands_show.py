"""``flow show``: a run in the terminal, or as one self-contained HTML page."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ..base.errors import InputError
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
    summary: bool = typer.Option(
        False,
        "--summary",
        help="Print a Markdown summary sized for a pull request comment or a CI job summary "
        "(under 65,536 characters): status and what to do next, steps, settings used, "
        "changed files, links.",
    ),
    report_link: str | None = typer.Option(
        None,
        "--report-link",
        metavar="URL",
        help="With --summary: where the HTML report is (a path or URL), linked from it.",
    ),
) -> None:
    """Show a run: its steps on a time line (time, turns, tokens, cost) and the conversation
    rendered as Markdown, tool outputs collapsed. Reads the file only."""
    if report_link is not None and not summary:
        raise InputError("--report-link goes with --summary (it is a link in the summary).")
    if summary:
        if json_output or html is not None:
            raise InputError("--summary prints Markdown; it goes without --json and --html.")
        from ..show.prsummary import pr_summary

        sys.stdout.write(pr_summary(path, report_link=report_link))
        return
    if json_output and html is None:
        from ..show.report import run_json

        print_json(run_json(path))
        return
    if html is not None:
        from ..show.report import write_html

        write_html(path, html)
        out(f"wrote {html}")
        return
    from ..base.printing import console as people_console
    from ..show.report import terminal_report

    console = people_console(file=sys.stdout, width=width, highlight=False, emoji=False)
    console.print(terminal_report(path, result_lines=lines))
