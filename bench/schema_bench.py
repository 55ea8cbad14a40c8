"""Benchmark of the schema check on the read path: flow's compiled quick check against
fastjsonschema and jsonschema, on the front matter of a run with 800 steps.

Every ``flow`` command that opens a progress file checks its front matter against
``schemas/progress.schema.json`` once, so a checker costs its import and its compilation once
per process, then one check per read. ``base/schemacheck.py`` compiles the schema to plain
``isinstance`` checks and leaves every document it does not pass to jsonschema, which names the
problem. This script measures the alternatives on the same input (CPU time of this process;
imports in a fresh interpreter, less an empty one)::

    pip install -e '.[bench]' && python bench/schema_bench.py
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from values_bench import STEPS, front_matter_text

from promptflow_resume.base import yamlio
from promptflow_resume.base.schemacheck import compile_schema
from promptflow_resume.progress.schema import load_schema, validator_class


def _front_matter() -> Any:
    """The front matter ``bench/values_bench.py`` reads, as read back from its YAML."""
    return yamlio.load(front_matter_text())


def _cpu_ms(fn: Callable[[], object], repeats: int) -> float:
    """The median CPU time of ``repeats`` calls, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def _import_ms(module: str, repeats: int) -> float:
    """What importing ``module`` adds to a fresh interpreter's start (CPU ms, median)."""

    def cpu(code: str) -> float:
        out = subprocess.run(
            [sys.executable, "-c", f"{code}\nimport time; print(time.process_time())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return float(out.strip()) * 1000

    return statistics.median(cpu(f"import {module}") - cpu("pass") for _ in range(repeats))


def _fastjsonschema(schema: dict[str, Any]) -> Callable[[Any], object]:
    import fastjsonschema

    # A copy: fastjsonschema writes into the schema it compiles.
    check: Callable[[Any], object] = fastjsonschema.compile(
        copy.deepcopy(schema), use_default=False, use_formats=False
    )
    return check


def main() -> None:
    """Print one table: import, compilation and check, with each ratio to flow's own check."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    schema = load_schema("progress")
    data = _front_matter()
    ours = compile_schema(schema)
    assert ours is not None and ours(data)
    fast = _fastjsonschema(schema)
    full = validator_class()(schema)
    rows = [
        (
            "flow (base/schemacheck.py)",
            0.0,
            _cpu_ms(lambda: compile_schema(schema), args.repeats),
            _cpu_ms(lambda: ours(data), args.repeats),
        ),
        (
            "fastjsonschema",
            _import_ms("fastjsonschema", args.repeats),
            _cpu_ms(lambda: _fastjsonschema(schema), max(3, args.repeats // 3)),
            _cpu_ms(lambda: fast(data), args.repeats),
        ),
        (
            "jsonschema (Draft 2020-12)",
            _import_ms("jsonschema", args.repeats),
            _cpu_ms(lambda: validator_class()(schema), args.repeats),
            _cpu_ms(lambda: full.is_valid(data), args.repeats),
        ),
    ]
    base_once, base_check = rows[0][1] + rows[0][2], rows[0][3]
    print(f"progress schema, front matter of {STEPS} steps; CPU ms, median of {args.repeats}")
    print()
    print("| checker | import | compile | once per process | ratio | check | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, imported, compiled, check in rows:
        once = imported + compiled
        print(
            f"| {name} | {imported:.1f} | {compiled:.1f} | {once:.1f} | "
            f"{once / base_once:.0f}x | {check:.1f} | {check / base_check:.1f}x |"
        )


if __name__ == "__main__":
    main()
