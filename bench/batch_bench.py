"""Benchmark of ``flow batch``: rows per second by engine and worker count, per-row overhead.

A batch of ROWS rows (default 200) of a 3-step workflow runs against a local
OpenAI-compatible server that answers at once (``tests/support/batch_server.py``), so the
numbers are flow's own cost: starting or resuming each row's run, its checkpoints, the worker
round trip and the batch file rewritten after every row. Measured:

- in-process: ``run_row`` called ROWS times in this process, one after the other (the library
  alone, no batch: the floor a row costs);
- local engine with 1, 2 and 4 worker processes (``flow batch --workers N``, library API);
- the ray engine with 2 workers (when Ray is installed), with ``ray.init()`` timed apart, in
  both ways a row reaches its files (docs/spec.md 8.6): ``shared`` (each task writes the row's
  files by path) and ``shipped`` (the workspace travels as a bundle, each task runs in a
  scratch folder and sends every write to the driver, which writes the files). A Ray of this
  machine's own is one node, so ``shipped`` here pays for the round trips and copies without
  the network a cluster adds to them.

Per-row overhead = (1-worker seconds per row) − (in-process seconds per row): what the engine
and the batch file add to each row. Prints one table with ratios to the in-process rate::

    python bench/batch_bench.py [--rows 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promptflow_resume.api import RunOptions
from promptflow_resume.batch import start_batch
from promptflow_resume.batch.worker import RowTask, run_row
from tests.support.batch_server import RowServer, write_case


def _case(root: Path, name: str, rows: int) -> Path:
    folder = root / name
    folder.mkdir()
    write_case(folder, [f"topic {i}" for i in range(rows)])
    return folder


def _in_process(folder: Path, server: RowServer, rows: int) -> float:
    workflow = str((folder / "triage.prompt.md").resolve())
    began = time.perf_counter()
    for i in range(rows):
        result = run_row(
            RowTask(
                row=i + 1,
                progress=str(folder / "rows" / f"{i + 1:04d}" / "progress.md"),
                workflow=workflow,
                inputs={"topic": f"topic {i}", "count": 1},
                workspace=str(folder),
                options={"base_url": server.url},
            )
        )
        assert result.status == "completed", result
    return time.perf_counter() - began


def _batch(
    folder: Path, server: RowServer, engine: str, workers: int, files: str | None = None
) -> float:
    os.chdir(folder)
    began = time.perf_counter()
    outcome = start_batch(
        "triage.prompt.md",
        "rows.jsonl",
        RunOptions(base_url=server.url),
        out="out",
        workers=workers,
        engine=engine,
        files=files,
    )
    seconds = time.perf_counter() - began
    assert outcome.batch.status == "completed", outcome.batch.totals()
    return seconds


def _ray_init_seconds() -> float | None:
    try:
        import ray
    except ImportError:
        return None
    began = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False, num_cpus=2)
    seconds = time.perf_counter() - began
    ray.shutdown()
    return seconds


def main() -> None:
    """Run every measurement and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--no-ray", action="store_true", help="Skip the ray engine.")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Ray's workers (and local workers) import flow from this checkout, as this process does.
    checkout = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (checkout, os.environ.get("PYTHONPATH", "")) if p
    )
    rows = args.rows
    root = Path(tempfile.mkdtemp(prefix="batch-bench-"))
    here = Path.cwd()
    results: list[tuple[str, float]] = []
    try:
        with RowServer() as server:
            base = _in_process(_case(root, "inproc", rows), server, rows)
            results.append(("in-process run_row, sequential", base))
            for workers in (1, 2, 4):
                seconds = _batch(_case(root, f"local{workers}", rows), server, "local", workers)
                results.append((f"local engine, {workers} worker{'s' * (workers > 1)}", seconds))
            ray_init = None
            if not args.no_ray:
                ray_init = _ray_init_seconds()
                if ray_init is not None:
                    for files in ("shared", "shipped"):
                        case = _case(root, f"ray2-{files}", rows)
                        seconds = _batch(case, server, "ray", 2, files)
                        results.append((f"ray, 2 workers, {files} (incl. ray.init)", seconds))
                        results.append(
                            (f"ray, 2 workers, {files} (minus ray.init)", seconds - ray_init)
                        )
    finally:
        os.chdir(here)
        shutil.rmtree(root, ignore_errors=True)

    base_rate = rows / base
    print(f"flow batch: {rows} rows x 3 steps against a local OpenAI-compatible server")
    print(f"{'configuration':<42} {'seconds':>8} {'rows/s':>8} {'ms/row':>8} {'x in-proc':>10}")
    for name, seconds in results:
        rate = rows / seconds
        print(
            f"{name:<42} {seconds:>8.2f} {rate:>8.1f} {1000 * seconds / rows:>8.1f} "
            f"{rate / base_rate:>10.2f}"
        )
    local1 = dict(results)["local engine, 1 worker"]
    print()
    print(
        "per-row overhead, local engine: "
        f"{1000 * (local1 - base) / rows:.1f} ms (1 worker vs in-process)"
    )
    shared = dict(results).get("ray, 2 workers, shared (minus ray.init)")
    shipped = dict(results).get("ray, 2 workers, shipped (minus ray.init)")
    local2 = dict(results)["local engine, 2 workers"]
    if shared is not None and shipped is not None and ray_init is not None:
        print(
            "per-row difference, ray shared vs local engine (2 workers each, ray.init() left "
            f"out): {1000 * (shared - local2) / rows:+.1f} ms; ray.init() itself {ray_init:.1f} s"
        )
        print(
            "per-row difference, ray shipped vs ray shared: "
            f"{1000 * (shipped - shared) / rows:+.1f} ms ({shared / shipped:.2f}x the rate)"
        )
    print(json.dumps({name: round(seconds, 3) for name, seconds in results}))


if __name__ == "__main__":
    main()
