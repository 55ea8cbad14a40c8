"""Benchmark of the similar-run check: 10, 1,000 and 10,000 progress files, cold and warm.

Writes realistic progress files (front matter as the progress store writes it, a transcript
body of a few KiB) under a temporary ``.flow/runs``, then times ``detect`` without a time
limit: *cold* with no index (every front matter is read), *warm* with the index in place
(median of several calls). The page cache is warm in both cases (the files were just
written); only the index differs. Prints a table with the ratio to each goal::

    python bench/detect_bench.py            # 10, 1000, 10000 files
    python bench/detect_bench.py 10 1000    # chosen sizes
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from checkout import use_checkout

use_checkout()

from promptflow_resume.base import yamlio  # noqa: E402
from promptflow_resume.base.retrypolicy import RetryPolicy  # noqa: E402
from promptflow_resume.detect import detect, keywords_for, list_runs  # noqa: E402
from promptflow_resume.detect.sources import INDEX_NAME  # noqa: E402
from promptflow_resume.workflow.records import Budget, Step, Workflow  # noqa: E402

COLD_GOAL_MS = 2000.0  # at 10,000 files
WARM_GOAL_MS = 100.0  # at 10,000 files
WARM_REPEATS = 7
COLD_REPEATS = 3

TOPICS = [
    ("api", "Build a REST API with JWT login", ["fastapi", "flask", "endpoints", "sessions"]),
    ("frontend", "Create a React dashboard page", ["react", "css", "charts", "tables"]),
    ("db", "Design the database schema and migrations", ["postgres", "orm", "indexes"]),
    ("queue", "Add a background worker for email jobs", ["celery", "redis", "retries"]),
    ("docs", "Write the user documentation and README", ["readme", "examples", "tutorial"]),
    ("release", "Draft release notes from the changelog", ["changelog", "version", "notes"]),
    ("tests", "Add pytest coverage for the billing module", ["pytest", "billing", "fixtures"]),
    ("deploy", "Containerize the service with Docker", ["docker", "kubernetes", "helm"]),
]
STATUSES = ["completed"] * 11 + [
    "interrupted",
    "interrupted",
    "failed",
    "failed",
    "timeout",
    "budget_exhausted",
    "needs_review",
    "paused",
    "running",
]
NOW = datetime(2026, 11, 21, 23, 0, 0, tzinfo=timezone.utc)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_workflow(name: str, description: str, extra: list[str], n_steps: int = 4) -> Workflow:
    """A Workflow record like the loader returns, for a topic."""
    steps = tuple(
        Step(
            id=f"step{i}",
            title=f"Step {i}: {extra[i % len(extra)]}",
            index=i,
            kind="prompt",
            body=f"{description}. Focus on {' and '.join(extra)}. Use ${{input:target}}.",
            hash=f"sha256:v1:{i:064x}",
            line=5 + 3 * i,
        )
        for i in range(1, n_steps + 1)
    )
    return Workflow(
        path=Path(f"workflows/{name}.prompt.md"),
        name=name,
        description=description,
        front_matter={"description": description},
        context="You are a careful senior engineer.",
        steps=steps,
        inputs={},
        commands={},
        tools=(),
        provider="openai",
        model="gpt-4o",
        params={},
        budget=Budget(),
        retry=RetryPolicy(),
        hash=f"sha256:v1:{hash((name, description)) & (2**256 - 1):064x}",
    )


def progress_text(rng: random.Random, n: int) -> tuple[str, str]:
    """(run id, file text) of one realistic progress file."""
    name, description, extra = TOPICS[rng.randrange(len(TOPICS))]
    workflow = make_workflow(name, description, extra)
    inputs = {"target": rng.choice(["service", "app", "cli", "library"]), "ticket": f"T-{n}"}
    status = rng.choice(STATUSES)
    total = len(workflow.steps)
    done = total if status == "completed" else rng.randrange(total)
    created = NOW - timedelta(minutes=rng.randrange(60 * 24 * 60))
    updated = created + timedelta(minutes=rng.randrange(1, 240))
    run_id = f"{created:%Y%m%d-%H%M%S}-{name}-{n:04x}"
    usage = {"input_tokens": 4000, "output_tokens": 900, "cached_tokens": 0, "turns": 3}
    steps: dict[str, Any] = {}
    for i, step in enumerate(workflow.steps):
        state: dict[str, Any] = {"status": "completed" if i < done else "pending"}
        if i < done:
            state.update(
                attempts=1,
                output_entry=4 * i + 4,
                started=_iso(created),
                finished=_iso(updated),
                turns=3,
                usage={**usage, "cost_usd": 0.0215},
            )
        steps[step.id] = state
    front: dict[str, Any] = {
        "flow_progress": 1,
        "run_id": run_id,
        "status": status,
    }
    if status != "completed":
        front["reason"] = {"interrupted": "Ctrl-C", "failed": "provider error 500"}.get(
            status, status.replace("_", " ")
        )
    front["workflow"] = {
        "path": f"../../../{workflow.path}",
        "name": workflow.name,
        "description": workflow.description,
        "hash": workflow.hash,
        "steps": {s.id: s.hash for s in workflow.steps},
    }
    front.update(
        created=_iso(created),
        updated=_iso(updated),
        config={"provider": "openai", "model": "gpt-4o", "params": {"temperature": 0.2}},
        inputs=inputs,
        cursor={
            "step": f"step{min(done + 1, total)}",
            "index": min(done + 1, total),
            "total": total,
        },
        steps=steps,
        usage={**usage, "turns": 3 * done, "cost_usd": round(0.0215 * done, 4)},
        attempts=[{"n": 1, "started": _iso(created), "ended": _iso(updated), "status": status}],
        keywords=keywords_for(workflow, inputs),
        transcript={"entries": 4 * done + 2, "digest": f"sha256:v1:{n:064x}"},
    )
    body = "".join(
        f"\n## {step.title}\n\n### user\n\n{step.body}\n\n### assistant\n\n"
        + "Here is the plan, step by step. " * 40
        + "\n"
        for step in workflow.steps[: done + 1]
    )
    return run_id, "---\n" + yamlio.dump(front) + "---\n# Run " + run_id + "\n" + body


def populate(root: Path, count: int, seed: int = 7) -> None:
    """Write ``count`` progress files under ``root/.flow/runs``."""
    rng = random.Random(seed)
    runs = root / ".flow" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        run_id, text = progress_text(rng, n)
        folder = runs / run_id
        folder.mkdir(exist_ok=True)
        (folder / "progress.md").write_text(text, encoding="utf-8")


def _drop_index(root: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        path = Path(str(root / ".flow" / "runs" / INDEX_NAME) + suffix)
        if path.exists():
            path.unlink()


def _timed(call: Any) -> tuple[Any, float, float]:
    """(result, wall ms, CPU ms) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def measure(count: int) -> dict[str, float]:
    """Cold and warm timings (ms, medians) for ``count`` files."""
    base = Path(tempfile.mkdtemp(prefix="flow-detect-bench-"))
    try:
        populate(base, count)
        name, description, extra = TOPICS[0]
        workflow = make_workflow(name, description, extra)
        inputs = {"target": "service", "ticket": "T-new"}

        def check(limit: float | None = None) -> Any:
            return detect(workflow, inputs, root=base, time_limit=limit, now=NOW)

        cold_wall, cold_cpu = [], []
        for _ in range(COLD_REPEATS):
            _drop_index(base)
            cold, wall, cpu = _timed(check)
            assert cold.skipped_reason is None, cold.skipped_reason
            cold_wall.append(wall)
            cold_cpu.append(cpu)
        warm_wall, warm_cpu = [], []
        for _ in range(WARM_REPEATS):
            warm, wall, cpu = _timed(check)
            warm_wall.append(wall)
            warm_cpu.append(cpu)
        assert [c.path for c in warm.candidates] == [c.path for c in cold.candidates]
        limited = check(0.2)  # the real limit, warm
        runs, list_ms, _ = _timed(lambda: list_runs(root=base, include_completed=True))
        _drop_index(base)
        cold_limited = check(0.2)
        return {
            "cold": statistics.median(cold_wall),
            "cold_cpu": statistics.median(cold_cpu),
            "warm": statistics.median(warm_wall),
            "warm_cpu": statistics.median(warm_cpu),
            "limited_ok": 1.0 if limited.skipped_reason is None else 0.0,
            "cold_limited_ok": 1.0 if cold_limited.skipped_reason is None else 0.0,
            "list": list_ms,
            "listed": float(len(runs)),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Run the benchmark and print the table."""
    sizes = [int(a) for a in argv] or [10, 1000, 10000]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"similar-run check: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"load average {load:.2f} at start"
    )
    print(
        f"goals at 10,000 files: cold < {COLD_GOAL_MS:.0f} ms, warm < {WARM_GOAL_MS:.0f} ms; "
        f"ratio = wall time / goal (below 1.00 meets it); medians of {COLD_REPEATS} cold and "
        f"{WARM_REPEATS} warm checks; CPU = this process's CPU time"
    )
    header = (
        f"| {'files':>6} | {'cold ms':>8} | {'cold CPU':>8} | {'cold/goal':>9} | "
        f"{'warm ms':>8} | {'warm CPU':>8} | {'warm/goal':>9} | {'warm in 200 ms':>14} | "
        f"{'cold in 200 ms':>14} | {'list --all ms':>13} |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for count in sizes:
        r = measure(count)
        print(
            f"| {count:>6} | {r['cold']:>8.1f} | {r['cold_cpu']:>8.1f} | "
            f"{r['cold'] / COLD_GOAL_MS:>9.2f} | {r['warm']:>8.1f} | {r['warm_cpu']:>8.1f} | "
            f"{r['warm'] / WARM_GOAL_MS:>9.2f} | "
            f"{'yes' if r['limited_ok'] else 'no (skipped)':>14} | "
            f"{'yes' if r['cold_limited_ok'] else 'no (skipped)':>14} | {r['list']:>13.1f} |"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average {load:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
