"""What a command imports: the paths that do not need a part never load it (start-up time),
a model SDK is imported without passes of the cycle collector, nor is what a command loads
before its run starts, and the one process-wide setting a run changes, the collector's
thresholds, is restored."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from promptflow_resume.api import RunOptions, StartRequest, start_run
from promptflow_resume.base.collector import RUN_GEN2_THRESHOLD
from promptflow_resume.run.events import Reporter
from tests.support.flowproc import flow_env
from tests.support.providers import PROXY_ENV_VARS
from tests.support.providers_server import Canned, ModelServer, openai_completion

WORKFLOW = """---
description: Two steps
commands:
  probe:
    description: Look at something
    argv: ["true"]
    idempotent: true
tools: [probe, read_file]
---
Be brief.

## Step 1: First
Say one thing.

## Step 2: Second
Say another.
"""

#: Runs ``flow ARGS`` in this process; as it exits (exit handlers run however flow ends the
#: process), prints which of the watched modules it imported.
PROBE = """
import atexit, json, sys
from promptflow_resume.cli import _console_script
sys.argv = ["flow", *json.loads(sys.argv[1])]
atexit.register(
    lambda: print(json.dumps(sorted(m for m in WATCHED if m in sys.modules)), flush=True)
)
_console_script()
"""

WATCHED = [
    "pydantic",
    "promptflow_resume.tools",
    "promptflow_resume.tools.mcp",
    "promptflow_resume.run.engine",
    "promptflow_resume.run.subworkflows",
    "promptflow_resume.run.recovery",
    "importlib.resources",
    "starlette",
    "uvicorn",
    "promptflow_resume.serve",
    # Tracing (docs/spec.md 13): loaded only when it is on.
    "opentelemetry",
    "promptflow_resume.otel",
]


def _imported_by(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, list[str]]:
    code = PROBE.replace("WATCHED", repr(WATCHED))
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(args))],
        env=flow_env(**(env or {})),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return done.returncode, loaded


def test_flow_serve_help_and_flow_list_load_no_web_server(tmp_path: Path) -> None:
    for args in (("serve", "--help"), ("list", "--all"), ("--help",)):
        code, loaded = _imported_by(tmp_path, *args)
        assert code == 0
        assert not {"starlette", "uvicorn", "promptflow_resume.serve"} & set(loaded), args


def _completed_run(tmp_path: Path, reporter: Reporter | None = None) -> Path:
    wf = tmp_path / "two.prompt.md"
    wf.write_text(WORKFLOW, encoding="utf-8")
    progress = tmp_path / "run" / "progress.md"
    outcome = start_run(
        StartRequest(wf, progress=progress),
        RunOptions(provider="echo", workspace=tmp_path, reporter=reporter),
    )
    assert outcome.run.status == "completed"
    return outcome.path


def test_status_of_a_run_with_nothing_in_flight_loads_no_tool_engine_recovery_or_pydantic(
    tmp_path: Path,
) -> None:
    progress = _completed_run(tmp_path)
    code, loaded = _imported_by(tmp_path, "status", str(progress), "--json")
    assert code == 0
    assert loaded == []


def test_status_still_reports_what_resume_would_do(tmp_path: Path) -> None:
    progress = _completed_run(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "promptflow_resume", "status", str(progress), "--json"],
        env=flow_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["status"] == "completed"
    assert data["workflow_error"] is None
    assert data["children"] == []


def test_a_run_of_a_workflow_without_mcp_tools_does_not_load_the_mcp_client(
    tmp_path: Path,
) -> None:
    wf = tmp_path / "two.prompt.md"
    wf.write_text(WORKFLOW, encoding="utf-8")
    code, loaded = _imported_by(tmp_path, "run", str(wf), "--provider", "echo", "--yes")
    assert code == 0
    assert "promptflow_resume.tools.mcp" not in loaded
    assert "promptflow_resume.run.engine" in loaded  # the run did run


def test_a_run_without_tracing_loads_nothing_of_opentelemetry(tmp_path: Path) -> None:
    wf = tmp_path / "two.prompt.md"
    wf.write_text(WORKFLOW, encoding="utf-8")
    code, loaded = _imported_by(tmp_path, "run", str(wf), "--provider", "echo", "--yes")
    assert code == 0
    assert "opentelemetry" not in loaded and "promptflow_resume.otel" not in loaded


def test_a_run_with_tracing_on_loads_the_sdk(tmp_path: Path) -> None:
    # The watch above can fail: the same run with an endpoint variable imports the SDK (its
    # spans go nowhere: port 9 refuses, and the run goes on).
    wf = tmp_path / "two.prompt.md"
    wf.write_text(WORKFLOW, encoding="utf-8")
    code, loaded = _imported_by(
        tmp_path,
        "run",
        str(wf),
        "--provider",
        "echo",
        "--yes",
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
        },
    )
    assert code == 0
    assert "opentelemetry" in loaded and "promptflow_resume.otel" in loaded


class _Thresholds(Reporter):
    """Notes the collector's thresholds as each step starts."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, int]] = []

    def step_started(
        self, step_id: str, title: str, index: int, total: int, agent: str | None = None
    ) -> None:
        self.seen.append(gc.get_threshold())


def test_a_run_collects_the_oldest_generation_less_often_then_restores_the_thresholds(
    tmp_path: Path,
) -> None:
    before = gc.get_threshold()
    reporter = _Thresholds()
    _completed_run(tmp_path, reporter)
    assert reporter.seen == [(before[0], before[1], max(before[2], RUN_GEN2_THRESHOLD))] * 2
    assert gc.get_threshold() == before


