"""``flow export otel PROGRESS... [--endpoint URL | --file OUT.json]`` (docs/spec.md 13).

The spans of runs made from their progress files alone, with the recorded times: the same
spans (ids, parents, names, attributes) a live run sent, or would have sent had tracing been
on. ``--file`` writes OTLP/JSON and needs no OpenTelemetry package; otherwise the spans go to
an OTLP/HTTP endpoint through the SDK's exporter (the ``[otel]`` extra)::

    summary = export_otel([Path("progress.md")], file=Path("trace.json"))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.durable import replace_file
from ..base.errors import StorageError
from ..base.redact import Redactor
from ..progress.store import load_progress
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


def progress_spans(paths: list[Path]) -> tuple[list[SpanRecord], list[str]]:
    """The spans of the runs in ``paths``, and their trace ids, in the order given."""
    redactor = Redactor.from_environment() if capture_content() else None
    redact = (lambda text: redactor.redact(text)[0]) if redactor is not None else None
    spans: list[SpanRecord] = []
    traces: list[str] = []
    for path in paths:
        run, _ = load_progress(path)
        spans.extend(run_spans(run, path, redact=redact))
        traces.append(run.trace_id())
    return spans, traces


def export_otel(
    paths: list[Path], *, endpoint: str | None = None, file: Path | None = None
) -> ExportSummary:
    """Send (or with ``file`` write) the spans of the runs in ``paths``."""
    spans, traces = progress_spans(paths)
    if file is not None:
        data = request_json(spans, resource_attributes(), flow_version())
        text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
        try:
            replace_file(file, text.encode("utf-8", "surrogatepass"), mode=0o644)
        except OSError as error:
            raise StorageError(
                f"could not write the spans to {file}: {error.strerror or error}.",
                hint="Choose a folder you can write to.",
            ) from None
        return ExportSummary(len(paths), len(spans), traces, str(file))
    from .sdk import SpanSender

    sender = SpanSender(endpoint)
    try:
        sender.send(spans)
    finally:
        sender.close()
    return ExportSummary(len(paths), len(spans), traces, sender.url)
