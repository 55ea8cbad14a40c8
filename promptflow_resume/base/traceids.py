"""W3C trace context ids for runs, derived from what a progress file records.

A run's trace id is derived from its run id, and every span id from the trace id and the
record the span stands for (an attempt, a step in an attempt, a transcript entry), so the
spans a run sends while it runs and those ``flow export otel`` makes from its file later have
the same ids (docs/spec.md 13)::

    trace = trace_id_for("20261121-232529-release-a1b2")
    span = span_id(trace, "entry/7")
    traceparent(trace, span)          # '00-<32 hex>-<16 hex>-01'
"""

from __future__ import annotations

import hashlib
import os
import re

#: A ``traceparent`` header value (version 00), as W3C Trace Context writes it.
TRACEPARENT = re.compile(r"00-(?!0{32})([0-9a-f]{32})-(?!0{16})([0-9a-f]{16})-([0-9a-f]{2})")
#: The environment variable a run reads its parent context from (a batch sets it per row).
TRACEPARENT_VARIABLE = "TRACEPARENT"
#: Set (to anything but ``0``/``false``) by ``--otel``: tracing is on without an endpoint
#: variable, in this process and those it starts (batch workers).
OTEL_VARIABLE = "FLOW_OTEL"
#: The standard variables naming an OTLP endpoint; either switches tracing on.
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def tracing_on(option: bool = False) -> bool:
    """True when runs send spans (docs/spec.md 13): ``--otel`` (``option``), ``$FLOW_OTEL``,
    or an OTLP endpoint variable."""
    if option or os.environ.get(OTEL_VARIABLE, "").strip().lower() not in ("", "0", "false"):
        return True
    return any(os.environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def _hex(text: str, digits: int) -> str:
    value = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:digits]
    # An all-zero id is invalid; one in 2**64 hashes, but it must never be sent.
    return value if value.strip("0") else "1".rjust(digits, "0")


def trace_id_for(run_id: str) -> str:
    """The trace id of the run ``run_id`` (32 lowercase hex digits)."""
    return _hex(f"flow-trace/{run_id}", 32)


def span_id(trace_id: str, key: str) -> str:
    """The id of the span that stands for ``key`` in the trace ``trace_id`` (16 hex digits).

    Keys: ``attempt/N``, ``step/N/STEP`` (a step within attempt N), ``entry/ID`` (a model
    reply, a tool call by its ``tool_call`` entry, a compaction), ``batch`` (a batch's span).
    """
    return _hex(f"{trace_id}/{key}", 16)


def traceparent(trace_id: str, span: str, sampled: bool = True) -> str:
    """The ``traceparent`` value naming the span ``span`` of ``trace_id``."""
    return f"00-{trace_id}-{span}-{'01' if sampled else '00'}"


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """The trace id and span id of a ``traceparent`` value, or None when it is not one."""
    if not value:
        return None
    match = TRACEPARENT.fullmatch(value.strip().lower())
    return (match.group(1), match.group(2)) if match else None
