"""``flow export otel PROGRESS... [--endpoint URL | --file OUT.jsonl]`` (docs/spec.md 13)."""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app, out, print_json

#: The formats ``flow export`` writes.
FORMATS = ("otel",)


@app.command("export")
def export_command(
    format: str = typer.Argument(..., metavar="FORMAT", help="What to export: otel."),
    progress: list[Path] = typer.Argument(
        ..., metavar="PROGRESS...", help="Progress files of the runs to export."
    ),
    endpoint: str | None = typer.Option(
        None,
        "--endpoint",
        metavar="URL",
        help="The OTLP/HTTP endpoint (a base URL gets /v1/traces). Default: "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, then "
        "http://localhost:4318.",
    ),
    file: Path | None = typer.Option(
        None,
        "--file",
        metavar="OUT",
        help="Write the spans to the file OUT as OTLP/JSON Lines (one ExportTraceServiceRequest "
        "a line, a line per run: what the Collector's otlpjsonfile receiver reads) instead of "
        "sending them (needs no OpenTelemetry package).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was exported as JSON."),
) -> int:
    """Export the OpenTelemetry spans of runs, made from their progress files alone: the
    spans a live run sends (same trace and span ids, structure and recorded times), also for
    runs made before tracing was on or on another machine. Sending needs the [otel] extra;
    exit 20 when the endpoint does not take the spans."""
    from ..front import export_traces

    if format not in FORMATS:
        raise typer.BadParameter(
            f"unknown format {format!r}; expected one of: {', '.join(FORMATS)}.",
            param_hint="FORMAT",
        )
    if endpoint is not None and file is not None:
        raise typer.BadParameter("give --endpoint or --file, not both.", param_hint="--file")
    summary = export_traces(progress, endpoint=endpoint, file=file)
    if as_json:
        print_json(summary.to_dict())
    else:
        runs = f"{summary.runs} run{'s' if summary.runs != 1 else ''}"
        out(f"exported {summary.spans} spans of {runs} to {summary.target}")
        for trace in summary.traces:
            out(f"  trace {trace}")
    return 0
