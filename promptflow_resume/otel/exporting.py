"""``flow export otel PROGRESS... [--endpoint URL | --file OUT.jsonl]`` (docs/spec.md 13).

The spans of runs made from their progress files alone, with the recorded times: the same
spans (ids, parents, names, attributes) a live run sent, or would have sent had tracing been
on. ``--file`` writes OTLP/JSON Lines (one ``ExportTraceServiceRequest`` a line, as the
Collector's ``otlpjsonfile`` receiver reads them) and needs no OpenTelemetry package;
otherwise the spans go to an OTLP/HTTP endpoint through the SDK's exporter (the ``[otel]`` extra)::

    summary = export_otel([Path("progress.md")], file=Path("traces.jsonl"))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.durable import replace_file
from ..base.errors import StorageError
from ..base.redact import Redactor
from ..base.textnorm import without_surrogates
from ..progress.loading import load_progress
from .otlpjson import request_json
from .sdk import flow_version, resource_attributes
from .spans import SpanRecord, capture_content, run_spans


@dataclass
class ExportSummary:
    """What an export sent or wrote."""

    runs: int
    spans: int
    traces: list[str]
    #: The endpoint's traces URL, or the file written.
    target: str

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "runs": self.runs,
            "spans": self.spans,
            "traces": self.traces,
            "target": self.target,
        }


def progress_spans(paths: list[Path]) -> tuple[list[list[SpanRecord]], list[str]]:
    """The spans of each run in ``paths`` (one list per run) and their trace ids, in the
    order given."""
    redactor = Redactor.from_environment() if capture_content() else None
    redact = (lambda text: redactor.redact(text)[0]) if redactor is not None else None
    runs: list[list[SpanRecord]] = []
    traces: list[str] = []
    for path in paths:
        run, _ = load_progress(path)
        runs.append(run_spans(run, path, redact=redact))
        traces.append(run.trace_id())
    return runs, traces


def json_lines(runs: list[list[SpanRecord]]) -> str:
    """The runs' spans as OTLP/JSON Lines: one ``ExportTraceServiceRequest`` a line, a line
    per run, no line breaks inside one: what the OpenTelemetry Collector's ``otlpjsonfile``
    receiver reads. A lone surrogate (kept exactly in a transcript) becomes U+FFFD: a line
    must be UTF-8."""
    resource, version = resource_attributes(), flow_version()
    lines = [
        json.dumps(
            request_json(spans, resource, version), ensure_ascii=False, separators=(",", ":")
        )
        for spans in runs
    ]
    return "".join(without_surrogates(line) + "\n" for line in lines)


def export_otel(
    paths: list[Path], *, endpoint: str | None = None, file: Path | None = None
) -> ExportSummary:
    """Send (or with ``file`` write, as OTLP/JSON Lines) the spans of the runs in ``paths``."""
    runs, traces = progress_spans(paths)
    count = sum(len(spans) for spans in runs)
    if file is not None:
        try:
            replace_file(file, json_lines(runs).encode("utf-8"), mode=0o644)
        except OSError as error:
            raise StorageError(
                f"could not write the spans to {file}: {error.strerror or error}.",
                hint="Choose a folder you can write to.",
            ) from None
        return ExportSummary(len(paths), count, traces, str(file))
    from .sdk import SpanSender

    sender = SpanSender(endpoint)
    try:
        sender.send([span for spans in runs for span in spans])
    finally:
        sender.close()
    return ExportSummary(len(paths), count, traces, sender.url)
