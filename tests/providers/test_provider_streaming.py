"""Streaming by default, and what a timeout means then (docs/spec.md 5.2, 5.3).

Every request a provider can stream is streamed, so the idle timeout is "no token for that
long", not "the answer took that long"; a limit on the whole request is an option, and a
request past it is not sent again. A server that sends nothing in time twice in a row is not
asked a third time. The server here paces its events like a model generating at a rate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from promptflow_resume.base.errors import ContextLengthError, ProviderError, ProviderTimeoutError
from promptflow_resume.providers.anthropic import AnthropicProvider
from promptflow_resume.providers.openai import OpenAIProvider
from promptflow_resume.providers.provider import Provider, ProviderSettings
from promptflow_resume.providers.retry import call_with_retry
from tests.support.providers import FAST, Sleeps, ask
from tests.support.providers_server import (
    Canned,
    ModelServer,
    anthropic_message,
    llamacpp_context_exceeded,
    llamacpp_props,
    ollama_context_exceeded,
    openai_completion,
    openai_usage,
    vllm_context_exceeded,
    vllm_models,
)

#: A reply of 60 words, streamed a word (about a token) an event.
WORDS = " ".join(f"w{i}" for i in range(60))


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def openai(server: ModelServer, **kw: Any) -> OpenAIProvider:
    return OpenAIProvider(
        ProviderSettings(name="openai", model="local", base_url=server.url + "/v1", **kw)
    )


def anthropic(server: ModelServer, **kw: Any) -> AnthropicProvider:
    # The key is the environment's only: a test value, for the local server.
    kw.setdefault("extra", {"api_key_env": "FLOW_TEST_ANTHROPIC_KEY"})
    return AnthropicProvider(
        ProviderSettings(name="anthropic", model="claude-sonnet-4-6", base_url=server.url, **kw)
    )


@pytest.mark.parametrize("make", [openai, anthropic], ids=["openai", "anthropic"])
def test_an_answer_longer_than_the_idle_timeout_completes_when_it_streams(
    server: ModelServer, make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOW_TEST_ANTHROPIC_KEY", "sk-ant-test")
    # 60 tokens at 30 tokens/s: two seconds in all, four times the idle timeout, as a
    # 2,000-token answer at 30 tokens/s is against the default 120 s.
    body = (
        openai_completion(WORDS, usage=openai_usage(20, 60))
        if make is openai
        else anthropic_message(WORDS)
    )
    server.push(Canned(body=body, pace=1 / 30))
    reply = make(server, timeout=0.5).complete(ask())
    assert reply.content == WORDS
    assert server.requests[0].body["stream"] is True  # streamed without a terminal
    timing = reply.timing
    assert timing is not None and timing.first_token is not None and timing.pieces == 60
    assert timing.generating > 0.5  # longer than the idle timeout, as a whole


def test_the_same_answer_not_streamed_times_out(server: ModelServer) -> None:
    server.push(Canned(body=openai_completion(WORDS), pace=1 / 30))
    with pytest.raises(ProviderTimeoutError) as info:
        openai(server, timeout=0.5, stream=False).complete(ask())
    assert "no answer within 0.5 s (the request was not streamed" in info.value.message
    assert "stream" not in server.requests[0].body


def test_a_stream_that_stalls_is_a_timeout_that_says_what_had_arrived(
    server: ModelServer,
) -> None:
    server.push(Canned(body=openai_completion(WORDS), stall=(6, 2.0)))
    seen: list[str] = []
    with pytest.raises(ProviderTimeoutError) as info:
        openai(server, timeout=0.4).complete(ask(), on_text=seen.append)
    error = info.value
    # The role chunk comes first: five words had arrived.
    assert error.transient and error.reason == "idle_timeout" and error.tokens == 5
    assert "no token for 0.4 s after 5 tokens in" in error.message
    assert "".join(seen) == " ".join(WORDS.split()[:5])


def test_a_request_past_its_whole_limit_is_not_sent_again(server: ModelServer) -> None:
    server.push(*[Canned(body=openai_completion(WORDS), pace=1 / 30)] * 3)
    sleeps = Sleeps()
    with pytest.raises(ProviderTimeoutError) as info:
        call_with_retry(openai(server, request_timeout=0.5), ask(), FAST, sleep=sleeps)
    error = info.value
    assert not error.transient and error.reason == "request_timeout"
    assert "cannot finish within the limit, so it is not sent again" in error.message
    assert len(server.requests) == 1 and sleeps.calls == []
    assert "--request-timeout" in (error.hint or "")


def test_a_server_that_sends_nothing_in_time_twice_is_not_asked_a_third_time(
    server: ModelServer,
) -> None:
    server.push(*[Canned(body=openai_completion("late"), delay=1.0)] * 3)
    provider: Provider = openai(server, timeout=0.3)
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as info:
        call_with_retry(provider, ask(), FAST, sleep=sleeps)
    error = info.value
    assert error.reason == "provider_unavailable"
    assert "sent nothing within the timeout 2 times in a row" in error.message
    assert "no token within 0.3 s of sending the request" in error.message
    assert len(server.requests) == 2 and len(sleeps.calls) == 1
    assert "--idle-timeout" in (error.hint or "")


# --- local servers: context overflow and the window they say -----------------------------


@pytest.mark.parametrize(
    ("refusal", "window"),
    [
        (llamacpp_context_exceeded(5000, 4096), 4096),
        (vllm_context_exceeded(2048, 2300), 2048),
        (ollama_context_exceeded(), None),
    ],
    ids=["llama.cpp", "vllm", "ollama"],
)
def test_a_local_servers_context_overflow_is_a_context_length_error(
    server: ModelServer, refusal: Canned, window: int | None
) -> None:
    server.push(refusal)
    with pytest.raises(ContextLengthError) as info:
        openai(server).complete(ask())
    error = info.value
    assert error.reason == "context_length_exceeded" and not error.transient
    assert error.window == window
    assert "context window" in (error.hint or "")


def test_the_window_is_read_from_llamacpps_props(server: ModelServer) -> None:
    server.push(llamacpp_props(8192))
    assert openai(server).context_window("local") == 8192
    assert [r.path for r in server.requests] == ["/props"]


def test_the_window_is_read_from_vllms_model_list(server: ModelServer) -> None:
    # vLLM has no /props: its 404 is no answer, and the model list says the window.
    server.push(Canned(status=404, body={"detail": "Not Found"}), vllm_models("local", 32768))
    assert openai(server).context_window("local") == 32768
    assert [r.path for r in server.requests] == ["/props", "/v1/models"]


def test_a_server_that_says_no_window_gives_none(server: ModelServer) -> None:
    server.push(Canned(status=404, body={}), Canned(status=404, body={}))
    assert openai(server).context_window("local") is None
