"""Helpers to run the installed ``flow`` command as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
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
) -> subprocess.CompletedProcess[str]:
    """Run ``flow ARGS`` to completion (stdin closed) and capture its output."""
    return subprocess.run(
        [*FLOW, *args],
        cwd=cwd,
        env=env or flow_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


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
