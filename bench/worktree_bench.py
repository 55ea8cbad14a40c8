"""Benchmark of runs in a git worktree: what ``--worktree`` adds to a run, and review / merge.

The two-step workflow of ``tests/fixtures/worktree`` (two edits, one command tool, the
``scripted`` provider) runs through the library API, in-process, in a fresh git repository
holding FILES extra committed files (default 2,000, so git has a tree to copy):

- plain: ``start_run`` in the checkout itself;
- worktree: ``start_run(..., worktree=True)``: check the base, make branch and worktree (a
  checkout of every file), run, commit after each step;
- review: ``review_run`` (a temporary index staged from the worktree, stat and diff);
- merge: ``merge_run`` (a ``--no-ff`` merge into the main checkout);
- discard: ``discard_run`` (worktree and branch removed).

Medians of REPEAT rounds, each in a new repository; one table with ratios to the plain run::

    python bench/worktree_bench.py [--files 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from checkout import use_checkout

use_checkout()

from promptflow_resume.api import RunOptions, StartRequest, start_run  # noqa: E402
from promptflow_resume.worktree import discard_run, merge_run, review_run  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "worktree"
_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=_ENV, check=True, capture_output=True)


def _repo(where: Path, files: int) -> Path:
    where.mkdir(parents=True)
    _git(where, "init", "--quiet", "--initial-branch=main")
    for name in ("change.prompt.md", "change.script.yaml"):
        shutil.copy(FIXTURES / name, where / name)
    (where / "hello.txt").write_text("Hello\n")
    for i in range(files):
        folder = where / "src" / f"pkg{i // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"module{i}.py").write_text(f"VALUE = {i}\n" * 20)
    _git(where, "add", "--all")
    _git(where, "commit", "--quiet", "-m", "base")
    return where


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _round(root: Path, files: int) -> dict[str, float]:
    repo = _repo(root, files)
    old = Path.cwd()
    os.chdir(repo)
    try:
        times: dict[str, float] = {}

        def run(progress: str, worktree: bool) -> None:
            outcome = start_run(
                StartRequest(
                    "change.prompt.md",
                    recording="change.script.yaml",
                    progress=progress,
                    worktree=worktree,
                ),
                RunOptions(instructions=False),
            )
            assert outcome.exit_code == 0, outcome.run.reason

        times["plain run"] = _timed(lambda: run(".flow/runs/plain/progress.md", False))
        _git(repo, "checkout", "--quiet", "--", ".")
        _git(repo, "clean", "--quiet", "-fd", "--", "docs", "count.txt")
        progress = Path(".flow/runs/tree/progress.md")
        times["worktree run"] = _timed(lambda: run(str(progress), True))
        times["review"] = _timed(lambda: review_run(progress))
        times["merge"] = _timed(lambda: merge_run(progress))
        times["discard"] = _timed(lambda: discard_run(progress))
        return times
    finally:
        os.chdir(old)


def main() -> None:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="flow-worktree-bench-") as scratch:
        for n in range(args.repeat):
            rounds.append(_round(Path(scratch) / f"r{n}", args.files))
    medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    plain = medians["plain run"]
    print(f"{args.files} committed files, median of {args.repeat} rounds")
    print(f"{'what':<14} {'ms':>9} {'x plain run':>12}")
    for name, seconds in medians.items():
        print(f"{name:<14} {seconds * 1000:>9.1f} {seconds / plain:>12.2f}")


if __name__ == "__main__":
    main()
