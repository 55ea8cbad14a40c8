"""A ``model:`` list through real ``flow`` processes, the real SDKs and the local server.

The server refuses the models it is told not to offer with the provider's own 404 (OpenAI's
``model_not_found``, Anthropic's ``not_found_error``); the run falls to the next model with
the same request, records the refusal in the attempt, and every attempt starts from the
first model again. Other errors never change the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from promptflow_resume.base.errors import EXIT_PROVIDER
from promptflow_resume.progress import load_progress
from tests.support.flowproc import flow, provider_env, transcript
from tests.support.providers_server import (
    Canned,
    ModelServer,
    anthropic_message,
    anthropic_usage,
    error_body,
    openai_completion,
    openai_usage,
)
from tests.support.slow import sweep

WORKFLOW = """\
---
provider: {provider}
model: {models}
retry:
  max_attempts: 3
  initial_delay: 0.01
  max_delay: 0.1
---
You name bees.

## Step 1: Name
Name one bee.

## Step 2: Again
Name another.
"""

PROGRESS = "run/progress.md"


@dataclass(frozen=True)
class Protocol:
    name: str
    #: The base URL flow is given, from the server's.
    suffix: str
    reply: Any


def _openai_reply(text: str) -> Canned:
    return Canned(body=openai_completion(text, usage=openai_usage(100, 10)))


def _anthropic_reply(text: str) -> Canned:
    return Canned(body=anthropic_message(text, usage=anthropic_usage(input=100, output=10)))


PROTOCOLS = {
    "openai": Protocol("openai", "/v1", _openai_reply),
    "anthropic": Protocol("anthropic", "", _anthropic_reply),
}


@pytest.fixture(params=sorted(PROTOCOLS))
def protocol(request: pytest.FixtureRequest) -> Protocol:
    return PROTOCOLS[request.param]


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _project(where: Path, protocol: Protocol, models: list[str]) -> Path:
    (where / "bees.prompt.md").write_text(
        WORKFLOW.format(provider=protocol.name, models=json.dumps(models)), encoding="utf-8"
    )
    return where


def _run(where: Path, server: ModelServer, protocol: Protocol, *more: str, **env: str) -> Any:
    url = server.url + protocol.suffix
    args = ("run", "bees.prompt.md", "--base-url", url, "--progress", PROGRESS, "--new", *more)
    return flow(*args, cwd=where, env=provider_env(**env))


def _resume(where: Path, server: ModelServer, protocol: Protocol) -> Any:
    url = server.url + protocol.suffix
    return flow("resume", PROGRESS, "--base-url", url, cwd=where, env=provider_env())


def _front(where: Path) -> dict[str, Any]:
    text = (where / PROGRESS).read_text(encoding="utf-8")
    loaded = yaml.safe_load(text.split("---\n", 2)[1])
    assert isinstance(loaded, dict)
    return loaded


def _models_sent(server: ModelServer) -> list[str]:
    return [r.body["model"] for r in server.requests]


def _json(where: Path, *args: str) -> Any:
    result = flow(*args, "--json", cwd=where, env=provider_env())
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_refused_model_falls_to_the_next_with_the_same_request(
    tmp_path: Path, server: ModelServer, protocol: Protocol
) -> None:
    where = _project(tmp_path, protocol, ["missing-model", "good-model"])
    server.unknown_models = {"missing-model"}
    server.push(protocol.reply("Bee one."), protocol.reply("Bee two."))
    result = _run(where, server, protocol)
    assert result.returncode == 0, result.stderr
    assert "refused model `missing-model`" in result.stderr + result.stdout

    # The refused request went again, unchanged, to the next model; step 2 went there at once.
    assert _models_sent(server) == ["missing-model", "good-model", "good-model"]
    first, second = server.requests[0].body, server.requests[1].body
    assert {k: v for k, v in first.items() if k != "model"} == {
        k: v for k, v in second.items() if k != "model"
    }

    front = _front(where)
    assert front["config"]["model"] == "missing-model"
    assert front["config"]["models"] == ["missing-model", "good-model"]
    attempt = front["attempts"][0]
    assert attempt["model"] == "good-model"
    [refused] = attempt["refused"]
    assert refused["model"] == "missing-model"
    expected = "does not exist" if protocol.name == "openai" else "model: missing-model"
    assert expected in refused["message"] and "404" in refused["message"]
    # No turn and no tokens for the refused request.
    assert front["usage"]["turns"] == 2 and front["usage"]["input_tokens"] == 200

    status = _json(where, "status", PROGRESS)
    assert status["models"] == ["missing-model", "good-model"]
    assert status["model_attempts"] == [{"attempt": 1, "model": "good-model", "refused": [refused]}]
    assert _json(where, "show", PROGRESS)["model_attempts"] == status["model_attempts"]
    shown = flow("show", PROGRESS, cwd=where, env=provider_env(COLUMNS="200"))
    assert "models: missing-model → good-model" in shown.stdout
    assert "attempt 1: model good-model; refused missing-model" in shown.stdout
    log = flow("log", PROGRESS, cwd=where, env=provider_env(COLUMNS="200"))
    assert "    model: good-model\n    refused model missing-model: " in log.stdout
    [logged] = _json(where, "log", PROGRESS)["attempts"]
    assert (logged["model"], logged["refused"]) == ("good-model", [refused])


def test_every_model_refused_stops_with_each_reason_and_resumes_from_the_first(
    tmp_path: Path, server: ModelServer, protocol: Protocol
) -> None:
    where = _project(tmp_path, protocol, ["missing-a", "missing-b"])
    server.unknown_models = {"missing-a", "missing-b"}
    result = _run(where, server, protocol)
    assert result.returncode == EXIT_PROVIDER, result.stderr
    assert "Traceback" not in result.stderr
    message = result.stderr
    assert "refused every model this run may use" in message
    assert "`missing-a` (" in message and "`missing-b` (" in message
    assert "--model" in message
    assert _models_sent(server) == ["missing-a", "missing-b"]

    run, _ = load_progress(where / PROGRESS)
    assert run.status == "failed" and run.reason == "models_refused"
    assert run.last_error is not None and run.last_error.type == "ModelsRefusedError"
    assert [r.model for r in run.attempts[0].refused] == ["missing-a", "missing-b"]
    assert run.attempts[0].model is None
    assert run.usage.turns == 0
    assert _json(where, "status", PROGRESS)["can_resume"] is True

    # The second model became available: the next attempt starts again from the first.
    server.unknown_models = {"missing-a"}
    server.push(protocol.reply("Bee one."), protocol.reply("Bee two."))
    resumed = _resume(where, server, protocol)
    assert resumed.returncode == 0, resumed.stderr
    assert _models_sent(server)[2:] == ["missing-a", "missing-b", "missing-b"]
    run, _ = load_progress(where / PROGRESS)
    assert run.status == "completed"
    assert run.attempts[1].model == "missing-b"
    assert [r.model for r in run.attempts[1].refused] == ["missing-a"]


NOT_A_MODEL_REFUSAL = {
    # OpenAI's answer to a wrong path: a 404 that says nothing of the model.
    "404-url": Canned(
        status=404,
        body=error_body(
            "Invalid URL (POST /v1/chat/completions)", type="invalid_request_error", code=None
        ),
    ),
    # A 400 that names the model but refuses a parameter, not the model.
    "400-param": Canned(
        status=400,
        body=error_body(
            "Unsupported value: 'temperature' does not support 0.3 with missing-model.",
            type="invalid_request_error",
            code="unsupported_value",
        ),
    ),
    # A 403 about the key, without the model_not_found code.
    "403-key": Canned(
        status=403,
        body=error_body("You are not allowed to sample from this model", type="permission"),
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_A_MODEL_REFUSAL))
def test_other_client_errors_do_not_change_the_model(
    tmp_path: Path, server: ModelServer, case: str
) -> None:
    protocol = PROTOCOLS["openai"]
    where = _project(tmp_path, protocol, ["missing-model", "good-model"])
    server.push(NOT_A_MODEL_REFUSAL[case])
    result = _run(where, server, protocol)
    assert result.returncode == EXIT_PROVIDER, result.stderr
    assert _models_sent(server) == ["missing-model"]
    run, _ = load_progress(where / PROGRESS)
    assert run.status == "failed" and run.attempts[0].refused == []
    assert run.last_error is not None and run.last_error.type == "ProviderError"


def test_a_transient_error_is_retried_on_the_same_model(
    tmp_path: Path, server: ModelServer
) -> None:
    protocol = PROTOCOLS["openai"]
    where = _project(tmp_path, protocol, ["first-model", "good-model"])
    server.push(
        Canned(status=503, body=error_body("The engine is currently overloaded")),
        protocol.reply("Bee one."),
        protocol.reply("Bee two."),
    )
    result = _run(where, server, protocol)
    assert result.returncode == 0, result.stderr
    assert _models_sent(server) == ["first-model"] * 3
    assert _front(where)["attempts"][0]["model"] == "first-model"


def test_model_on_the_command_line_is_one_model_without_fallbacks(
    tmp_path: Path, server: ModelServer
) -> None:
    protocol = PROTOCOLS["openai"]
    where = _project(tmp_path, protocol, ["missing-model", "good-model"])
    server.unknown_models = {"missing-model"}
    result = _run(where, server, protocol, "--model", "missing-model")
    assert result.returncode == EXIT_PROVIDER, result.stderr
    assert "does not exist" in result.stderr
    assert _models_sent(server) == ["missing-model"]
    front = _front(where)
    assert "models" not in front["config"]
    assert front["last_error"]["type"] == "ModelUnavailableError"


#: Where the first process is killed: right after the refusal was checkpointed, or after the
#: next model answered step 1 (the run had fallen back). For each: the models the killed
#: process sent, the models its resume sends, and each attempt's model.
KILLS = {
    "engine.model_refused": (
        ["missing-model"],
        ["missing-model", "good-model", "good-model"],
        None,
    ),
    "engine.step_completed": (
        ["missing-model", "good-model"],
        ["missing-model", "good-model"],
        "good-model",
    ),
}


@pytest.mark.parametrize(
    ("name", "point"),
    sweep(
        [(name, point) for name in sorted(PROTOCOLS) for point in sorted(KILLS)],
        keep={("openai", "engine.step_completed")},
    ),
)
def test_a_kill_in_a_run_that_fell_back_resumes_from_the_first_model(
    tmp_path: Path, server: ModelServer, name: str, point: str
) -> None:
    protocol = PROTOCOLS[name]
    before_kill, after_resume, first_model = KILLS[point]
    # The uninterrupted run, for its transcript.
    (tmp_path / "clean").mkdir()
    clean = _project(tmp_path / "clean", protocol, ["missing-model", "good-model"])
    server.unknown_models = {"missing-model"}
    server.push(protocol.reply("Bee one."), protocol.reply("Bee two."))
    assert _run(clean, server, protocol).returncode == 0
    reference = transcript(clean / PROGRESS)

    (tmp_path / "killed").mkdir()
    where = _project(tmp_path / "killed", protocol, ["missing-model", "good-model"])
    sent = len(server.requests)
    server.push(protocol.reply("Bee one."), protocol.reply("Bee two."))
    killed = _run(where, server, protocol, FLOW_CRASH_AT=point)
    assert killed.returncode == -9, killed.stderr
    assert _models_sent(server)[sent:] == before_kill
    run, _ = load_progress(where / PROGRESS)
    # The refusal was durable before the process died, and so was the model that answered.
    assert [r.model for r in run.attempts[0].refused] == ["missing-model"]
    assert run.attempts[0].model == first_model

    sent = len(server.requests)
    resumed = _resume(where, server, protocol)
    assert resumed.returncode == 0, resumed.stderr
    # Every attempt starts again from the first model; the rest of it keeps to the one that
    # answered.
    assert _models_sent(server)[sent:] == after_resume
    assert server.pending == 0
    run, _ = load_progress(where / PROGRESS)
    assert run.status == "completed" and run.usage.turns == 2
    assert [a.model for a in run.attempts] == [first_model, "good-model"]
    assert [[r.model for r in a.refused] for a in run.attempts] == [
        ["missing-model"],
        ["missing-model"],
    ]
    # The clean run's transcript, plus flow's note to the model that the run was resumed.
    assert [row for row in transcript(where / PROGRESS) if row[0] != "note"] == reference


def test_a_long_refusal_is_recorded_cut(tmp_path: Path, server: ModelServer) -> None:
    protocol = PROTOCOLS["openai"]
    where = _project(tmp_path, protocol, ["missing-model", "good-model"])
    page = "The model `missing-model` does not exist. " + "x" * 5000
    server.push(
        Canned(
            status=404, body=error_body(page, type="invalid_request_error", code="model_not_found")
        ),
        protocol.reply("Bee one."),
        protocol.reply("Bee two."),
    )
    result = _run(where, server, protocol)
    assert result.returncode == 0, result.stderr
    [refused] = _front(where)["attempts"][0]["refused"]
    assert refused["message"].endswith(" …") and len(refused["message"]) <= 502
    assert "does not exist" in refused["message"]
