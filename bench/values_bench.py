"""Benchmark of the value rules on the read path (docs/spec.md 10.5): what reading a front
matter and a journal costs, so that a change to the checks can be compared with the code
before it.

Three readers, each on input flow itself writes: ``yamlio.load`` of the front matter of a run
with 800 steps (every step with usage: about 5,000 scalars, 4,000 of them numbers), the schema
check of that front matter (``validate_front_matter``: the compiled quick check), and
``journal.parse_events`` of a journal of 10,000 events (one entry and three front matter
changes each). Run it against two checkouts to compare them::

    python bench/values_bench.py
    FLOW_BENCH_ROOT=/path/to/other/checkout python bench/values_bench.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from checkout import use_checkout

use_checkout()

from promptflow_resume.base import yamlio  # noqa: E402
from promptflow_resume.progress.digest import transcript_digest  # noqa: E402
from promptflow_resume.progress.examples import example_run  # noqa: E402
from promptflow_resume.progress.frontmatter import front_matter  # noqa: E402
from promptflow_resume.progress.journal import event_line, header_line, parse_events  # noqa: E402
from promptflow_resume.progress.model import LoadReport, StepState, Usage  # noqa: E402
from promptflow_resume.progress.schema import validate_front_matter  # noqa: E402

STEPS = 800
EVENTS = 10_000


def _times_ms(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """The median and the fastest of ``repeats`` calls, in CPU time of this process: on a
    shared machine other processes stretch wall time far more than they do CPU time."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000, min(times) * 1000


def front_matter_text() -> str:
    """The front matter of a run of ``STEPS`` completed steps, each with its usage, as YAML
    (``bench/schema_bench.py`` checks it too)."""
    run = example_run()
    run.steps = {
        f"step-{i}": StepState(
            status="completed",
            attempts=1,
            output_entry=i + 1,
            usage=Usage(input_tokens=1200 + i, output_tokens=300, cost_usd=0.0012 + i / 1e6),
            turns=3,
        )
        for i in range(STEPS)
    }
    data = front_matter(run, entries=len(run.transcript), digest=transcript_digest(run.transcript))
    return yamlio.dump(data)


def _journal_bytes(run_id: str) -> bytes:
    lines = [header_line(run_id)]
    for seq in range(1, EVENTS + 1):
        sets: list[tuple[list[str | int], object]] = [
            (["updated"], "2026-11-21T23:25:29Z"),
            (["usage"], {"input_tokens": 1000 * seq, "output_tokens": 90 * seq, "turns": seq}),
            (["usage", "cost_usd"], 0.000575 * seq),
        ]
        entry = {"id": seq, "role": "assistant", "content": "The build passed. " * 16}
        lines.append(event_line(seq, sets, [], [entry]))
    return b"".join(lines)


def main() -> None:
    """Print one table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    text = front_matter_text()
    data = yamlio.load(text)
    journal = _journal_bytes(example_run().run_id)
    path = Path("progress.md.journal")
    rows: list[tuple[str, Callable[[], object]]] = [
        (f"yamlio.load, front matter of {STEPS} steps", lambda: yamlio.load(text)),
        (f"validate_front_matter, {STEPS} steps", lambda: validate_front_matter(data)),
        (
            f"journal.parse_events, {EVENTS:,} events",
            lambda: parse_events(journal, path, example_run().run_id, LoadReport()),
        ),
    ]
    print(f"front matter {len(text) / 1000:.0f} KB, journal {len(journal) / 1e6:.1f} MB")
    print()
    print("| reader | median CPU ms | fastest CPU ms |")
    print("|---|---:|---:|")
    for name, fn in rows:
        fn()  # warm up: schema compiled, caches filled
        median, fastest = _times_ms(fn, args.repeats)
        print(f"| {name} | {median:.1f} | {fastest:.1f} |")


if __name__ == "__main__":
    main()
