"""Start-up, resume and long-run costs, phase by phase; and readers polling a live run.

    python bench/resume_bench.py                      # the table, this checkout
    python bench/resume_bench.py --root ../other      # the same table for another checkout
    python bench/resume_bench.py --importtime         # + the top `-X importtime` entries
    python bench/resume_bench.py --openai             # only the openai resume rows
    python bench/resume_bench.py --readers 1000       # readers-during-writes stress mode
    python bench/resume_bench.py --compare ../base --rounds 3
                                   # before (../base) and after (this checkout), run
                                   # alternately round by round: medians and after/before
    python bench/resume_bench.py --compare ../base --openai --rounds 5   # those rows only
    python bench/resume_bench.py --compare ../base --before-python ../venv-base/bin/python
                                   # the same, the before side with its own installed
                                   # dependencies (e.g. another typer)

Runs are built with the real engine and store from an instant in-process model and tool (a
turn: a 300-byte reply with one tool call, and a 1 KiB result), so every number is flow's own
work. Wall times are medians of ``--repeat`` runs of a new process, bytecode cached.

Rows:
- ``flow --version`` / ``--help``: process start to exit.
- ``status --json`` at 1,000 turns.
- resume, start to first model request: ``flow resume`` with ``echo`` on a run stopped after a
  tool result, killed at its first model reply;
- the same with the ``openai`` provider against the local OpenAI-protocol server
  (``tests/providers_server.py``), timed until the server receives the request, and split:
  the interpreter's start (``python -c pass``), the ``openai`` SDK's import (``python -c
  "import openai"`` less that; both end with ``os._exit``: flow's row ends before any
  shutdown too), and flow's part (the rest), against its target of 150 ms; also
  the SDK alone reaching the same server (import, client, one request), so flow's part beyond
  all the SDK's own work shows too; and the same split in CPU time (each process's user +
  system time, flow's to its end just after the reply), which a loaded machine moves far
  less than the wall time. The model is ``gpt-4.1``, whose window holds the 1,000 turns, so
  the first request is the step's next turn, not a compaction;
- then the echo resume's phases measured in one process:
  interpreter, imports (the CLI and what resume loads), ``ProgressStore.open``, building the
  request, the final fold after one more turn.
- per-turn overhead over a 10,000-turn run, and its last 1,000 turns ÷ its first 1,000; the
  same in CPU time of the process (flow's own work without the disk's fsync waits, which on a
  shared machine swamp the wall time).
- peak RSS of ``flow resume`` at 10,000 turns.
- progress.md + journal ÷ payload, for a run killed mid-step.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _root_from_argv() -> Path:
    if "--root" in sys.argv:
        return Path(sys.argv[sys.argv.index("--root") + 1]).resolve()
    return Path(os.environ.get("FLOW_BENCH_ROOT") or HERE).resolve()  # see bench/checkout.py


ROOT = _root_from_argv()
sys.path.insert(0, str(ROOT))

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from promptflow_resume.base.redact import Redactor  # noqa: E402
from promptflow_resume.chat import ToolCall, ToolSpec  # noqa: E402
from promptflow_resume.progress import ProgressStore, journal_path  # noqa: E402
from promptflow_resume.providers.provider import Reply, ReplyUsage  # noqa: E402
from promptflow_resume.run.attempt import new_run  # noqa: E402
from promptflow_resume.run.engine import Engine, EngineOptions  # noqa: E402
from promptflow_resume.run.events import Reporter  # noqa: E402
from promptflow_resume.tools.tool import ToolContext, ToolResult  # noqa: E402
from promptflow_resume.workflow import load_workflow  # noqa: E402
from tests.support.providers_server import Canned, ModelServer, Received, openai_completion  # noqa: E402

REPLY = "The next step is to look at the build output once more, " * 5  # ~300 bytes
RESULT = "line of tool output with some detail in it .....\n" * 21  # ~1 KiB
WORKFLOW = """---
description: Benchmark loop
commands:
  probe:
    description: Look at something
    argv: ["true"]
    idempotent: true
tools: [probe]
---
You are a benchmark.

