"""Benchmark of the progress file: load, open, render, fold, and the per-event cost against the
floor.

Runs of 10 to 30,000 transcript entries. Three entries make one turn of an agent loop: a
300-byte model reply, a tool call and a 1 KiB tool result, so 30,000 entries are 10,000 turns.
The floor is what any durable per-event write costs on this machine: append 1.3 KiB to a file
and fsync, measured in the same run and folder. "fold" is the first fold after opening a run
(every entry rendered); "refold" a later one, after one more entry (entries unchanged since the
previous fold are reused). Goals: per-event ``save`` within 3x of that floor at every size, and
``load_progress`` and ``ProgressStore.open`` of 30,000 entries (10,000 turns) under 150 ms.
The last two columns are the least CPU time of those calls (this process's), which a loaded
machine moves far less than the wall time.

    python bench/progress_bench.py            # full table
    python bench/progress_bench.py --quick    # fewer repeats
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from checkout import use_checkout

use_checkout()

from promptflow_resume.progress import ProgressStore, load_progress, render, validate_file  # noqa: E402
from promptflow_resume.progress.examples import synthetic_run  # noqa: E402
from promptflow_resume.progress.model import Entry, Run  # noqa: E402

SIZES = (10, 100, 1_000, 10_000, 30_000)


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _cpu_ms(fn: Callable[[], object], repeats: int) -> float:
    """The least CPU time of this process over ``repeats`` calls: a call's own work, which
    other processes on a shared machine lengthen far less than its wall time (and never
    shorten)."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times) * 1000


def _events(run: Run, n: int) -> list[Entry]:
    """The next ``n`` entries of a run like the synthetic one (reply, call, result, ...)."""
    template = synthetic_run(3)
    out = []
    for i in range(n):
        base = template.transcript[i % 3]
        out.append(
            Entry(
                len(run.transcript) + i + 1,
                base.role,
                base.content,
                step="report",
                call_id=base.call_id,
                tool=base.tool,
            )
        )
    return out


def save_and_floor_ms(store: ProgressStore, run: Run, events: int) -> tuple[float, float]:
    """Median cost of one ``save`` (a new entry + the front matter state, fsync'd) and of the
    floor (append 1.3 KiB + fsync to a file in the same folder), measured alternately so both
    see the same disk and the same load."""
    path = store.path.parent / "floor.bin"
    data = b"x" * 1331 + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    saves, floors = [], []
    try:
        for entry in _events(run, events):
            start = time.perf_counter()
            os.write(fd, data)
            os.fsync(fd)
            floors.append(time.perf_counter() - start)
            run.transcript.append(entry)
            run.usage.turns += 1
            start = time.perf_counter()
            store.save(run, [entry])
            saves.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(saves) * 1000, statistics.median(floors) * 1000


def _open_close(path: Path) -> None:
    store, _, _ = ProgressStore.open(path)
    store.close()


def _first_fold_ms(path: Path, repeats: int) -> float:
    """Median cost of the first fold after opening the run (nothing rendered yet)."""
    times = []
    for i in range(repeats):
        store, run, _ = ProgressStore.open(path)
        try:
            run.updated = f"2030-01-01T00:00:{i:02d}Z"  # a change, so the file is rewritten
            start = time.perf_counter()
            store.checkpoint(run)
            times.append(time.perf_counter() - start)
        finally:
            store.close()
    return statistics.median(times) * 1000


def _refold_ms(store: ProgressStore, run: Run, repeats: int) -> float:
    """Median cost of a fold after one more entry, the previous fold's work at hand."""
    times = []
    for entry in _events(run, repeats):
        run.transcript.append(entry)
        start = time.perf_counter()
        store.checkpoint(run)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def bench(size: int, folder: Path, repeats: int, events: int) -> dict[str, float]:
    run = synthetic_run(size)
    path = folder / f"r{size}" / "progress.md"
    ProgressStore.create(path, run).close()
    row: dict[str, float] = {"entries": size, "bytes": path.stat().st_size}
    row["load"] = _median_ms(lambda: load_progress(path), repeats)
    row["validate"] = _median_ms(lambda: validate_file(path), repeats)
    row["open"] = _median_ms(lambda: _open_close(path), repeats)
    row["load cpu"] = _cpu_ms(lambda: load_progress(path), repeats)
    row["open cpu"] = _cpu_ms(lambda: _open_close(path), repeats)
    row["render"] = _median_ms(lambda: render(run), repeats)
    row["fold"] = _first_fold_ms(path, repeats)
    store, run, _ = ProgressStore.open(path)
    try:
        store.checkpoint(run)
        row["refold"] = _refold_ms(store, run, repeats)
        row["save"], row["floor"] = save_and_floor_ms(store, run, events)
        store.checkpoint(run)
    finally:
        store.close()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    repeats, events = (3, 100) if args.quick else (7, 500)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        rows = [bench(size, Path(tmp), repeats, events) for size in SIZES]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; medians in ms")
    print()
    head = (
        "| entries | file size | load_progress | validate_file | open | render | fold (render + "
        "atomic write) | refold | save per event | floor (append 1.3 KiB + fsync) | "
        "save / floor | load_progress cpu | open cpu |"
    )
    print(head)
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {int(r['entries']):,} | {r['bytes'] / 1e6:.2f} MB | {r['load']:.1f} | "
            f"{r['validate']:.1f} | {r['open']:.1f} | {r['render']:.1f} | {r['fold']:.1f} | "
            f"{r['refold']:.1f} | {r['save']:.3f} | {r['floor']:.3f} | "
            f"{r['save'] / r['floor']:.2f}x | {r['load cpu']:.1f} | {r['open cpu']:.1f} |"
        )
    big = rows[-1]
    worst = max(r["save"] / r["floor"] for r in rows)
    print()
    print(
        f"goal: save within 3x of the floor at every size: worst {worst:.2f}x -> "
        f"{'met' if worst <= 3 else 'MISSED'}"
    )
    slowest = max(big["load"], big["open"])
    print(
        f"goal: load_progress and open of {int(big['entries']):,} entries under 150 ms: "
        f"{big['load']:.0f} and {big['open']:.0f} ms -> "
        f"{'met' if slowest < 150 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
