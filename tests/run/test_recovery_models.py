"""A recovery decision tries the run's models in order, as the run's own calls do."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from promptflow_resume.progress.examples import example_run
from promptflow_resume.providers.openai import OpenAIProvider
from promptflow_resume.providers.provider import ProviderSettings
from promptflow_resume.run.recovery import Ambiguity, Choice, Situation, ask_model
from tests.support.providers_server import (
    Canned,
    ModelServer,
    openai_completion,
    openai_usage,
)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with ModelServer() as srv:
        yield srv


def test_a_refused_model_is_replaced_by_the_next_for_the_decision(server: ModelServer) -> None:
    server.unknown_models = {"missing-model"}
    answer = json.dumps({"choice": "continue", "reason": "the call is safe to repeat"})
    server.push(Canned(body=openai_completion(answer, usage=openai_usage(50, 5))))
    run = example_run()
    run.config.model, run.config.models = "missing-model", ["missing-model", "good-model"]
    provider = OpenAIProvider(
        ProviderSettings(name="openai", model="missing-model", base_url=server.url + "/v1")
    )
    situation = Situation(Ambiguity.IN_FLIGHT, "inspect", "a call was in flight", tuple(Choice))
    decision = ask_model(provider, run, situation)
    assert decision.choice is Choice.CONTINUE and decision.refused is None
    assert [r.body["model"] for r in server.requests] == ["missing-model", "good-model"]
    assert decision.usage.input_tokens == 50
