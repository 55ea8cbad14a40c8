"""Which provider errors refuse the model itself (and so move a ``model:`` list on)."""

from __future__ import annotations

import pytest

from promptflow_resume.base.errors import (
    ModelsRefusedError,
    ModelUnavailableError,
    ProviderError,
)
from promptflow_resume.providers.fallback import ModelChoices
from promptflow_resume.providers.provider import Reply, Request
from promptflow_resume.providers.retry import http_failure

REFUSALS = {
    "openai-404": (
        404,
        "The model `gpt-9` does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    ),
    "openai-403-project": (
        403,
        "Project `proj_1` does not have access to model `gpt-9`",
        "invalid_request_error",
        "model_not_found",
    ),
    "anthropic-404": (404, "model: gpt-9", "not_found_error", None),
    "vllm-404": (404, "The model `gpt-9` does not exist.", "NotFoundError", None),
    "ollama-404": (404, 'model "gpt-9" not found, try pulling it first', "api_error", None),
}

NOT_REFUSALS = {
    "404-wrong-url": (
        404,
        "Invalid URL (POST /v1/chat/completions)",
        "invalid_request_error",
        None,
    ),
    "404-other-model": (404, "The model `gpt-8` does not exist.", None, None),
    "403-no-code": (403, "You are not allowed to sample from gpt-9", "permission", None),
    "400-param": (
        400,
        "Unsupported value: 'temperature' with gpt-9 not found",
        None,
        "unsupported_value",
    ),
    "401": (401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
    "429": (429, "Rate limit reached for gpt-9", "rate_limit_error", None),
    "503": (503, "The model gpt-9 not found on this replica", "server_error", None),
    "stream-404": (None, "model: gpt-9", "not_found_error", None),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_of_the_model(case: str) -> None:
    status, message, etype, code = REFUSALS[case]
    err = http_failure(
        provider="X",
        status=status,
        message=message,
        error_type=etype,
        error_code=code,
        model="gpt-9",
    )
    assert isinstance(err, ModelUnavailableError)
    assert err.model == "gpt-9" and err.reason == "model_not_found" and not err.transient
    assert message.rstrip(".") in str(err) and "`gpt-9`" in str(err)


@pytest.mark.parametrize("case", sorted(NOT_REFUSALS))
def test_other_errors_are_not_refusals_of_the_model(case: str) -> None:
    status, message, etype, code = NOT_REFUSALS[case]
    err = http_failure(
        provider="X",
        status=status,
        message=message,
        error_type=etype,
        error_code=code,
        model="gpt-9",
    )
    assert isinstance(err, ProviderError) and not isinstance(err, ModelUnavailableError)
    assert err.reason != "model_not_found"


def _refuse(model: str) -> ModelUnavailableError:
    return ModelUnavailableError(f"X returned HTTP 404: no {model}.", model=model, status_code=404)


def test_one_model_is_not_a_list_its_refusal_is_raised_unchanged() -> None:
    error = _refuse("only")

    def send(request: Request) -> Reply:
        raise error

    with pytest.raises(ModelUnavailableError) as info:
        ModelChoices(["only"]).call(Request(messages=()), send)
    assert info.value is error


def test_every_model_refused_names_each_with_its_reason() -> None:
    def send(request: Request) -> Reply:
        raise _refuse(request.model or "")

    choices = ModelChoices(["a", "b", "c"])
    with pytest.raises(ModelsRefusedError) as info:
        choices.call(Request(messages=()), send)
    text = str(info.value)
    assert "`a` (X returned HTTP 404: no a)" in text and "`c` (X returned HTTP 404: no c)" in text
    assert info.value.reason == "models_refused" and "--model" in text
    assert [m for m, _ in choices.refused] == ["a", "b", "c"]


def test_an_error_that_is_not_a_refusal_stops_at_the_current_model() -> None:
    def send(request: Request) -> Reply:
        raise ProviderError("X returned HTTP 400: bad temperature.", status_code=400)

    choices = ModelChoices(["a", "b"])
    with pytest.raises(ProviderError):
        choices.call(Request(messages=()), send)
    assert choices.current == "a" and choices.refused == []
