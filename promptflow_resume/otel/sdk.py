"""Sending spans with the OpenTelemetry SDK's OTLP/HTTP exporter (the ``[otel]`` extra).

The only module that imports ``opentelemetry``, and only when spans are sent: a run without
tracing never loads it (tests/guards watch the start-up imports). The exporter reads the
standard variables (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
``..._HEADERS``, ``..._TIMEOUT``, ``..._COMPRESSION``); ``endpoint`` overrides the first two.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ..base.errors import TelemetryError
from ..base.traceids import ENDPOINT_VARIABLES
from .spans import SpanRecord

TRACES_PATH = "/v1/traces"


def configured_endpoint() -> str | None:
    """The endpoint the standard variables name, or None."""
    for name in ENDPOINT_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def traces_url(endpoint: str) -> str:
    """``endpoint`` as the exporter's traces URL: a base URL gets ``/v1/traces``."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def flow_version() -> str:
    """This flow's version, as installed (the spans' ``service.version``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("promptflow-resume")
    except PackageNotFoundError:
        return "0+unknown"


def resource_attributes() -> dict[str, Any]:
    """The resource every span of flow's is sent with."""
    return {
        "service.name": os.environ.get("OTEL_SERVICE_NAME") or "flow",
        "service.version": flow_version(),
    }


class SpanSender:
    """An OTLP/HTTP exporter for one run or one export; ``send`` may be called many times."""

    def __init__(self, endpoint: str | None = None) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        except ImportError:
            raise TelemetryError(
                "tracing is on, but the OpenTelemetry SDK is not installed.",
                hint="Install it with: pip install 'promptflow-resume[otel]' "
                "(or unset OTEL_EXPORTER_OTLP_ENDPOINT).",
            ) from None
        # The exporter logs each retry and failure; flow says what failed, once, itself.
        logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
        chosen = endpoint or configured_endpoint()
        if (chosen and not os.environ.get(ENDPOINT_VARIABLES[0])) or endpoint:
            url: str | None = traces_url(chosen) if chosen else None
        else:
            url = None  # the exporter reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT itself
        self.url = url or chosen or "http://localhost:4318/v1/traces"
        self._exporter: Any = OTLPSpanExporter(endpoint=url) if url else OTLPSpanExporter()
        self._resource = Resource.create(resource_attributes())
        self._scope = InstrumentationScope("promptflow_resume", flow_version())

    def send(self, spans: list[SpanRecord]) -> None:
        """Send ``spans``; TelemetryError when the endpoint does not take them."""
        if not spans:
            return
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self._exporter.export([self._readable(s) for s in spans])
        if result is not SpanExportResult.SUCCESS:
            raise TelemetryError(
                f"the OTLP endpoint {self.url} did not take {len(spans)} spans.",
                hint="Check that a collector listens there (OTEL_EXPORTER_OTLP_ENDPOINT or "
                "--endpoint), or write the spans to a file with --file OUT.jsonl.",
            )

    def close(self) -> None:
        """Shut the exporter down."""
        self._exporter.shutdown()

    def _readable(self, span: SpanRecord) -> Any:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

        def context(trace_id: str, span_id: str) -> SpanContext:
            return SpanContext(
                trace_id=int(trace_id, 16),
                span_id=int(span_id, 16),
                is_remote=False,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )

        parent = context(span.trace_id, span.parent_span_id) if span.parent_span_id else None
        codes = {"unset": StatusCode.UNSET, "ok": StatusCode.OK, "error": StatusCode.ERROR}
        return ReadableSpan(
            name=span.name,
            context=context(span.trace_id, span.span_id),
            parent=parent,
            resource=self._resource,
            attributes=dict(span.attributes),
            links=[
                Link(context(link.trace_id, link.span_id), dict(link.attributes))
                for link in span.links
            ],
            kind=SpanKind.CLIENT if span.kind == "client" else SpanKind.INTERNAL,
            status=Status(codes[span.status], span.status_message or None),
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=self._scope,
        )
