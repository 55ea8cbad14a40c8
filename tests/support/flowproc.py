"""Helpers to run ``flow``: in this process where a test only needs what it says and does, as a
real subprocess where the test needs a process (to kill it, signal it, limit it, crash it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import Run
from tests import support

#: The checkout these tests belong to: subprocesses import flow from here, not from wherever
#: an editable install of another checkout happens to point.
REPO = support.REPO

#: The ``flow`` command of this checkout, for every subprocess test: with ``flow_env()`` it runs
#: the code under test, whether or not (and wherever) the package is installed.
FLOW = (sys.executable, "-m", "promptflow_resume")

#: A run's transcript as (role, step, tool, content) rows.
Transcript = list[tuple[str, str | None, str | None, str]]


def flow_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess that runs this checkout's code (``flow`` or a script
    importing the package): the test's, without crash hooks, plus extra."""
    env = {k: v for k, v in os.environ.items() if k != "FLOW_CRASH_AT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


#: Keys that look real to the SDKs and are no key anywhere: the tests' provider servers take them.
FAKE_KEYS = {"OPENAI_API_KEY": "sk-test-not-a-key", "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key"}
#: What a developer's shell may set that would send a test's requests elsewhere.
_ENDPOINT_VARIABLES = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")


def provider_env(**extra: str) -> dict[str, str]:
    """``flow_env`` for runs against the local provider servers: fake keys for both protocols,
    and no endpoint variable from the developer's shell (the run names the server's URL)."""
    env = flow_env(**{**FAKE_KEYS, **extra})
    for name in _ENDPOINT_VARIABLES:
        if name not in extra:
            env.pop(name, None)
    return env


def flow(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    preexec_fn: Callable[[], None] | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``flow ARGS`` to completion (stdin closed) and capture its output.

    In this process (``flow_in_process``) unless the test needs one of flow's own: ``process``,
    a ``preexec_fn`` (limits set in the child), a crash point (``FLOW_CRASH_AT``, which ends
    the process), or another ``PYTHONPATH`` (what the child imports: this process has its
    modules already). ``timeout`` bounds a subprocess only."""
    env = env or flow_env()
    own = (
        process
        or preexec_fn is not None
        or "FLOW_CRASH_AT" in env
        or env.get("PYTHONPATH") != flow_env().get("PYTHONPATH")
    )
    if not own:
        return flow_in_process(*args, cwd=cwd, env=env)
    return subprocess.run(
        [*FLOW, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def flow_in_process(
    *args: str, cwd: Path, env: dict[str, str] | None = None, errors: str = "strict"
) -> subprocess.CompletedProcess[str]:
    """Run ``flow ARGS`` as ``cli.main`` in this process, as a subprocess would see the world:
    the folder ``cwd``, exactly the environment ``env`` (``flow_env()`` by default), standard
    input at ``/dev/null``, and file descriptors 1 and 2 captured (so what the programs flow
    starts write there is captured too). ``errors`` decodes what was written (UTF-8):
    ``surrogateescape`` keeps bytes that are no UTF-8 as they are. A crash would take the test
    process down with it, which is as loud a failure as any."""
    from promptflow_resume.base import printing
    from promptflow_resume.cli import main

    with _as_a_process(cwd, env or flow_env()) as streams:
        # What flow builds once per process from its environment is built again.
        printing._redactor.cache_clear()
        code = main(list(args))
    printing._redactor.cache_clear()
    out, err = (path.read_bytes().decode("utf-8", errors) for path in streams)
    shutil.rmtree(streams[0].parent, ignore_errors=True)
    return subprocess.CompletedProcess(["flow", *args], code, out, err)


@contextlib.contextmanager
def _as_a_process(cwd: Path, env: dict[str, str]) -> Iterator[tuple[Path, Path]]:
    """Within the block: folder, environment, stdin and stdout/stderr (file descriptors and
    Python's streams) as for a child process; yields the files stdout and stderr went to,
    readable once the block is left."""
    folder = Path(tempfile.mkdtemp(prefix="flow-in-process-"))
    out, err = folder / "stdout", folder / "stderr"
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fds = os.dup(1), os.dup(2)
    try:
        with (
            open(os.devnull, encoding="utf-8") as stdin,
            open(out, "wb") as o,
            open(err, "wb") as e,
        ):
            os.dup2(o.fileno(), 1)
            os.dup2(e.fileno(), 2)
            sys.stdin = stdin
            # As Python sets them up in a process whose output is a pipe or a file.
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(  # noqa: SIM115
                2, "w", encoding="utf-8", errors="backslashreplace", closefd=False
            )
            os.environ.clear()
            os.environ.update(env)
            os.chdir(cwd)
            try:
                yield out, err
            finally:
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(OSError, ValueError):
                        stream.flush()
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        os.close(saved_fds[0])
        os.close(saved_fds[1])


def spawn(
    *args: str, cwd: Path, env: dict[str, str] | None = None, session: bool = False
) -> subprocess.Popen[str]:
    """Start ``flow ARGS`` in the background (``session``: as the leader of its own group)."""
    return subprocess.Popen(
        [*FLOW, *args],
        cwd=cwd,
        env=env or flow_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=session,
    )


def start_flow(*args: str, cwd: Path, wait_for: Path | None = None) -> subprocess.Popen[str]:
    """Start ``flow ARGS`` in the background; with ``wait_for``, return once that file exists."""
    proc = spawn(*args, cwd=cwd)
    if wait_for is not None:
        deadline = time.monotonic() + 30
        while not wait_for.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
    return proc


def transcript(path: Path) -> Transcript:
    """A run's transcript as (role, step, tool, content), without flow's own notes."""
    run: Run = load_progress(path)[0]
    return [(e.role, e.step, e.tool, e.content) for e in run.transcript if e.role != "note"]
