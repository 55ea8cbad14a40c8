"""Benchmark: what a hook costs.

One hook run (``tools.hookrun.run_hook``: supervisor, ``bash -c``, the event's JSON on stdin)
for a shell builtin, a bash script that reads its input, and a Python script; then whole
``flow run`` processes of the counter workflow (three tool calls, two prompts) without hooks
and with a Python audit hook on each of its six events (10 hook runs), so the per-run cost of
recording each hook run shows beside the process's own. Medians over ROUNDS::

    python bench/hooks_bench.py [ROUNDS]
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from promptflow_resume.base.redact import Redactor  # noqa: E402
from promptflow_resume.run.hookprocess import run_hook  # noqa: E402
from promptflow_resume.workflow.hookfiles import EVENTS, HookCommand  # noqa: E402

ENGINE = REPO / "tests" / "fixtures" / "engine"
AUDIT = REPO / "tests" / "fixtures" / "hooks" / "own" / "audit.py"


def _median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.1f} ms"


def one_hook(bash: str, rounds: int, folder: Path) -> list[float]:
    hook = HookCommand("preToolUse", 0, "bench", bash, env={"HOOK_LOG": str(folder / "log")})
    payload = {"timestamp": 1, "cwd": str(folder), "toolName": "bump", "toolArgs": "{}"}
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        outcome = run_hook(hook, payload, folder, Redactor({}))
        times.append(time.perf_counter() - started)
        assert not outcome.failed, outcome.describe()
    return times


def flow_runs(rounds: int, folder: Path, hooks: bool) -> list[float]:
    times = []
    for n in range(rounds):
        where = folder / f"{'h' if hooks else 'n'}{n}"
        where.mkdir()
        for name in ("counter.prompt.md", "counter.script.yaml"):
            shutil.copy(ENGINE / name, where / name)
        if hooks:
            log = str(where / "audit.jsonl")
            events = {
                e: [{"type": "command", "bash": f"{AUDIT} {e}", "env": {"HOOK_LOG": log}}]
                for e in EVENTS
            }
            spec = {"version": 1, "hooks": events}
            (where / ".github" / "hooks" / "b").mkdir(parents=True)
            (where / ".github" / "hooks" / "b" / "hooks.json").write_text(json.dumps(spec))
        argv = [sys.executable, "-m", "promptflow_resume", "run", "counter.prompt.md"]
        argv += ["--recording", "counter.script.yaml", "--progress", "run/progress.md", "--new"]
        started = time.perf_counter()
        env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(folder)}
        done = subprocess.run(argv, cwd=where, capture_output=True, env=env)
        times.append(time.perf_counter() - started)
        assert done.returncode == 0, done.stderr
    return times


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = [
            ("hook: true", _median_ms(one_hook("true", rounds, folder))),
            ("hook: bash reads stdin", _median_ms(one_hook("cat > /dev/null", rounds, folder))),
            ("hook: python3 audit.py", _median_ms(one_hook(f"{AUDIT} x", rounds, folder))),
        ]
        plain = flow_runs(rounds, folder, hooks=False)
        hooked = flow_runs(rounds, folder, hooks=True)
        rows.append(("flow run, no hooks", _median_ms(plain)))
        rows.append(("flow run, 10 audit hook runs", _median_ms(hooked)))
        per_hook = (statistics.median(hooked) - statistics.median(plain)) / 10
        rows.append(("  per hook run (difference / 10)", f"{per_hook * 1000:.1f} ms"))
    width = max(len(name) for name, _ in rows)
    print(f"{'what':<{width}}  median (of {rounds})")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