#: Builds a provider in a fresh process (its SDK not yet imported) and prints the collector's
#: passes per generation made meanwhile, whether it is on afterwards, and whether its
#: thresholds are as before.
SDK_PROBE = """
import gc, importlib, json, sys
from promptflow_resume.providers.provider import ProviderSettings
name, cls, model = sys.argv[1:4]
provider = getattr(importlib.import_module(f"promptflow_resume.providers.{name}"), cls)
assert name not in sys.modules
before, thresholds = [g["collections"] for g in gc.get_stats()], gc.get_threshold()
provider(ProviderSettings(name, model=model, base_url="http://127.0.0.1:9/v1"))
after = [g["collections"] for g in gc.get_stats()]
print(json.dumps([[b - a for a, b in zip(before, after)], gc.isenabled(),
                  gc.get_threshold() == thresholds]))
"""


@pytest.mark.parametrize(
    ("name", "cls", "model", "key"),
    [
        ("openai", "OpenAIProvider", "gpt-4.1", "OPENAI_API_KEY"),
        ("anthropic", "AnthropicProvider", "claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ],
)
def test_an_sdk_is_imported_without_collector_passes_and_the_collector_is_restored(
    tmp_path: Path, name: str, cls: str, model: str, key: str
) -> None:
    # An SDK makes thousands of classes that live as long as the process: passes of the
    # cycle collector over them (a full one among them) find nothing and cost a seventh of
    # the import, which is most of the time to a resumed run's first request.
    env = flow_env()
    env[key] = "sk-test-startup"
    done = subprocess.run(
        [sys.executable, "-c", SDK_PROBE, name, cls, model],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )
    passes, enabled, same_thresholds = json.loads(done.stdout.strip().splitlines()[-1])
    assert passes == [0, 0, 0]
    assert enabled and same_thresholds


#: Runs ``flow ARGS`` in this process and notes each pass of the cycle collector: whether it
#: came before the run loop set aside what the command had loaded (``gc.freeze``); as the
#: process exits, prints the passes before it, whether the collector is on, and whether its
#: thresholds are as they were.
GC_PROBE = """
import atexit, gc, json, sys
from promptflow_resume.cli import _console_script
sys.argv = ["flow", *json.loads(sys.argv[1])]
thresholds, before_run, ran = gc.get_threshold(), [], []
def note(phase, info):
    if phase == "start":
        (ran if ran or gc.get_freeze_count() else before_run).append(info["generation"])
gc.callbacks.append(note)
atexit.register(lambda: print(json.dumps(
    [before_run, gc.isenabled(), gc.get_threshold() == thresholds]), flush=True))
_console_script()
"""


@pytest.mark.parametrize("command", ["run", "status"])
def test_the_collector_makes_no_pass_before_the_run_starts_and_is_on_again_after(
    tmp_path: Path, command: str
) -> None:
    # Before the run loop, a command builds modules, classes and the records of the files
    # it reads, all meant to live on: some sixty passes over them (8 ms of a resume's path
    # to its first request) found nothing.
    wf = tmp_path / "two.prompt.md"
    wf.write_text(WORKFLOW, encoding="utf-8")
    args = ["run", str(wf), "--provider", "echo", "--yes"]
    if command == "status":
        args = ["status", str(_completed_run(tmp_path)), "--json"]
    done = subprocess.run(
        [sys.executable, "-c", GC_PROBE, json.dumps(args)],
        env=flow_env(),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )
    before_run, enabled, same_thresholds = json.loads(done.stdout.strip().splitlines()[-1])
    assert before_run == []
    assert enabled and same_thresholds


#: Builds the openai provider for the base URL ``sys.argv[1]``, sends one request when it is
#: an ``http://`` one, and prints how often a certificate bundle was loaded meanwhile.
CERT_PROBE = """
import ssl, sys
from promptflow_resume.chat import Message
from promptflow_resume.providers.provider import ProviderSettings, Request
from promptflow_resume.providers.openai import OpenAIProvider
loads = []
load = ssl.SSLContext.load_verify_locations
def counted(self, *args, **kwargs):
    loads.append(args)
    return load(self, *args, **kwargs)
ssl.SSLContext.load_verify_locations = counted
provider = OpenAIProvider(ProviderSettings("openai", model="gpt-4.1", base_url=sys.argv[1]))
if sys.argv[1].startswith("http:"):
    reply = provider.complete(Request(messages=(Message("user", "hi"),)))
    assert reply.content == "hello", reply
print(len(loads))
"""


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_an_http_endpoint_loads_no_certificates_an_https_one_does(
    tmp_path: Path, scheme: str
) -> None:
    # Loading the system's certificate bundle took 20 ms of a resume's path to its first
    # request to a local server; nothing in a plain-HTTP exchange uses it.
    env = {k: v for k, v in flow_env().items() if k not in PROXY_ENV_VARS}
    env["OPENAI_API_KEY"] = "sk-test-startup"
    with ModelServer() as server:
        server.push(Canned(body=openai_completion("hello")))
        url = server.url + "/v1" if scheme == "http" else "https://127.0.0.1:9/v1"
        done = subprocess.run(
            [sys.executable, "-c", CERT_PROBE, url],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=True,
        )
    loads = int(done.stdout.strip().splitlines()[-1])
    assert (loads == 0) if scheme == "http" else (loads >= 1)
