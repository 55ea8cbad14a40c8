"""Instructions per call of flow's CPU-bound hot paths, for two checkouts: the number a
shared machine does not move.

Wall and CPU times on a machine others use at the same time swing by tens of percent from one
minute to the next; ``valgrind --tool=callgrind`` counts the instructions a call executes, the
same on every run. Each case runs in a process of its own under callgrind, which counts only
inside ``functools.reduce`` (``--toggle-collect``): the case's ``--calls`` calls, made through
it after one uncounted call; the count divided by the calls is the case's instructions per
call. ``valgrind`` must be installed (``apt-get install valgrind``)::

    python bench/instructions.py                       # this checkout
    python bench/instructions.py --before /tmp/old     # and another one: their ratio

Cases, on one file of ``--entries`` transcript entries (default 3,000; 1,000 turns) written by
this checkout (``synthetic_run``, metadata on every marker as a streamed run records it) and
read by both: ``load_progress``, ``ProgressStore.open`` (and close), ``render`` of the run
read, and ``load_progress`` of the same run without the streamed-reply fields (``ttft=``,
``tps=``, which a reader before them took to its line-by-line reader). Instructions under
valgrind are not cycles (it runs SHA-256 without the CPU's SHA instructions, so hashing weighs
more than it does natively); compare them with each other, not with times.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from checkout import ROOT, use_checkout

use_checkout()

from promptflow_resume.progress import ProgressStore  # noqa: E402
from promptflow_resume.progress.examples import synthetic_run  # noqa: E402
from promptflow_resume.progress.model import Run  # noqa: E402

CASE = """
import functools, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from promptflow_resume.progress import ProgressStore, load_progress, render
case, path, calls = sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
run, _ = load_progress(path)

def call(*_):
    if case == "open":
        store, _, _ = ProgressStore.open(path)
        store.close()
    elif case == "render":
        render(run)
    else:
        load_progress(path)

call()  # warm: what a first call builds once (interned strings, compiled patterns)
# Counted: only what runs inside functools.reduce (valgrind --toggle-collect), these calls.
functools.reduce(call, range(calls + 1))
"""
CASES = ("load_progress", "open", "render", "load_progress without ttft")


def instructions(root: Path, case: str, path: Path, calls: int) -> int:
    """Instructions callgrind counts in ``calls`` calls of the case."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "case.py"
        script.write_text(CASE, encoding="utf-8")
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--toggle-collect=functools_reduce",
                f"--callgrind-out-file={os.devnull}",
                sys.executable,
                str(script),
                str(root),
                case,
                str(path),
                str(calls),
            ],
            cwd=tmp,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            capture_output=True,
            text=True,
            check=True,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no count from valgrind:\n{done.stderr[-1000:]}")
    return int(found.group(1))


def per_call(root: Path, case: str, path: Path, calls: int) -> float:
    """Instructions one call of the case executes."""
    return instructions(root, case, path, calls) / calls


def write_run(path: Path, entries: int, streamed: bool) -> Path:
    """A run flow wrote (this checkout), its replies with or without ``ttft=``/``tps=``."""
    run: Run = synthetic_run(entries)
    for entry in run.transcript:
        if entry.meta is not None and entry.role == "assistant":
            ttft, tps = (420, 84.6) if streamed else (None, None)
            entry.meta = dataclasses.replace(entry.meta, ttft=ttft, tps=tps)
    ProgressStore.create(path, run).close()
    return path


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="Another checkout, for the ratio.")
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--calls", type=int, default=2)
    args = parser.parse_args()
    sides = [("after", ROOT)] if args.before is None else [("before", args.before), ("after", ROOT)]
    head = ["case", *(side for side, _ in sides)] + (["after/before"] if args.before else [])
    print(f"instructions per call (callgrind), a run of {args.entries:,} entries; millions")
    print(" | ".join(head))
    with tempfile.TemporaryDirectory() as tmp:
        streamed = write_run(Path(tmp) / "s" / "progress.md", args.entries, True)
        plain = write_run(Path(tmp) / "p" / "progress.md", args.entries, False)
        for case in CASES:
            path = plain if case.endswith("without ttft") else streamed
            counts = [per_call(root.resolve(), case, path, args.calls) for _, root in sides]
            cells = [f"{count / 1e6:.1f}" for count in counts]
            if len(counts) == 2:
                cells.append(f"{counts[1] / counts[0]:.2f}x")
            print(" | ".join([case, *cells]))


if __name__ == "__main__":
    main()
