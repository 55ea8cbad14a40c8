"""Benchmark of writing message content as Markdown: what the structure check costs.

A reply is written raw (as Markdown) unless it would break the file; replies holding a code
fence or ``<`` are checked with a CommonMark parser (markdown-it-py), the rest by a pattern.
This renders and parses runs whose replies are plain prose, Markdown with headings and lists,
and Markdown with a code block (the parser's case), each the same size, and prints the times
and the ratio to prose. The store renders each entry once and reuses it at later folds, so the
check is paid once per entry.

    python bench/render_bench.py            # full table
    python bench/render_bench.py --quick    # fewer repeats
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable

from checkout import use_checkout

use_checkout()

from promptflow_resume.progress import parse, render  # noqa: E402
from promptflow_resume.progress.examples import synthetic_run  # noqa: E402
from promptflow_resume.progress.model import Run  # noqa: E402
from promptflow_resume.progress.render import raw_ok  # noqa: E402

REPLIES = {
    "prose": "The build passed and the report lists every change made since the last release. " * 3,
    "markdown": "## Changes\n\n- Fixed the fence parser.\n- Added `--since`.\n\n"
    "### Next\n\n1. Count the tests.\n2. Write the report for the team, briefly.",
    "code block": "Run this:\n\n```python\nfor item in items:\n    print(item.sku)\n```\n\n"
    "Then <b>check</b> the output against the report for the team.",
}


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _run(entries: int, reply: str) -> Run:
    run = synthetic_run(entries)
    for entry in run.transcript:
        if entry.role == "assistant":
            entry.content = reply.strip()
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--entries", type=int, default=3_000, help="entries per run")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 7
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; medians in ms")
    print(f"{args.entries:,} entries, a third of them replies of each kind")
    print()
    print("| replies | written raw | render | parse | render / prose | parse / prose |")
    print("|---|---|---:|---:|---:|---:|")
    base: dict[str, float] = {}
    for name, reply in REPLIES.items():
        run = _run(args.entries, reply)
        text = render(run)
        assert parse(text)[0] == run
        # render() checks every entry afresh (no cache): the cost of a first fold.
        r = _median_ms(functools.partial(render, run), repeats)
        p = _median_ms(functools.partial(parse, text), repeats)
        base = base or {"render": r, "parse": p}
        print(
            f"| {name} | {'yes' if raw_ok(reply.strip()) else 'no'} | {r:.1f} | {p:.1f} | "
            f"{r / base['render']:.2f}x | {p / base['parse']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
