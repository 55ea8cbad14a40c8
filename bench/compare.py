"""One benchmark, two checkouts, the same run: medians, after ÷ before, and the noise.

    git worktree add /tmp/flow-before <commit>     # the version to compare with
    python bench/compare.py /tmp/flow-before -- bench/snapshot_bench.py --repeat 10
    python bench/compare.py /tmp/flow-before --rounds 5 -- bench/progress_bench.py --quick
    git worktree remove /tmp/flow-before

Each round runs the script (this checkout's copy: the same measurements on both sides) once
with ``FLOW_BENCH_ROOT`` naming the before checkout and once naming this one
(``bench/checkout.py``); which side goes first alternates by round, so the load of a shared
machine, which changes by the minute, falls on both alike. A line of the script's output with
a label and numbers is a row (cells split at ``|`` or at two or more spaces; ``1.2x``,
``1,000``, ``3 ms`` are numbers); a line of cells without numbers names the columns. Each
number is compared: the median of the rounds on each side, after ÷ before, and the noise of
each side, (largest − smallest) ÷ median over the rounds. A ratio inside the noise is no
change. ``--markdown`` prints the table as Markdown.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
_NUMBER = re.compile(r"^[-+]?[0-9][0-9,]*(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?(?:x| ?ms| ?s| ?MB| ?KB)?$")
_SPLIT = re.compile(r"\s*\|\s*|\s{2,}")


def _number(cell: str) -> float | None:
    cell = cell.strip()
    if not _NUMBER.match(cell):
        return None
    return float(re.sub(r"[^0-9.e+-]", "", cell.replace(",", "")))


def rows(output: str) -> dict[str, float]:
    """The numbers of a benchmark's output, each named ``row label · column``."""
    found: dict[str, float] = {}
    columns: list[str] = []
    for line in output.splitlines():
        if set(line.strip()) <= set("|-: "):
            continue
        cells = [c for c in _SPLIT.split(line.strip()) if c]
        if len(cells) < 2:
            continue
        values = [_number(c) for c in cells]
        if not any(v is not None for v in values[1:]):
            columns = cells
            continue
        label = cells[0]
        for i, value in enumerate(values[1:], start=1):
            if value is None:
                continue
            column = columns[i] if i < len(columns) and len(columns) == len(cells) else f"#{i}"
            found[f"{label} · {column}"] = value
    return found


def measure(root: Path, script: list[str]) -> dict[str, float]:
    """One run of the benchmark with ``root``'s package."""
    env = {**os.environ, "FLOW_BENCH_ROOT": str(root)}
    env.pop("PYTHONPATH", None)
    # Started outside every checkout: ``python -m`` puts its folder first on sys.path.
    done = subprocess.run(
        [sys.executable, *script],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(script)} failed with {root}:\n{done.stderr[-2000:]}")
    return rows(done.stdout)


def main() -> None:
    """Run the rounds and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="The checkout to compare with.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--column",
        action="append",
        default=[],
        help="Compare only the columns of this name (repeatable; default: every number).",
    )
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    script = argv[cut + 1 :]
    if not script:
        parser.error("name the benchmark after --: compare.py BEFORE -- SCRIPT [ARGS...]")
    script[0] = str(Path(script[0]).resolve())
    before, after = args.before.resolve(), HERE
    values: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    order: list[str] = []
    started = time.monotonic()
    for number in range(args.rounds):
        sides = [("before", before), ("after", after)]
        for side, root in sides if number % 2 == 0 else sides[::-1]:
            for name, value in measure(root, script).items():
                if args.column and name.rpartition(" · ")[2] not in args.column:
                    continue
                order.extend([name] if name not in order else [])
                values[side].setdefault(name, []).append(value)
        print(f"round {number + 1}/{args.rounds} done", file=sys.stderr)
    minutes = (time.monotonic() - started) / 60
    head = ("row", "before", "after", "after/before", "noise before", "noise after")
    lines = []
    for name in order:
        old, new = values["before"].get(name), values["after"].get(name)
        if not old or not new:
            continue
        a, b = statistics.median(old), statistics.median(new)
        ratio = f"{b / a:.2f}x" if a else "-"
        lines.append((name, f"{a:.4g}", f"{b:.4g}", ratio, _noise(old), _noise(new)))
    print(f"{' '.join(script)}: before {before}, after {after}")
    print(f"medians of {args.rounds} alternating rounds ({minutes:.1f} min); noise = range/median")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|---|" + "---:|" * (len(head) - 1))
        for line in lines:
            print("| " + " | ".join(line) + " |")
        return
    width = max([len(line[0]) for line in lines] + [3])
    print(f"{head[0]:<{width}} | " + " | ".join(f"{h:>12}" for h in head[1:]))
    for line in lines:
        print(f"{line[0]:<{width}} | " + " | ".join(f"{c:>12}" for c in line[1:]))


def _noise(samples: list[float]) -> str:
    middle = statistics.median(samples)
    if len(samples) < 2 or not middle:
        return "-"
    return f"{(max(samples) - min(samples)) / abs(middle):.0%}"


if __name__ == "__main__":
    main()
