"""``flow validate`` and ``flow schema``: check progress files, print the JSON schemas."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..base.errors import FlowError
from .app import app, err, out, print_json
from .options import ProgressArgs

if TYPE_CHECKING:
    from ..progress import FileCheck


@app.command("validate")
def validate(
    paths: ProgressArgs,
    json_output: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    only_runs: bool = typer.Option(
        False,
        "--only-runs",
        help="Check only the files that are progress files (front matter with flow_progress, "
        "whatever their name) and leave the others out: for a pre-commit hook given every "
        "Markdown file.",
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Accept only what this flow writes: no keys or entry fields it does not know, no "
        "newer minor (a newer flow's file is otherwise read, its additions kept).",
    ),
) -> None:
    """Check progress files completely: front matter, schema, transcript digests, journal and
    sidecars. Exit 0 when all are valid; otherwise the first failing file's exit code."""
    from ..base import notices
    from ..progress import validate_files

    with notices.withheld() if strict else contextlib.nullcontext():
        # --strict's errors name what a notice would.
        validation = validate_files(paths, strict=strict, only_runs=only_runs)
    if json_output:
        print_json(validation.to_dict())
    else:
        for check in validation.files:
            _print_check(check)
    if validation.exit_code:
        raise typer.Exit(validation.exit_code)


def _print_check(check: FileCheck) -> None:
    """``PATH: valid (status, N entries)`` and its warnings, or the error."""
    if check.error is not None:
        _print_error(check.path, check.error)
        return
    assert check.run is not None and check.report is not None  # a valid file has both
    run, report = check.run, check.report
    extra = ""
    if report.replayed_events:
        extra = f", {report.replayed_events} journal events not yet folded"
    out(f"{check.path}: valid ({run.status}, {len(run.transcript)} entries{extra})")
    for warning in report.warnings:
        out(f"  warning: {warning}")


def _print_error(path: Path, error: FlowError) -> None:
    """One paragraph, or for several schema problems a list of them all and the hint once."""
    problems = getattr(error, "problems", [])
    if len(problems) < 2:
        err(f"error: {error}")
        return
    err(f"error: {path}: {len(problems)} problems in the front matter:")
    for problem in problems:
        err(f"  - {problem}")
    if error.hint:
        err(error.hint)


@app.command("schema")
def schema(
    name: str = typer.Argument(
        "progress",
        metavar="NAME",
        help="Which schema: progress, workflow, batch, agent, skill, hooks or events.",
    ),
) -> None:
    """Print a JSON schema (JSON Schema 2020-12) of flow's files."""
    from ..progress import SCHEMA_NAMES, schema_text

    if name not in SCHEMA_NAMES:
        raise typer.BadParameter(f"expected one of {', '.join(SCHEMA_NAMES)}; got {name!r}.")
    out(schema_text(name).rstrip("\n"))