## Step 1: Loop
Call the tool until you are done.
"""


class InstantModel:
    """``turns`` replies with one tool call, then a final one; notes when each call came."""

    name = "bench"

    def __init__(self, turns: int, delay: float = 0.0) -> None:
        self.turns = turns
        self.delay = delay
        self.done = 0
        self.times: list[float] = []
        self.cpu: list[float] = []

    def complete(self, request: Any, on_text: Any = None) -> Reply:
        """Reply at once (or after ``delay`` seconds)."""
        if self.delay:
            time.sleep(self.delay)
        self.times.append(time.perf_counter())
        self.cpu.append(time.process_time())
        done, self.done = self.done, self.done + 1
        usage = ReplyUsage(input_tokens=1000, output_tokens=80)
        if done >= self.turns:
            return Reply(content="All done.", usage=usage)
        call = ToolCall(id=f"call-{done}", name="probe", arguments=f'{{"n": {done}}}')
        return Reply(content=REPLY, tool_calls=(call,), usage=usage)


class InstantTool:
    """A tool that returns 1 KiB at once."""

    spec = ToolSpec("probe", "Look at something.", {"type": "object", "properties": {}})
    idempotent = True

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Return the fixed result."""
        return ToolResult(RESULT)


def build_run(
    folder: Path, turns: int, delay: float = 0.0
) -> tuple[Path, list[float], list[float]]:
    """A completed ``turns``-turn run in ``folder`` (each model reply after ``delay`` seconds);
    its path and the model call times (wall and process CPU)."""
    (folder / "bench.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    workflow = load_workflow(folder / "bench.prompt.md")
    progress = folder / "run" / "progress.md"
    run = new_run(workflow, {}, progress, provider="echo")
    store = ProgressStore.create(progress, run)
    options = EngineOptions(workspace=folder, reporter=Reporter(), redactor=Redactor())
    model = InstantModel(turns, delay)
    try:
        Engine(workflow, run, store, model, {"probe": InstantTool()}, options).execute()
    finally:
        store.close()
    return progress, model.times, model.cpu


def interrupt_after_tool_result(progress: Path) -> None:
    """Turn a completed benchmark run into one stopped after its last tool result."""
    store, run, _ = ProgressStore.open(progress)
    try:
        last = run.transcript[-1]
        del run.transcript[-1:]
        step = run.steps[last.step or ""]
        step.status = "running"
        step.output_entry = None
        run.cursor.step = last.step
        run.cursor.index = 1
        run.status = "interrupted"
        run.reason = "benchmark"
        store.checkpoint(run)
    finally:
        store.close()


#: Where every subprocess starts: never inside a checkout, whose folder would come first on
#: ``sys.path`` (``-m``, ``-c``) and shadow the checkout being measured.
NEUTRAL = tempfile.gettempdir()


def _env(**extra: str) -> dict[str, str]:
    # Without PYTHONDONTWRITEBYTECODE the warm-up run writes the bytecode the rows assume.
    dropped = ("FLOW_CRASH_AT", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def bringing_folder(folder: Path) -> Path:
    """A working directory that brings files flow checks the trust of (``flow status`` and
    the dashboard hash each): 40 agents, a hooks file with 20 scripts, an MCP configuration;
    about 150 KB."""
    agents = folder / ".github" / "agents"
    hooks = folder / ".github" / "hooks"
    agents.mkdir(parents=True)
    hooks.mkdir(parents=True)
    for n in range(40):
        text = f"---\ndescription: agent {n}\n---\n" + "Do the work carefully.\n" * 120
        (agents / f"a{n:02d}.agent.md").write_text(text, encoding="utf-8")
    for n in range(20):
        (hooks / f"s{n:02d}.sh").write_text("#!/bin/sh\necho hook\n" * 40, encoding="utf-8")
    (hooks / "hooks.json").write_text('{"version": 1, "hooks": {}}\n', encoding="utf-8")
    (folder / ".vscode").mkdir()
    (folder / ".vscode" / "mcp.json").write_text('{"servers": {}}\n', encoding="utf-8")
    return folder


def _flow(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "promptflow_resume", *args],
        env=env or _env(),
        cwd=cwd or NEUTRAL,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    return time.perf_counter() - start


def median_ms(fn: Callable[[], float], repeat: int) -> float:
    """Median wall milliseconds of ``fn()`` over ``repeat`` runs (after one warm-up)."""
    fn()
    return float(statistics.median(fn() for _ in range(repeat))) * 1000


def resume_ms(progress: Path, repeat: int) -> float:
    """``flow resume`` start to its first model reply (then killed), median ms."""
    env = _env(FLOW_CRASH_AT="engine.model_replied:1")
    backup = progress.read_bytes()

    def once() -> float:
        seconds = _flow("resume", str(progress), "--provider", "echo", env=env)
        progress.write_bytes(backup)
        for leftover in (journal_path(progress),):
            leftover.unlink(missing_ok=True)
        return seconds

    return median_ms(once, repeat)


#: The model of the openai rows: its context window holds a 1,000-turn benchmark run.
OPENAI_MODEL = "gpt-4.1"
#: flow's part of ``flow resume`` to its first request with the openai provider (issue 27).
OPENAI_FLOW_TARGET_MS = 150.0
#: The SDK alone: import it, build a client, send one short request (flow sends the run's).
SDK_ALONE = (
    "import sys, openai\n"
    "client = openai.OpenAI(api_key='sk-bench', base_url=sys.argv[1], max_retries=0)\n"
    "messages = [{'role': 'user', 'content': 'hi'}]\n"
    "client.chat.completions.create(model=sys.argv[2], messages=messages)\n"
)


def _openai_env(**extra: str) -> dict[str, str]:
    # No proxy, key or endpoint from the caller's shell: requests go to the local server only.
    env = {
        k: v
        for k, v in _env(**extra).items()
        if not k.upper().startswith(("OPENAI_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"))
    }
    env["OPENAI_API_KEY"] = "sk-bench"
    env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def _to_first_request(server: ModelServer, argv: list[str], env: dict[str, str]) -> float:
    """Seconds from starting ``argv`` to the server's receiving its first request."""
    seen: list[float] = []

    def answer(received: Received) -> Canned:
        seen.append(time.perf_counter())
        return Canned(body=openai_completion("All done."))

    server.responder = answer
    start = time.perf_counter()
    subprocess.run(
        argv, env=env, cwd=NEUTRAL, stdin=subprocess.DEVNULL, capture_output=True, timeout=120
    )
    if not seen:
        raise SystemExit(f"no request reached the local server from: {' '.join(argv)}")
    return seen[0] - start


#: Ends a timed ``python -c`` before the interpreter's shutdown, which frees the SDK's objects
#: one by one (tens of ms): flow's row ends at the server's first request, and its process is
#: killed at the reply, before any shutdown.
_NO_EXIT = "%s\nimport os\nos._exit(0)"


def _children_cpu() -> float:
    """CPU seconds (user and system) of the child processes waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def openai_resume_ms(progress: Path, repeat: int) -> dict[str, float]:
    """``flow resume --provider openai`` to its first request at the local server (killed at
    its reply), with the interpreter's start, the SDK's import and the SDK alone; medians,
    each measured in turn round by round so the machine's load touches all alike. The CPU
    time of each process (flow's to its end, just after the reply) is measured too: on a
    shared machine it moves far less with the load than the wall time."""
    backup = progress.read_bytes()
    present = set(progress.parent.iterdir())
    env = _openai_env(FLOW_CRASH_AT="engine.model_replied:1")
    samples: dict[str, list[float]] = {}
    with ModelServer() as server:
        url = server.url + "/v1"
        resume = [sys.executable, "-m", "promptflow_resume", "resume", str(progress)]
        resume += ["--provider", "openai", "--model", OPENAI_MODEL, "--base-url", url]
        alone = [sys.executable, "-c", SDK_ALONE, url, OPENAI_MODEL]

        def flow_once() -> float:
            seconds = _to_first_request(server, resume, env)
            progress.write_bytes(backup)
            for leftover in set(progress.parent.iterdir()) - present:
                leftover.unlink()
            return seconds

        runs: dict[str, Callable[[], float]] = {
            "total": flow_once,
            "interpreter": lambda: _python(_NO_EXIT % "pass"),
            "import": lambda: _python(_NO_EXIT % "import openai"),
            "alone": lambda: _to_first_request(server, alone, _openai_env()),
        }
        for number in range(repeat + 1):  # the first round warms the caches up, uncounted
            for name, run in runs.items():
                cpu = _children_cpu()
                seconds = run()
                if number:
                    samples.setdefault(name, []).append(seconds * 1000)
                    samples.setdefault(f"{name} cpu", []).append((_children_cpu() - cpu) * 1000)
    ms = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "total": ms["total"],
        "interpreter": ms["interpreter"],
        "sdk import": ms["import"] - ms["interpreter"],
        "flow": ms["total"] - ms["import"],
        "sdk alone": ms["alone"],
        "flow beyond sdk": ms["total"] - ms["alone"],
        "total cpu": ms["total cpu"],
        "sdk import cpu": ms["import cpu"] - ms["interpreter cpu"],
        "flow cpu": ms["total cpu"] - ms["import cpu"],
    }


PHASES = """
import sys, time
t0 = time.perf_counter()
from promptflow_resume.cli.app import app  # what `flow` imports before any command runs
import promptflow_resume.api, promptflow_resume.run.engine, promptflow_resume.providers.echo
t1 = time.perf_counter()
from pathlib import Path
from promptflow_resume.run.conversation import MessageLog
from promptflow_resume.progress import Entry, ProgressStore
c1 = time.process_time()
store, run, _ = ProgressStore.open(Path(sys.argv[1]))
t2, c2 = time.perf_counter(), time.process_time()
messages = MessageLog().messages(run.transcript)
t3 = time.perf_counter()
entry = Entry(run.next_entry_id(), "assistant", "x" * 300, step=run.transcript[-1].step)
run.transcript.append(entry)
store.save(run, [entry])
t4, c4 = time.perf_counter(), time.process_time()
store.checkpoint(run)
t5, c5 = time.perf_counter(), time.process_time()
store.close()
print(t1 - t0, t2 - t1, t3 - t2, t5 - t4, c2 - c1, c5 - c4)
"""


def phases_ms(progress: Path, repeat: int) -> dict[str, float]:
    """Interpreter start, imports, open, request build and final fold, medians in ms."""
    backup = progress.read_bytes()
    rows: list[list[float]] = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", PHASES, str(progress)],
            env=_env(),
            cwd=NEUTRAL,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows.append([float(x) * 1000 for x in out.split()])
        progress.write_bytes(backup)
    interpreter = median_ms(lambda: _python("pass"), repeat)
    names = ("imports", "open", "request build", "final fold", "open CPU", "final fold CPU")
    result = {"interpreter": interpreter}
    result.update({n: statistics.median(r[i] for r in rows) for i, n in enumerate(names)})
    return result


def _python(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=NEUTRAL, check=True)
    return time.perf_counter() - start


def peak_rss_mib(progress: Path) -> float:
    """Peak RSS of ``flow resume`` (to its first model reply) on ``progress``, MiB."""
    code = (
        "import resource, subprocess, sys\n"
        "subprocess.run([sys.executable, '-m', 'promptflow_resume', 'resume', sys.argv[1],"
        " '--provider', 'echo'], stdin=subprocess.DEVNULL, capture_output=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    backup = progress.read_bytes()
    out = subprocess.run(
        [sys.executable, "-c", code, str(progress)],
        env=_env(FLOW_CRASH_AT="engine.model_replied:1"),
        cwd=NEUTRAL,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    progress.write_bytes(backup)
    return int(out.split()[-1]) / 1024


def size_ratio(turns: int) -> float:
    """(progress.md + journal) ÷ payload for a run killed mid-step after ``turns`` turns."""
    with tempfile.TemporaryDirectory() as tmp:
        code = (
            "import sys; sys.path.insert(0, sys.argv[2]); from pathlib import Path\n"
            "import resume_bench as b; b.build_run(Path(sys.argv[1]), int(sys.argv[3]))\n"
        )
        subprocess.run(
            [sys.executable, "-c", code, tmp, str(HERE / "bench"), str(turns), "--root", str(ROOT)],
            env=_env(FLOW_CRASH_AT=f"engine.model_replied:{turns + 1}"),
            cwd=NEUTRAL,
            capture_output=True,
            check=False,
        )
        progress = Path(tmp) / "run" / "progress.md"
        on_disk = progress.stat().st_size + journal_path(progress).stat().st_size
    payload = turns * (len(REPLY) + len(RESULT))
    return on_disk / payload


def per_turn(times: list[float]) -> tuple[float, float]:  # also for CPU times
    """Mean ms per turn, and the last 1,000 turns' mean ÷ the first 1,000's."""
    gaps = [b - a for a, b in itertools.pairwise(times)]
    first = statistics.mean(gaps[:1000])
    last = statistics.mean(gaps[-1000:])
    return statistics.mean(gaps) * 1000, last / first


def importtime(*args: str, top: int = 12) -> list[tuple[int, str]]:
    """The ``top`` imports by cumulative microseconds for ``flow ARGS``."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "promptflow_resume", *args],
        env=_env(),
        cwd=NEUTRAL,
        capture_output=True,
        text=True,
        check=False,
    )
    rows: list[tuple[int, str]] = []
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self, cumulative, name = line[len("import time:") :].split("|")
        rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:top]


#: Turns the writer of the readers' stress mode runs, and its model's reply time: its file
#: ends near 35 MB (a read never takes long, no limit is near) and it runs for a minute.
STRESS_TURNS = 20_000
STRESS_DELAY = 0.002


def readers(count: int) -> None:
    """Poll ``load_progress`` up to ``count`` times while a writer runs ``STRESS_TURNS`` turns,
    appending and folding; print the errors (there must be none)."""
    from promptflow_resume.base.errors import FlowError
    from promptflow_resume.progress import load_progress

    writer_code = (
        "import sys; sys.path.insert(0, sys.argv[2]); from pathlib import Path\n"
        "import resume_bench as b\n"
        f"b.build_run(Path(sys.argv[1]), {STRESS_TURNS}, {STRESS_DELAY})\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        progress = Path(tmp) / "run" / "progress.md"
        writer = subprocess.Popen(
            [sys.executable, "-c", writer_code, tmp, str(HERE / "bench"), "--root", str(ROOT)],
            env=_env(),
            cwd=NEUTRAL,
        )
        while not journal_path(progress).exists():
            time.sleep(0.01)
        errors: list[str] = []
        reads = 0
        start = time.perf_counter()
        while reads < count and writer.poll() is None:
            try:
                load_progress(progress)
            except FlowError as error:
                errors.append(error.message)
            reads += 1
        elapsed = time.perf_counter() - start
        writer.kill()
        writer.wait()
    print(
        f"readers: {reads} reads in {elapsed:.1f} s during a {STRESS_TURNS:,}-turn run, "
        f"{len(errors)} errors"
    )
    for message in errors[:5]:
        print(f"  {message}")


def compare(
    before: Path,
    rounds: int,
    repeat: int,
    before_python: str | None = None,
    extra: tuple[str, ...] = (),
) -> None:
    """The table for ``before`` and for this checkout, run alternately round by round (on a
    shared machine the load changes by the minute): each row's medians and after ÷ before.
    ``before_python`` runs the before side (a virtualenv with its own dependencies); ``extra``
    are options for both sides (``--openai``)."""
    values: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    order: list[str] = []
    sides = (("before", before, before_python or sys.executable), ("after", ROOT, sys.executable))
    for number in range(1, rounds + 1):
        for side, root, python in sides:
            table = subprocess.run(
                [python, __file__, "--root", str(root), "--repeat", str(repeat), *extra],
                cwd=NEUTRAL,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for line in table.splitlines():
                if " | " not in line:
                    continue
                name, value = (part.strip() for part in line.rsplit("|", 1))
                order.extend([name] if name not in order else [])
                values[side].setdefault(name, []).append(float(value.rstrip("x")))
            print(f"round {number}/{rounds}: {side} measured", file=sys.stderr)
    print(f"before: {before}\nafter:  {ROOT}\nmedians of {rounds} alternating rounds")
    width = max(map(len, order))
    print(f"{'':<{width}} | {'before':>8} | {'after':>8} | after/before")
    for name in order:
        old = statistics.median(values["before"].get(name, [float("nan")]))
        new = statistics.median(values["after"].get(name, [float("nan")]))
        ratio = new / old if old else float("nan")
        print(f"{name:<{width}} | {old:>8.3g} | {new:>8.3g} | {ratio:>11.2f}x")


def openai_rows(progress: Path, repeat: int) -> list[tuple[str, str]]:
    """The table's rows for ``flow resume`` with the openai provider on ``progress``."""
    ms = openai_resume_ms(progress, repeat)
    return [
        ("resume openai to 1st request, 1,000 turns ms", f"{ms['total']:.0f}"),
        ("  interpreter start ms", f"{ms['interpreter']:.0f}"),
        ("  openai SDK import ms", f"{ms['sdk import']:.0f}"),
        ("  flow's part ms", f"{ms['flow']:.0f}"),
        (
            f"  flow's part / {OPENAI_FLOW_TARGET_MS:.0f} ms target",
            f"{ms['flow'] / OPENAI_FLOW_TARGET_MS:.2f}x",
        ),
        ("  SDK alone: start to 1st request ms", f"{ms['sdk alone']:.0f}"),
        ("  flow beyond the SDK alone ms", f"{ms['flow beyond sdk']:.0f}"),
        ("  CPU: flow resume, whole process ms", f"{ms['total cpu']:.0f}"),
        ("  CPU: openai SDK import ms", f"{ms['sdk import cpu']:.0f}"),
        ("  CPU: flow's part ms", f"{ms['flow cpu']:.0f}"),
    ]


def print_rows(rows: list[tuple[str, str]]) -> None:
    """The table: one ``name | value`` line a row (the form ``--compare`` reads back)."""
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}} | {value:>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(HERE), help="The checkout to measure.")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--readers", type=int, default=0, metavar="N")
    parser.add_argument("--openai", action="store_true", help="Only the openai resume rows.")
    parser.add_argument("--compare", metavar="BEFORE", help="A checkout to compare with.")
    parser.add_argument("--rounds", type=int, default=3, help="Alternating rounds to compare.")
    parser.add_argument(
        "--before-python", metavar="PYTHON", help="The interpreter for --compare's before side."
    )
    args = parser.parse_args()
    if args.compare:
        extra = ("--openai",) if args.openai else ()
        compare(Path(args.compare).resolve(), args.rounds, args.repeat, args.before_python, extra)
        return
    if args.readers:
        readers(args.readers)
        return
    print(f"checkout: {ROOT}")
    if args.openai:
        with tempfile.TemporaryDirectory() as tmp:
            small, _, _ = build_run(Path(tmp), 1000)
            interrupt_after_tool_result(small)
            print_rows(openai_rows(small, args.repeat))
        return
    rows: list[tuple[str, str]] = []
    rows.append(("flow --version ms", f"{median_ms(lambda: _flow('--version'), args.repeat):.0f}"))
    rows.append(("flow --help ms", f"{median_ms(lambda: _flow('--help'), args.repeat):.0f}"))
    with tempfile.TemporaryDirectory() as tmp:
        small, _, _ = build_run(Path(tmp), 1000)
        interrupt_after_tool_result(small)
        status = median_ms(lambda: _flow("status", str(small), "--json"), args.repeat)
        rows.append(("status --json, 1,000 turns ms", f"{status:.0f}"))
        brings = bringing_folder(Path(tmp) / "brings")
        status = median_ms(lambda: _flow("status", str(small), "--json", cwd=brings), args.repeat)
        rows.append(("  the same in a folder bringing 62 files ms", f"{status:.0f}"))
        rows.append(
            ("resume to 1st request, 1,000 turns ms", f"{resume_ms(small, args.repeat):.0f}")
        )
        rows.extend(openai_rows(small, args.repeat))
    with tempfile.TemporaryDirectory() as tmp:
        large, times, cpu = build_run(Path(tmp), 10_000)
        mean, growth = per_turn(times)
        cpu_mean, cpu_growth = per_turn(cpu)
        interrupt_after_tool_result(large)
        rows.append(("resume to 1st request, 10,000 turns ms", f"{resume_ms(large, 3):.0f}"))
        for name, ms in phases_ms(large, 3).items():
            rows.append((f"  phase: {name} ms", f"{ms:.0f}"))
        rows.append(("per-turn overhead at 10,000 turns ms", f"{mean:.3f}"))
        rows.append(("  last 1,000 / first 1,000 turns", f"{growth:.2f}x"))
        rows.append(("per-turn CPU at 10,000 turns ms", f"{cpu_mean:.3f}"))
        rows.append(("  CPU last 1,000 / first 1,000 turns", f"{cpu_growth:.2f}x"))
        rows.append(("peak RSS, resume at 10,000 turns MiB", f"{peak_rss_mib(large):.0f}"))
    rows.append(("progress.md + journal mid-step / payload", f"{size_ratio(2000):.2f}x"))
    print_rows(rows)
    if args.importtime:
        for command in (("--version",), ("--help",)):
            print(f"\n-X importtime, flow {' '.join(command)}: top cumulative (ms)")
            for micros, name in importtime(*command):
                print(f"  {micros / 1000:8.1f}  {name}")


if __name__ == "__main__":
    main()
