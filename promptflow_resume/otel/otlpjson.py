"""Spans as OTLP/JSON (``flow export otel --file``): the protobuf JSON mapping of an
``ExportTraceServiceRequest``, with trace and span ids as hex strings as OTLP/JSON writes
them. Needs no OpenTelemetry package."""

from __future__ import annotations

from typing import Any

from .spans import AttrValue, SpanRecord

#: OTLP's ``Span.SpanKind`` and ``Status.StatusCode`` numbers.
KINDS = {"internal": 1, "server": 2, "client": 3}
STATUS_CODES = {"unset": 0, "ok": 1, "error": 2}
SCOPE = "promptflow_resume"


def _value(value: AttrValue) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": value}


def attributes(values: dict[str, AttrValue]) -> list[dict[str, Any]]:
    """OTLP/JSON ``KeyValue`` list."""
    return [{"key": key, "value": _value(value)} for key, value in values.items()]


def span_json(span: SpanRecord) -> dict[str, Any]:
    """One span in OTLP/JSON."""
    out: dict[str, Any] = {
        "traceId": span.trace_id,
        "spanId": span.span_id,
        "name": span.name,
        "kind": KINDS[span.kind],
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": attributes(span.attributes),
        "status": {"code": STATUS_CODES[span.status]},
    }
    if span.parent_span_id:
        out["parentSpanId"] = span.parent_span_id
    if span.status_message:
        out["status"]["message"] = span.status_message
    if span.links:
        out["links"] = [
            {
                "traceId": link.trace_id,
                "spanId": link.span_id,
                "attributes": attributes(link.attributes),
            }
            for link in span.links
        ]
    return out


def request_json(
    spans: list[SpanRecord], resource: dict[str, AttrValue], version: str
) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` holding ``spans`` in OTLP/JSON."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": attributes(resource)},
                "scopeSpans": [
                    {
                        "scope": {"name": SCOPE, "version": version},
                        "spans": [span_json(s) for s in spans],
                    }
                ],
            }
        ]
    }
