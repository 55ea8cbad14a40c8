"""OpenTelemetry traces of runs (docs/spec.md 13).

``spans`` makes the spans of a run from what its progress file records; ``live`` sends them
while a run goes on (``--otel`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``), ``exporting`` from any
progress file afterwards (``flow export otel``). The OpenTelemetry SDK and its OTLP exporter
(the ``[otel]`` extra) are imported only by ``sdk``, and only when spans are sent::

    from promptflow_resume.otel.spans import run_spans
    spans = run_spans(run, progress_path)
"""
