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
(loose objects counted before and after). Also a run's base snapshot (a new run id each time,
its private index seeded from the user's), a restore plan and a restore of the files the last
``2 x REPEAT`` snapshots changed (40 by default), back and forth between two snapshots, and the
goal of each row a person waits for. Prints one table::

    python bench/snapshot_bench.py [--files 10000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from checkout import use_checkout

use_checkout()

from promptflow_resume.snapshots import SnapshotRepo  # noqa: E402


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


class Clock:
    """Wall and CPU milliseconds of what runs between ``start`` and ``stop``: the CPU time of
    this process and of the git processes it waited for, which a loaded machine moves far
    less than the wall time."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    @staticmethod
    def _cpu() -> float:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + children.ru_utime + children.ru_stime

    def start(self) -> None:
        """Start one sample."""
        self._began, self._began_cpu = time.perf_counter(), self._cpu()

    def stop(self) -> None:
        """End the sample."""
        self.wall.append((time.perf_counter() - self._began) * 1000)
        self.cpu.append((self._cpu() - self._began_cpu) * 1000)

    def medians(self) -> tuple[float, float]:
        """Median wall and CPU milliseconds."""
        return statistics.median(self.wall), statistics.median(self.cpu)


def _case(
    repo: SnapshotRepo, root: Path, repeat: int, change: Callable[[int], None]
) -> tuple[float, float, float]:
    """Median wall and CPU milliseconds per snapshot and mean objects added per snapshot."""
    clock = Clock()
    added = 0
    previous = repo.tip()
    for n in range(repeat):
        change(n)
        before = _objects(root)
        clock.start()
        taken = repo.take(previous, f"bench {n}")
        clock.stop()
        added += _objects(root) - before
        previous = taken.commit
    return *clock.medians(), added / repeat


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
        firsts = Clock()
        for n in range(min(args.repeat, 10)):
            # A run's base snapshot: its private index seeded from a copy of the user's.
            fresh = SnapshotRepo.find(root, f"bench-base-{n}", None)
            assert fresh is not None
            firsts.start()
            fresh.take(None, "base")
            firsts.stop()
        repo = SnapshotRepo.find(root, "bench", None)
        assert repo is not None
        repo.take(None, "base")

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
        plans, restores = Clock(), Clock()
        there, back = target, latest
        for _ in range(min(args.repeat, 6)):
            # Back and forth between the two snapshots: each restore writes the same files.
            plans.start()
            plan = repo.plan_restore(there, back)
            plans.stop()
            restores.start()
            repo.restore(plan)
            restores.stop()
            there, back = back, there
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    base = rows[0][1]
    files = len(plan.write) + len(plan.delete)
    nan = float("nan")
    rows.insert(0, ("base snapshot (index seeded from the user's)", *firsts.medians(), nan))
    rows.append(("restore plan", *plans.medians(), nan))
    rows.append((f"restore of {files} files", *restores.medians(), nan))
    print(f"snapshots of a repository of {args.files:,} files, {args.repeat} each (median)")
    print("cpu ms: this process and the git processes it started, user + system")
    print()
    head = f"{'case':46} {'ms':>8} {'cpu ms':>8} {'ratio':>7} {'objects':>8} {'goal ms':>8}"
    print(head)
    for name, ms, cpu, objects in rows:
        goal = GOALS.get(name.split(" of ")[0] if name.startswith("restore of") else name)
        print(
            f"{name:46} {ms:8.1f} {cpu:8.1f} {ms / base:6.1f}x "
            f"{'-' if objects != objects else f'{objects:.1f}':>8} "  # nan: not counted
            f"{'-' if goal is None else goal:>8}"
        )


#: What a person should wait for at most (issue 47), milliseconds.
GOALS = {
    "1 file changed": 20,
    "base snapshot (index seeded from the user's)": 20,
    "restore plan": 20,
    "restore": 40,
}


if __name__ == "__main__":
    main()
