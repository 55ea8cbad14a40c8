"""Benchmark of secret redaction on 1 MB of text.

Redaction runs on every transcript entry, tool result and sidecar before it is written, so
its cost per megabyte decides whether large tool outputs slow a run down. Four kinds of
text (Markdown prose, Python code, JSON tool output, and text with a secret every ~2 KB),
each about 1 MB, with 0, 10 and 100 secret environment variables. Each row gives the median
of several runs and two comparisons: the same shapes and values joined into one regular
expression (the obvious design, which ``redact`` avoids), and writing the same text to a
file with fsync (what the redacted text is on its way to)::

    python bench/redact_bench.py
"""

from __future__ import annotations

import os
import random
import re
import statistics
import string
import tempfile
import time
from collections.abc import Callable

from promptflow_resume.base import redact
from promptflow_resume.base.redact import Redactor

SIZE = 1_000_000
REPEATS = 5
GOAL_MS = 50.0  # per MB, with 10 secret variables
PROSE_WORDS = re.findall(
    r"\w+",
    "the run resumed after a crash and the model read the file then wrote a summary of each "
    "step with its cost tokens and status while the reviewer checked the diff",
)


def _prose(rng: random.Random) -> str:
    words = PROSE_WORDS
    lines: list[str] = []
    while sum(map(len, lines)) < SIZE:
        kind = rng.random()
        if kind < 0.1:
            lines.append(f"## Step {rng.randint(1, 40)}: {' '.join(rng.choices(words, k=3))}")
        elif kind < 0.2:
            lines.append(f"- **Note:** {' '.join(rng.choices(words, k=8))}.")
        else:
            lines.append(" ".join(rng.choices(words, k=14)).capitalize() + ".")
    return "\n".join(lines)


def _code(rng: random.Random) -> str:
    snippets = [
        "def load(path: str) -> dict[str, Any]:",
        '    api_key = os.environ["OPENAI_API_KEY"]',
        "    MAX_TOKENS = 4096",
        "    result = client.get(url, headers={'Accept': 'application/json'})",
        "    return {key: value for key, value in items if value is not None}",
        "class Store:  # keeps the checkpoint",
        "    SECRET_KEY = load_secret(settings.path)",
        "    digest = 'sha256:v1:' + hashlib.sha256(data).hexdigest()",
    ]
    lines: list[str] = []
    while sum(map(len, lines)) < SIZE:
        lines.append(rng.choice(snippets))
    return "\n".join(lines)


def _json(rng: random.Random) -> str:
    rows: list[str] = []
    while sum(map(len, rows)) < SIZE:
        row = {
            "id": f"{rng.getrandbits(128):032x}",
            "created": "2026-01-02T03:04:05Z",
            "url": f"https://api.example.com/v1/items/{rng.randint(1, 10**6)}",
            "status": rng.choice(["ok", "failed", "pending"]),
            "size": rng.randint(0, 10**9),
        }
        rows.append(str(row).replace("'", '"'))
    return "[\n" + ",\n".join(rows) + "\n]"


def _dense(rng: random.Random, env: dict[str, str]) -> str:
    base = _prose(rng)
    values = list(env.values()) or ["x"]
    pieces = []
    for i in range(0, len(base), 2000):
        pieces.append(base[i : i + 2000])
        pieces.append(
            rng.choice(
                [
                    f" Authorization: Bearer {_token(rng, 32)} ",
                    f" key sk-{_token(rng, 48)} ",
                    f" export DB_PASSWORD={_token(rng, 16)}\n",
                    f" {rng.choice(values)} ",
                ]
            )
        )
    return "".join(pieces)


def _token(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(string.ascii_letters + string.digits, k=n - 1)) + "7"


def _environment(rng: random.Random, n: int) -> dict[str, str]:
    return {f"SERVICE_{i}_API_KEY": _token(rng, 32) for i in range(n)}


def _one_regex(redactor_env: dict[str, str]) -> Callable[[str], str]:
    """The baseline: every shape and value in one alternation, one pass."""
    values = sorted(redactor_env.values(), key=len, reverse=True)
    shapes = [rx.replace("(?P<keep>", "(?:") for _, _, rx in redact._SHAPES]
    parts = [re.escape(v) for v in values] + shapes
    pattern = re.compile("|".join(f"(?:{p})" for p in parts))
    return lambda text: pattern.sub("[REDACTED]", text)


def _write_fsync(folder: str) -> Callable[[str], object]:
    path = os.path.join(folder, "out.md")

    def write(text: str) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    return write


def _median_ms(fn: Callable[[str], object], text: str) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    """Print the table."""
    rng = random.Random(7)
    folder = tempfile.mkdtemp(prefix="redact-bench-")
    write = _write_fsync(folder)
    print(
        f"{'text':<6} {'env vars':>8} {'MB':>5} {'redactions':>10} {'ms/MB':>7} "
        f"{'one regex':>10} {'speed-up':>8} {'write+fsync':>11} {'redact/write':>12}"
    )
    worst = 0.0
    for n_env in (0, 10, 100):
        env = _environment(rng, n_env)
        redactor = Redactor.from_environment(env)
        baseline = _one_regex(env)
        texts = {
            "prose": _prose(rng),
            "code": _code(rng),
            "json": _json(rng),
            "dense": _dense(rng, env),
        }
        for kind, text in texts.items():
            mb = len(text) / 1e6
            count = redactor.redact(text)[1]
            ours = _median_ms(redactor.redact, text) / mb
            naive = _median_ms(baseline, text) / mb
            disk = _median_ms(write, text) / mb
            if n_env == 10:
                worst = max(worst, ours)
            print(
                f"{kind:<6} {n_env:>8} {mb:>5.2f} {count:>10} {ours:>7.1f} {naive:>10.1f} "
                f"{naive / ours:>7.1f}x {disk:>11.1f} {ours / disk:>11.1f}x"
            )
    os.remove(os.path.join(folder, "out.md"))
    os.rmdir(folder)
    print("(ms per MB, medians; one regex = all shapes and values in one alternation)")
    verdict = "meets" if worst <= GOAL_MS else "misses"
    print(f"\nworst case with 10 secret variables: {worst:.1f} ms/MB ({verdict} {GOAL_MS:g} ms/MB)")


if __name__ == "__main__":
    main()
