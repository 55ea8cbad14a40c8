"""Benchmark of the search tools on a generated 10,000-file repository.

A model that searches a real repository calls ``search_files`` (text/regex) and
``list_files`` (globs) many times per run, so each query must stay short on a large
workspace: the goal is at most 200 ms per query once the files are in the page cache
("warm"). The repository has 10,000 source files of 1–7 KB in 250 folders, plus folders that
must not be searched (``node_modules``, ``.git``, and a ``build/`` folder named in
``.gitignore``). Each row is the median of several runs, with ``grep -rn`` over the same tree
as a reference (ratio = ours / grep)::

    python bench/search_bench.py            # prints a table
    python bench/search_bench.py --files 2000
"""

from __future__ import annotations

import argparse
import functools
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from promptflow_resume.tools.builtin import ListFiles
from promptflow_resume.tools.codebase import CodebaseSearch
from promptflow_resume.tools.filescan import clear_cache
from promptflow_resume.tools.searchfiles import SearchFiles
from promptflow_resume.tools.tool import ToolContext

GOAL_MS = 200.0
REPEATS = 5
WORDS = [
    "load",
    "save",
    "parse",
    "render",
    "check",
    "store",
    "index",
    "value",
    "token",
    "step",
    "run",
    "resume",
    "model",
    "tool",
    "file",
    "path",
    "name",
    "text",
    "line",
    "cursor",
    "budget",
    "retry",
    "provider",
    "reply",
    "usage",
    "cost",
    "journal",
    "fold",
]


def make_repo(root: Path, files: int, seed: int = 7) -> None:
    """``files`` source files under ``root``, plus ignored folders full of decoys."""
    rng = random.Random(seed)
    folders = [root / f"pkg{i // 25}" / f"mod{i % 25}" for i in range(250)]
    for n in range(files):
        folder = folders[n % len(folders)]
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for _ in range(rng.randint(30, 120)):
            a, b, c = rng.choices(WORDS, k=3)
            lines.append(f"def {a}_{b}(self, {c}: int) -> str:  # {rng.random():.6f}")
        if n % 997 == 0:
            lines.append("NEEDLE_CONSTANT = 'found me'")
        suffix = ".py" if n % 3 else ".ts"
        (folder / f"file{n}{suffix}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for ignored in ("node_modules/lib", ".git/objects", "build/out"):
        (root / ignored).mkdir(parents=True, exist_ok=True)
        for n in range(300):
            (root / ignored / f"junk{n}.js").write_text("NEEDLE_CONSTANT = 1\n" * 50)
    (root / ".gitignore").write_text("build/\n*.log\n")


def median_ms(action: Callable[[], object]) -> float:
    action()  # warm: the page cache and any compiled patterns
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="flow-search-bench-"))
    try:
        make_repo(workdir, args.files)
        ctx = ToolContext(workdir)
        search, listing, codebase = SearchFiles(), ListFiles(), CodebaseSearch()
        queries: list[tuple[str, Callable[[], object], list[str] | None]] = [
            (
                "literal, 11 hits",
                lambda: search.run({"pattern": "NEEDLE_CONSTANT"}, ctx),
                [
                    "grep",
                    "-rn",
                    "--exclude-dir=node_modules",
                    "--exclude-dir=.git",
                    "--exclude-dir=build",
                    "NEEDLE_CONSTANT",
                    ".",
                ],
            ),
            (
                "regex, no hit",
                lambda: search.run({"pattern": r"def \w+_missing\("}, ctx),
                [
                    "grep",
                    "-rnE",
                    "--exclude-dir=node_modules",
                    "--exclude-dir=.git",
                    "--exclude-dir=build",
                    r"def [a-z_]+_missing\(",
                    ".",
                ],
            ),
            (
                "(?i) word, capped at 200",
                lambda: search.run({"pattern": "(?i)journal_fold"}, ctx),
                None,
            ),
            (
                "literal in *.ts only",
                lambda: search.run({"pattern": "NEEDLE_CONSTANT", "glob": "*.ts"}, ctx),
                None,
            ),
            ("list **/*.ts", lambda: listing.run({"pattern": "**/*.ts"}, ctx), None),
            (
                "codebase_search, 3 words",
                lambda: codebase.run({"query": "where is the journal fold cursor"}, ctx),
                None,
            ),
        ]
        clear_cache()
        start = time.perf_counter()
        found = search.run({"pattern": "NEEDLE_CONSTANT"}, ctx).content
        cold_ms = (time.perf_counter() - start) * 1000
        assert "node_modules" not in found and "build/" not in found, "ignored folders searched"
        print(
            f"search over {args.files:,} files (median of {REPEATS}, warm); goal {GOAL_MS:.0f} ms"
        )
        print(f"{'query':<28} {'flow ms':>9} {'grep ms':>9} {'ratio':>7} {'goal':>6}")
        for label, action, grep in queries:
            ours = median_ms(action)
            theirs = None
            if grep and shutil.which("grep"):
                theirs = median_ms(
                    functools.partial(
                        subprocess.run, grep, cwd=workdir, capture_output=True, check=False
                    )
                )
            ratio = f"{ours / theirs:6.1f}x" if theirs else "      -"
            grep_ms = f"{theirs:9.1f}" if theirs else "        -"
            ok = "ok" if ours <= GOAL_MS else "SLOW"
            print(f"{label:<28} {ours:9.1f} {grep_ms} {ratio} {ok:>6}")
        print(f"{'literal, cold (first query)':<28} {cold_ms:9.1f}   (reads every file once)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
