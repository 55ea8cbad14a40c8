"""``flow validate`` and ``flow schema``: check progress files, print the JSON schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..base.errors import EXIT_OK, FlowError
from .app import app, err, out, print_json
from .options import ProgressArgs


@app.command("validate")
def validate(
    paths: ProgressArgs,
    json_output: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    """Check progress files completely: front matter, schema, transcript digests, journal and
    sidecars. Exit 0 when all are valid; otherwise the first failing file's exit code."""
    from ..progress import load_progress

    results: list[dict[str, Any]] = []
    code = EXIT_OK
    for path in paths:
        try:
            run, report = load_progress(path)
        except FlowError as error:
            code = code or error.exit_code
            results.append({"path": str(path), "valid": False, "error": error.to_dict()})
            if not json_output:
                _print_error(path, error)
            continue
        results.append(
            {
                "path": str(path),
                "valid": True,
                "run_id": run.run_id,
                "status": run.status,
                "entries": len(run.transcript),
                "edited_entries": report.edited_entries,
                "replayed_events": report.replayed_events,
                "warnings": report.warnings,
            }
        )
        if not json_output:
            extra = ""
            if report.replayed_events:
                extra = f", {report.replayed_events} journal events not yet folded"
            out(f"{path}: valid ({run.status}, {len(run.transcript)} entries{extra})")
            for warning in report.warnings:
                out(f"  warning: {warning}")
    if json_output:
        print_json(results)
    if code:
        raise typer.Exit(code)


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
        "progress", metavar="NAME", help="Which schema: progress, workflow or batch."
    ),
) -> None:
    """Print a JSON schema (JSON Schema 2020-12) of flow's files."""
    from ..progress.schema import SCHEMA_NAMES, schema_file

    if name not in SCHEMA_NAMES:
        raise typer.BadParameter(f"expected one of {', '.join(SCHEMA_NAMES)}; got {name!r}.")
    with open(schema_file(name), encoding="utf-8", newline="") as handle:
        text = handle.read()
    out(text.rstrip("\n"))
