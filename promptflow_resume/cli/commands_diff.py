"""``flow diff`` (what changed between two versions of a run, and git's diff driver) and
``flow ci`` (a pull request's run as a GitHub Actions step)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ..base.errors import InputError
from .app import app, out, print_json


@app.command("diff")
def diff_command(
    files: list[Path] = typer.Argument(
        ...,
        metavar="OLD NEW | PROGRESS",
        help="Two progress files (older first); or one with --rev or --textconv.",
    ),
    rev: str | None = typer.Option(
        None,
        "--rev",
        metavar="REV",
        help="Compare PROGRESS with its version at this git revision (HEAD, main, a commit).",
    ),
    textconv: bool = typer.Option(
        False,
        "--textconv",
        help="Print one file as stable lines for git's diff driver: git config "
        'diff.flow.textconv "flow diff --textconv", and `**/progress.md diff=flow` in '
        ".gitattributes.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the differences as JSON."),
) -> int:
    """Show what changed between two versions of a run: its status, steps whose status
    changed, entries appended, entries edited (with their text diff) or removed, inputs,
    configuration and budget, approvals, and the usage and cost added. Reads the files only."""
    from ..sharing.diff import diff_files, diff_revision, textconv_text

    wanted = 1 if (rev is not None or textconv) else 2
    if len(files) != wanted or (rev is not None and textconv):
        raise InputError(
            f"flow diff takes two progress files (OLD NEW), or one with --rev REV, or one with "
            f"--textconv; it was given {len(files)} file(s)"
            + (" with both --rev and --textconv." if rev is not None and textconv else "."),
            hint="Example: flow diff old.md progress.md, or flow diff progress.md --rev HEAD~1.",
        )
    if textconv:
        sys.stdout.write(textconv_text(files[0]))
        return 0
    change = diff_revision(files[0], rev) if rev is not None else diff_files(*files)
    if as_json:
        print_json(change.to_dict())
    else:
        out(change.to_markdown().rstrip("\n"))
    return 0


@app.command("ci")
def ci_command() -> int:
    """Run or resume a pull request's run as a GitHub Actions step (the repository's
    action.yml calls it): reads the action's INPUT_* and the runner's GITHUB_* variables,
    writes GITHUB_OUTPUT and the job summary, and commits the progress file with share: yes.
    Exits 0 when the run completed or waits for a person, a budget or a quota window."""
    import os

    from ..ci import run_ci

    return run_ci(os.environ, log=out).step_exit
