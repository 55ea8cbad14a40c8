"""Benchmark of ``flow show`` on a run holding one very large message.

A progress file from anyone may hold a message of any size. Each row is one run (the small
example run plus one assistant message of the given size, Markdown prose in 70-character
lines, either in paragraphs of about 20 lines or as one paragraph, like a pasted log) shown
by ``flow show`` (terminal, to a pipe) and ``flow show --html``, each a process of its own:
wall time and that process's peak RSS. With ``--before REF`` the same commands also run the
package as it was at git commit REF (extracted with ``git archive``), and the table gives
both and their ratio; a command slower than ``--limit`` seconds is killed and shown as
``>N``::

    python bench/show_bench.py                       # this checkout only
    python bench/show_bench.py --before main         # before/after, 1, 4, 16 MB
    python bench/show_bench.py --sizes 1,4,16,200 --before main --limit 240
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Entry
from promptflow_resume.progress.store import ProgressStore

REPO = Path(__file__).resolve().parent.parent
WORDS = [
    *("the", "run", "resumed", "after", "a", "crash", "and", "the", "model", "read", "the"),
    *("file", "then", "wrote", "a", "summary", "of", "each", "step", "with", "its", "cost"),
]


SHAPES = ("paragraphs", "one paragraph")


def make_progress(path: Path, megabytes: float, shape: str) -> None:
    """Write a progress file whose last entry is a message of ``megabytes`` MB."""
    run = example_run()
    # The example's sidecar is not on disk here: drop the link.
    run.transcript = [
        dataclasses.replace(e, sidecar=None, sidecar_sha256=None, sidecar_bytes=None)
        for e in run.transcript
    ]
    rng = random.Random(7)
    size = int(megabytes * 1_000_000)
    lines: list[str] = []
    total = 0
    while total < size:
        line = " ".join(rng.choices(WORDS, k=11))
        # A blank line now and then: paragraphs, as a model writes them.
        lines.append("" if shape == "paragraphs" and rng.random() < 0.05 else line)
        total += len(line) + 1
    message = "\n".join(lines)
    run.transcript.append(Entry(len(run.transcript) + 1, "assistant", message, step="report"))
    store = ProgressStore.create(path, run)
    store.close()


def measure(argv: list[str], pythonpath: Path, limit: float) -> tuple[float | None, int]:
    """Seconds (None: killed at ``limit``) and peak RSS in KB of one ``flow`` process."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "promptflow_resume", *argv],
        env=env,
        # Not from a checkout: ``-m`` would import the package found in the working folder.
        cwd=tempfile.gettempdir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    killed = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - started > limit:
            proc.kill()
            killed = True
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if not killed and proc.returncode != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"flow {' '.join(argv)} failed ({proc.returncode}): {err}")
    return (None if killed else seconds), usage.ru_maxrss


def extract(ref: str, where: Path) -> Path:
    """The package as it was at git ``ref``, extracted under ``where``."""
    data = subprocess.run(
        # The package links its schemas from the top-level folder.
        ["git", "-C", str(REPO), "archive", ref, "promptflow_resume", "schemas"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(where, filter="data")
    return where


def _secs(value: float | None, limit: float) -> str:
    return f">{limit:.0f}" if value is None else f"{value:.2f}"


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,4,16", help="message sizes in MB, comma separated")
    parser.add_argument("--before", metavar="REF", help="also run the package at this commit")
    parser.add_argument("--limit", type=float, default=240.0, help="seconds before a kill")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        before = extract(args.before, folder / "before") if args.before else None
        head = f"{'size':>6}  {'message':<13} {'view':<8} {'after s':>8} {'RSS MB':>7}"
        if before:
            head += f" {'before s':>9} {'RSS MB':>7} {'ratio':>7}"
        print(head)
        for size in sizes:
            for shape in SHAPES:
                progress = folder / f"run-{size:g}MB-{shape.replace(' ', '-')}" / "progress.md"
                make_progress(progress, size, shape)
                _rows(progress, f"{size:>4g}MB  {shape:<13}", folder, before, args.limit)
                progress.unlink()


def _rows(progress: Path, label: str, folder: Path, before: Path | None, limit: float) -> None:
    for view, extra in (("terminal", []), ("html", ["--html", str(folder / "p.html")])):
        argv = ["show", str(progress), "--width", "100", *extra]
        after, after_rss = measure(argv, REPO, limit)
        row = f"{label} {view:<8} {_secs(after, limit):>8} {after_rss / 1024:>7.0f}"
        if before:
            old, old_rss = measure(argv, before, limit)
            ratio = "—" if old is None or not after else f"{old / after:.0f}×"
            if old is None and after:
                ratio = f">{limit / after:.0f}×"
            row += f" {_secs(old, limit):>9} {old_rss / 1024:>7.0f} {ratio:>7}"
        print(row, flush=True)


if __name__ == "__main__":
    main()
