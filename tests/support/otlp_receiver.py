"""A real OTLP/HTTP traces receiver for tests: POST /v1/traces, protobuf or JSON bodies.

Bodies are decoded with the official ``opentelemetry-proto`` package (an
``ExportTraceServiceRequest``), as a collector would, and the spans kept in the plain form
``SpanView`` (hex ids, attribute values as Python values) that tests compare::

    with OtlpReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        ...
        receiver.wait_for(lambda spans: len(spans) >= 9)
        print(tree_text(receiver.spans))
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class SpanView:
    """One received span, in a form tests compare."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: int
    status_message: str
    links: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)

    def shape(self) -> tuple[Any, ...]:
        """Everything but the resource: what live and exported spans must share."""
        return (
            self.trace_id,
            self.span_id,
            self.parent_span_id,
            self.name,
            self.kind,
            self.start_ns,
            self.end_ns,
            sorted(self.attributes.items()),
            self.status,
            self.status_message,
            self.links,
        )


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


def spans_of(request: ExportTraceServiceRequest) -> list[SpanView]:
    """The spans of a decoded export request."""
    out: list[SpanView] = []
    for resource_spans in request.resource_spans:
        resource = _attrs(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(
                    SpanView(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=span.kind,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        attributes=_attrs(span.attributes),
                        status=span.status.code,
                        status_message=span.status.message,
                        links=[
                            (link.trace_id.hex(), link.span_id.hex(), _attrs(link.attributes))
                            for link in span.links
                        ],
                        resource=resource,
                    )
                )
    return out


def decode_json_lines(text: str) -> list[ExportTraceServiceRequest]:
    """Each line of an OTLP/JSON Lines file, decoded as the Collector's ``otlpjsonfile``
    receiver does: a whole ``ExportTraceServiceRequest`` per line, parsed by
    ``opentelemetry-proto``'s JSON parser with unknown fields refused, its hex ids 16 and 8
    bytes long. Any line that is not one raises."""
    import json

    requests = []
    assert text.endswith("\n"), "a JSON Lines file ends each line, the last one too"
    for number, line in enumerate(text.split("\n")[:-1], start=1):
        assert line.strip(), f"line {number} is empty"
        request = ExportTraceServiceRequest()
        json_format.ParseDict(_base64_ids(json.loads(line)), request, ignore_unknown_fields=False)
        for span in spans_of(request):
            assert len(span.trace_id) == 32 and len(span.span_id) == 16, (number, span)
            assert len(span.parent_span_id) in (0, 16), (number, span)
        requests.append(request)
    return requests


def spans_of_json_lines(text: str) -> list[SpanView]:
    """The spans of every line of an OTLP/JSON Lines file (``decode_json_lines``)."""
    return [span for request in decode_json_lines(text) for span in spans_of(request)]


def _base64_ids(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its hex ids as base64: the protobuf JSON mapping reads bytes as base64,
    OTLP/JSON writes ids as hex (the one difference between the two, by OTLP's spec)."""
    import base64
    import copy

    data = copy.deepcopy(data)
    # The protobuf JSON mapping reads bytes as base64; OTLP/JSON writes ids as hex.
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for holder in [span, *span.get("links", [])]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in holder:
                            holder[key] = base64.b64encode(bytes.fromhex(holder[key])).decode()
    return data


class OtlpReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1 (a free port) in a background thread."""

    def __init__(self) -> None:
        self.spans: list[SpanView] = []
        self.requests = 0
        #: The ``traceparent`` of each received request's headers (none expected).
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                if "json" in (self.headers.get("Content-Type") or ""):
                    json_format.Parse(body, request)
                else:
                    request.ParseFromString(body)
                with receiver._lock:
                    receiver.spans.extend(spans_of(request))
                    receiver.requests += 1
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def clear(self) -> None:
        """Forget the spans received so far."""
        with self._lock:
            self.spans.clear()

    def of_trace(self, trace_id: str) -> list[SpanView]:
        """The spans received for one trace."""
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def wait_for(self, done: Callable[[list[SpanView]], bool], timeout: float = 20.0) -> None:
        """Wait until ``done(spans)``; AssertionError after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if done(list(self.spans)):
                    return
            time.sleep(0.05)
        raise AssertionError(f"the receiver did not get the spans: {tree_text(self.spans)}")


def tree_text(spans: list[SpanView]) -> str:
    """The spans as an indented tree (children in start order), one span a line."""
    by_parent: dict[str, list[SpanView]] = {}
    ids = {s.span_id for s in spans}
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else ""
        by_parent.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        order = sorted(
            by_parent.get(parent, []),
            key=lambda s: (s.start_ns, s.attributes.get("flow.entry", 0), s.name),
        )
        for span in order:
            lines.append("  " * depth + _label(span))
            walk(span.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)


def _label(span: SpanView) -> str:
    a = span.attributes
    bits = []
    for key, short in (
        ("gen_ai.usage.input_tokens", "in"),
        ("gen_ai.usage.output_tokens", "out"),
        ("flow.usage.cost_usd", "$"),
        ("gen_ai.response.finish_reasons", "finish"),
        ("flow.tool.kind", "kind"),
        ("flow.mcp.server", "server"),
        ("flow.status", "status"),
        ("flow.step.status", "status"),
    ):
        if key in a:
            value = a[key]
            bits.append(f"{short}={','.join(value) if isinstance(value, list) else value}")
    if span.links:
        bits.append("links=" + ",".join(str(link[2].get("flow.link", "?")) for link in span.links))
    if span.status == 2:
        bits.append("ERROR")
    ms = (span.end_ns - span.start_ns) / 1e6
    return f"{span.name} [{ms:.0f} ms] " + " ".join(bits)
