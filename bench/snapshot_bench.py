"""Benchmark of file snapshots (docs/spec.md 12): time and objects per snapshot.

A repository of FILES files (default 10,000, in 100 folders, about 200 bytes each, committed)
gets a run's base snapshot, then REPEAT snapshots (default 20) of each case:

- none changed: the working tree as the last snapshot saw it (no commit is made);
- 1 file changed: one file rewritten between snapshots;
- 100 files changed: a hundred files rewritten between snapshots;
- 1 file added: one new untracked file;
- private index lost: the private index removed first, so it is seeded again from a copy of
  the user's index (whose stat cache spares the hashing); the first snapshot of a run, whose
  user's index is as fresh as the files, hashes every file (printed apart).

Medians in milliseconds, the ratio to "none changed", and the git objects each snapshot adds
(loose objects counted before and after). Also the cost of a restore plan and a restore of
100 files. Prints one table::

    python bench/snapshot_bench.py [--files 10000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promptflow_resume.snapshots import SnapshotRepo


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _repository(root: Path, files: int) -> list[Path]:
    _git(root, "init", "-q")
    _git(root, "config", "gc.auto", "0")  # objects are counted loose: no packing meanwhile
    paths = []
    for i in range(files):
        path = root / f"d{i % 100:02d}" / f"f{i:05d}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"file {i}\n" + "x" * 190 + "\n")
        paths.append(path)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    return paths


def _objects(root: Path) -> int:
    counts = _git(root, "count-objects", "-v")
    wanted = ("count", "in-pack")
    return sum(int(line.split(": ")[1]) for line in counts.splitlines() if line.startswith(wanted))


def _case(
    repo: SnapshotRepo, root: Path, repeat: int, change: Callable[[int], None]
) -> tuple[float, float]:
    """Median milliseconds per snapshot and mean objects added per snapshot."""
    times: list[float] = []
    added = 0
    previous = repo.tip()
    for n in range(repeat):
        change(n)
        before = _objects(root)
        began = time.perf_counter()
        taken = repo.take(previous, f"bench {n}")
        times.append((time.perf_counter() - began) * 1000)
        added += _objects(root) - before
        previous = taken.commit
    return statistics.median(times), added / repeat


def main() -> None:
    """Run the cases and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="flow-snapbench-"))
    try:
        root = scratch / "repo"
        root.mkdir()
        paths = _repository(root, args.files)
        repo = SnapshotRepo.find(root, "bench", None)
        assert repo is not None
        began = time.perf_counter()
        repo.take(None, "base")
        first = (time.perf_counter() - began) * 1000

        def rewrite(count: int) -> Callable[[int], None]:
            def change(n: int) -> None:
                for k in range(count):
                    paths[(n * count + k) % len(paths)].write_text(f"changed {n} {k}\n")

            return change

        def add(n: int) -> None:
            (root / f"new-{n}.txt").write_text(f"new {n}\n")

        def cold(n: int) -> None:
            repo.index.unlink(missing_ok=True)
            paths[n].write_text(f"cold {n}\n")

        cases = [
            ("none changed", lambda n: None),
            ("1 file changed", rewrite(1)),
            ("100 files changed", rewrite(100)),
            ("1 file added", add),
            ("private index lost (reseeded)", cold),
        ]
        rows = [(name, *_case(repo, root, args.repeat, change)) for name, change in cases]
        latest = repo.tip()
        assert latest is not None
        target = _git(root, "rev-parse", f"{latest}~{args.repeat * 2}").strip()
        began = time.perf_counter()
        plan = repo.plan_restore(target, latest)
        planned = (time.perf_counter() - began) * 1000
        began = time.perf_counter()
        repo.restore(plan)
        restored = (time.perf_counter() - began) * 1000
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    base = rows[0][1]
    print(f"snapshots of a repository of {args.files:,} files, {args.repeat} each (median)")
    print(f"first snapshot (index seeded from the user's): {first:.1f} ms")
    print()
    print(f"{'case':34} {'ms':>8} {'ratio':>7} {'objects':>8}")
    for name, ms, objects in rows:
        print(f"{name:34} {ms:8.1f} {ms / base:6.1f}x {objects:8.1f}")
    print()
    print(
        f"restore plan: {planned:.1f} ms; restore of {len(plan.write) + len(plan.delete)} "
        f"files: {restored:.1f} ms"
    )


if __name__ == "__main__":
    main()
