"""Benchmark of ``flow serve``: how long its pages take, over real HTTP, against a budget.

Two folders are built: one with ``--runs`` runs (default 1,000; the example run, each with
its own id and status) and one with a run of ``--turns`` model turns (default 10,000: a reply,
a tool call and its result each, so three entries a turn). A ``flow serve`` process serves
each; every page is asked for once cold (the first request after start) and then ``--repeat``
times (the median is shown). The ratio is the median over the budget (``--budget``, 300 ms):
below 1.00 is within it. The last row is the time from an entry's append to the journal to its
event on the run's stream, against one second::

    python bench/serve_bench.py
    python bench/serve_bench.py --runs 2000 --turns 20000 --repeat 20
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from checkout import use_checkout

REPO = use_checkout()

from promptflow_resume.progress import render  # noqa: E402
from promptflow_resume.progress.examples import example_run, synthetic_run  # noqa: E402
from promptflow_resume.progress.model import Entry, RunStatus  # noqa: E402
from promptflow_resume.progress.store import ProgressStore  # noqa: E402

STATUSES: tuple[RunStatus, ...] = (
    "completed",
    "interrupted",
    "failed",
    "awaiting_approval",
    "needs_review",
)


def many_runs(folder: Path, count: int) -> None:
    """``count`` small runs under ``folder/.flow/runs``."""
    base = example_run()
    for entry in base.transcript:
        entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    for i in range(count):
        base.run_id = f"20261121-232529-bench-{i:05d}"
        base.status = STATUSES[i % len(STATUSES)]
        path = folder / ".flow" / "runs" / base.run_id / "progress.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(base), encoding="utf-8")


def long_run(folder: Path, turns: int) -> str:
    """One run of ``turns`` turns; returns its key."""
    run = synthetic_run(turns * 3)
    path = folder / "long" / "progress.md"
    path.parent.mkdir(parents=True)
    ProgressStore.create(path, run).close()
    return "0/long/progress.md"


class Served:
    """A ``flow serve`` process and its cookie."""

    def __init__(self, folder: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "promptflow_resume", "serve", str(folder), "--port", "0"],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        select.select([self.proc.stdout], [], [], 30)
        url = self.proc.stdout.readline()
        found = re.search(r":(\d+)/\?token=([\w-]+)", url)
        if found is None:
            raise SystemExit(f"flow serve printed no URL: {url!r}")
        self.port, self.token = int(found.group(1)), found.group(2)

    def cpu(self) -> float:
        """The server process's CPU seconds so far (user + system; 10 ms ticks)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def seconds(self, path: str) -> tuple[float, int]:
        """One GET: its wall time (until the last byte) and the body's size."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        started = time.perf_counter()
        conn.request(
            "GET",
            path,
            headers={
                "Host": f"127.0.0.1:{self.port}",
                "Cookie": f"flow_serve_{self.port}={self.token}",
            },
        )
        response = conn.getresponse()
        body = response.read()
        took = time.perf_counter() - started
        conn.close()
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status}")
        return took, len(body)

    def close(self) -> None:
        """Stop the server."""
        self.proc.terminate()
        self.proc.wait(timeout=15)


def live_delay(server: Served, folder: Path, repeat: int) -> float:
    """Median seconds from an entry's durable append (the journal) to its ``entries`` event
    on the run's stream, for a run this process owns (as a live ``flow run`` does)."""
    run = synthetic_run(30)
    path = folder / "live" / "progress.md"
    path.parent.mkdir(parents=True)
    store = ProgressStore.create(path, run)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request(
        "GET",
        f"/events/run/0/live/progress.md?from={len(run.transcript)}",
        headers={
            "Host": f"127.0.0.1:{server.port}",
            "Cookie": f"flow_serve_{server.port}={server.token}",
        },
    )
    stream = conn.getresponse()
    delays = []
    try:
        time.sleep(0.5)  # the stream is open and has looked at the files once
        for n in range(repeat):
            entry = Entry(len(run.transcript) + 1, "assistant", f"live entry {n}", step="report")
            run.transcript.append(entry)
            started = time.perf_counter()
            store.save(run, [entry])
            while True:
                line = stream.readline().decode()
                if line.startswith("data: ") and f"live entry {n}" in line:
                    break
            delays.append(time.perf_counter() - started)
            time.sleep(0.3)
    finally:
        conn.close()
        store.close()
    return statistics.median(delays)


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs in the list (1000)")
    parser.add_argument("--turns", type=int, default=10_000, help="turns of the long run")
    parser.add_argument("--repeat", type=int, default=10, help="requests per page after the first")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds a page may take")
    args = parser.parse_args()

    rows: list[tuple[str, float, float, int, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        lists, longs = Path(tmp) / "lists", Path(tmp) / "long"
        many_runs(lists, args.runs)
        longs.mkdir()
        key = long_run(longs, args.turns)
        cases = [
            (lists, f"runs list, {args.runs:,} runs", "/"),
            (lists, f"runs list, {args.runs:,} runs, filtered", "/?status=failed&sort=cost"),
            (longs, f"run page, {args.turns:,} turns (last 300 entries)", f"/run/{key}"),
            (longs, f"run page, {args.turns:,} turns, every entry", f"/run/{key}?start=0"),
        ]
        servers: dict[Path, Served] = {}
        try:
            for folder, label, path in cases:
                server = servers.get(folder) or servers.setdefault(folder, Served(folder))
                cpu = server.cpu()
                cold, size = server.seconds(path)
                cold_cpu = server.cpu() - cpu
                warm_times, warm_cpus = [], []
                for _ in range(args.repeat):
                    cpu = server.cpu()
                    warm_times.append(server.seconds(path)[0])
                    warm_cpus.append(server.cpu() - cpu)
                warm = statistics.median(warm_times)
                rows.append((label, cold, warm, size, cold_cpu, statistics.mean(warm_cpus)))
            delay = live_delay(servers[longs], longs, args.repeat)
        finally:
            for server in servers.values():
                server.close()

    budget_ms = args.budget * 1000
    print(f"flow serve, budget {budget_ms:.0f} ms a page; ratio = median / budget")
    print("cpu: the server process's user + system time (10 ms ticks; mean of the repeats)")
    print(
        f"{'page':<48} {'first ms':>9} {'median ms':>10} {'ratio':>6} {'KB':>8} "
        f"{'first cpu ms':>12} {'cpu ms':>8}"
    )
    for label, cold, warm, size, cold_cpu, warm_cpu in rows:
        print(
            f"{label:<48} {cold * 1000:>9.0f} {warm * 1000:>10.0f} "
            f"{warm / args.budget:>6.2f} {size / 1024:>8.0f} {cold_cpu * 1000:>12.0f} "
            f"{warm_cpu * 1000:>8.0f}"
        )
    print(
        f"{'live: journal append to entries event (1 s)':<48} {'':>9} {delay * 1000:>10.0f} "
        f"{delay:>6.2f}"
    )


if __name__ == "__main__":
    main()
