"""The contract every SDK provider keeps, run against both protocol servers.

``tests/support/providers_server.py`` speaks the OpenAI chat completions and the Anthropic
messages protocols. Each test here runs once per protocol (``openai``, ``anthropic``) and checks
what the engine relies on whatever the provider: a text reply and its usage, tool calls,
streamed text and tool calls, a transient error retried (with ``Retry-After`` honoured), and a
permanent error reported at once, naming the key's variable and never the key. What each
protocol puts on the wire is checked in ``test_provider_openai.py`` and
``test_provider_anthropic.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from promptflow_resume.base.errors import ModelUnavailableError, ProviderError
from promptflow_resume.chat import Message, ToolCall, ToolSpec
from promptflow_resume.providers.anthropic import AnthropicProvider
from promptflow_resume.providers.fallback import ModelChoices
from promptflow_resume.providers.openai import OpenAIProvider
from promptflow_resume.providers.provider import Provider, ProviderSettings, Request
from promptflow_resume.providers.retry import RetryEvent, call_with_retry
from tests.support.providers import FAST, PROXY_ENV_VARS, Sleeps, ask
from tests.support.providers_server import (
    Canned,
    ModelServer,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    anthropic_usage,
    error_body,
    openai_completion,
    openai_stream,
    openai_tool_call,
    openai_usage,
)

#: A key the server receives; no error message may repeat it.
KEY = "sk-contract-test-key"

TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file in the workspace",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec("list_dir", "List a folder", {"type": "object", "properties": {}}),
)

#: (id, name, arguments as JSON) of the two calls a tool reply makes.
CALLS = (("call_1", "read_file", {"path": "a.txt"}), ("call_2", "list_dir", {}))


@dataclass(frozen=True)
class Protocol:
    """How one wire protocol says the things the contract is about."""

    name: str
    #: The provider, pointed at the local server.
    make: Callable[[ModelServer, float, bool], Provider]
    #: The path every request goes to.
    path: str
    #: The variable the key comes from (named in an authentication error).
    key_env: str
    #: A whole reply: text, tool calls as ``CALLS``, and usage (input, output).
    reply: Callable[[str | None, bool, tuple[int, int]], Any]
    #: A streamed reply: text pieces, ``CALLS`` with their arguments in pieces, usage.
    stream: Callable[[list[str], bool, tuple[int, int]], list[tuple[str | None, Any]]]
    #: An error body with this message, of the protocol's kind for this status.
    error: Callable[[int, str], Any]
    #: ``finish_reason`` of a reply that ends with text, and of one that calls tools.
    finished: tuple[str, str]


def _openai(server: ModelServer, timeout: float, stream: bool) -> Provider:
    settings = ProviderSettings(
        name="openai",
        model="gpt-4o",
        base_url=server.url + "/v1",
        timeout=timeout,
        stream=stream,
    )
    return OpenAIProvider(settings)


def _anthropic(server: ModelServer, timeout: float, stream: bool) -> Provider:
    settings = ProviderSettings(
        name="anthropic",
        model="claude-sonnet-4-6",
        base_url=server.url,
        timeout=timeout,
        stream=stream,
    )
    return AnthropicProvider(settings)


def _openai_reply(text: str | None, tools: bool, usage: tuple[int, int]) -> Any:
    calls = [openai_tool_call(i, name, json.dumps(args)) for i, name, args in CALLS if tools]
    return openai_completion(text, calls, usage=openai_usage(*usage))


def _anthropic_reply(text: str | None, tools: bool, usage: tuple[int, int]) -> Any:
    uses = list(CALLS) if tools else []
    return anthropic_message(text, uses, usage=anthropic_usage(input=usage[0], output=usage[1]))


def _pieces(arguments: dict[str, Any]) -> list[str]:
    """A call's arguments as JSON cut in pieces, the way both APIs stream them."""
    text = json.dumps(arguments)
    return [text[i : i + 5] for i in range(0, len(text), 5)] if arguments else []


def _openai_stream(
    texts: list[str], tools: bool, usage: tuple[int, int]
) -> list[tuple[str | None, Any]]:
    calls = [(i, name, _pieces(args)) for i, name, args in CALLS if tools]
    return openai_stream(texts, calls, usage=openai_usage(*usage))


def _anthropic_stream(
    texts: list[str], tools: bool, usage: tuple[int, int]
) -> list[tuple[str | None, Any]]:
    uses = [(i, name, _pieces(args)) for i, name, args in CALLS if tools]
    return anthropic_stream(texts, uses, usage=anthropic_usage(input=usage[0], output=usage[1]))


def _openai_error(status: int, message: str) -> Any:
    kind = {401: "invalid_request_error", 429: "rate_limit_error"}.get(status, "server_error")
    return error_body(message, type=kind)


def _anthropic_error(status: int, message: str) -> Any:
    kind = {401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
    return anthropic_error(message, kind)


PROTOCOLS = {
    "openai": Protocol(
        name="openai",
        make=_openai,
        path="/v1/chat/completions",
        key_env="OPENAI_API_KEY",
        reply=_openai_reply,
        stream=_openai_stream,
        error=_openai_error,
        finished=("stop", "tool_calls"),
    ),
    "anthropic": Protocol(
        name="anthropic",
        make=_anthropic,
        path="/v1/messages",
        key_env="ANTHROPIC_API_KEY",
        reply=_anthropic_reply,
        stream=_anthropic_stream,
        error=_anthropic_error,
        finished=("end_turn", "tool_use"),
    ),
}

#: Variables of either SDK that would point it elsewhere or give it another key.
ENV_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    *PROXY_ENV_VARS,
)


@pytest.fixture(params=sorted(PROTOCOLS))
def protocol(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Protocol:
    """Each protocol in turn, with its key (and nothing else) in the environment."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    chosen = PROTOCOLS[request.param]
    monkeypatch.setenv(chosen.key_env, KEY)
    return chosen


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def provider(protocol: Protocol, server: ModelServer, *, stream: bool = False) -> Provider:
    return protocol.make(server, 5.0, stream)


def sent_key(headers: dict[str, str]) -> str | None:
    """The key as either SDK sends it (``x-api-key``, or a bearer token)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    return headers.get("authorization", "").removeprefix("Bearer ") or None


def sent_tools(server: ModelServer) -> list[dict[str, Any]]:
    """The tool specs of the first request, in the protocol's own shape."""
    tools: list[dict[str, Any]] = server.requests[0].body["tools"]
    return tools


# --- replies ------------------------------------------------------------------------------


def test_a_text_reply_comes_back_with_its_usage(protocol: Protocol, server: ModelServer) -> None:
    server.push(Canned(body=protocol.reply("Hello!", False, (120, 7))))
    request = Request(messages=(Message("system", "Be brief."), Message("user", "Say hello")))
    reply = provider(protocol, server).complete(request)
    assert reply.content == "Hello!"
    assert reply.tool_calls == ()
    assert reply.finish_reason == protocol.finished[0]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (120, 7)
    (sent,) = server.requests
    assert sent.path == protocol.path
    assert sent_key(sent.headers) == KEY
    assert "stream" not in sent.body


def test_tool_calls_come_back_in_order_with_their_arguments(
    protocol: Protocol, server: ModelServer
) -> None:
    server.push(Canned(body=protocol.reply(None, True, (40, 12))))
    reply = provider(protocol, server).complete(ask("read a.txt", tools=TOOLS))
    assert reply.finish_reason == protocol.finished[1]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("call_1", "read_file", {"path": "a.txt"}),
        ("call_2", "list_dir", {}),
    ]
    assert reply.content == ""
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (40, 12)
    assert [t["name"] if "name" in t else t["function"]["name"] for t in sent_tools(server)] == [
        "read_file",
        "list_dir",
    ]


def test_tool_results_go_back_and_the_model_answers(
    protocol: Protocol, server: ModelServer
) -> None:
    server.push(Canned(body=protocol.reply("a.txt says hi", False, (60, 4))))
    history = (
        Message("user", "read a"),
        Message("assistant", "", tool_calls=(ToolCall("call_1", "read_file", '{"path":"a"}'),)),
        Message("tool", "hi", tool_call_id="call_1", name="read_file"),
    )
    reply = provider(protocol, server).complete(Request(messages=history, tools=TOOLS))
    assert reply.content == "a.txt says hi"
    assert "call_1" in json.dumps(server.requests[0].body["messages"])


def test_streamed_text_reaches_on_text_piece_by_piece(
    protocol: Protocol, server: ModelServer
) -> None:
    server.push(Canned(events=protocol.stream(["Hel", "lo, ", "world"], False, (30, 3))))
    seen: list[str] = []
    reply = provider(protocol, server, stream=True).complete(ask(), on_text=seen.append)
    assert seen == ["Hel", "lo, ", "world"]
    assert reply.content == "Hello, world"
    assert reply.finish_reason == protocol.finished[0]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (30, 3)
    assert server.requests[0].body["stream"] is True


def test_streamed_tool_calls_are_assembled(protocol: Protocol, server: ModelServer) -> None:
    server.push(Canned(events=protocol.stream(["Reading."], True, (12, 40))))
    reply = provider(protocol, server, stream=True).complete(ask(tools=TOOLS))
    assert reply.content == "Reading."
    assert reply.tool_calls == (
        ToolCall("call_1", "read_file", '{"path": "a.txt"}'),
        ToolCall("call_2", "list_dir", "{}"),
    )
    assert reply.finish_reason == protocol.finished[1]
    assert reply.usage.output_tokens == 40


# --- transient errors are retried ---------------------------------------------------------


def test_a_server_error_is_retried_after_the_first_wait(
    protocol: Protocol, server: ModelServer
) -> None:
    server.push(
        Canned(status=500, body=protocol.error(500, "The server had an error")),
        Canned(body=protocol.reply("recovered", False, (10, 5))),
    )
    sleeps = Sleeps()
    events: list[RetryEvent] = []
    p = provider(protocol, server)
    reply = call_with_retry(p, ask(), FAST, sleep=sleeps, on_retry=events.append)
    assert reply.content == "recovered"
    assert sleeps.calls == [0.5]
    assert len(server.requests) == 2
    assert len(events) == 1 and events[0].error.transient


def test_a_rate_limit_waits_as_long_as_retry_after_says(
    protocol: Protocol, server: ModelServer
) -> None:
    server.push(
        Canned(status=429, body=protocol.error(429, "Rate limit"), headers={"Retry-After": "7"}),
        Canned(body=protocol.reply("finally", False, (10, 5))),
    )
    sleeps = Sleeps()
    events: list[RetryEvent] = []
    p = provider(protocol, server)
    reply = call_with_retry(p, ask(), FAST, sleep=sleeps, on_retry=events.append)
    assert reply.content == "finally"
    assert sleeps.calls == [7.0]
    assert events[0].error.reason == "rate_limited" and events[0].error.status_code == 429


def test_a_dropped_connection_is_retried(protocol: Protocol, server: ModelServer) -> None:
    server.push(Canned(drop="before"), Canned(body=protocol.reply("ok", False, (10, 5))))
    sleeps = Sleeps()
    assert call_with_retry(provider(protocol, server), ask(), FAST, sleep=sleeps).content == "ok"
    assert sleeps.calls == [0.5]


def test_a_stream_cut_midway_is_transient(protocol: Protocol, server: ModelServer) -> None:
    events = protocol.stream(["a", "b", "c"], False, (10, 5))
    server.push(Canned(events=events, drop="mid", drop_after=len(events) - 2))
    with pytest.raises(ProviderError) as info:
        provider(protocol, server, stream=True).complete(ask())
    assert info.value.transient


def test_an_outage_longer_than_the_policy_ends_as_provider_unavailable(
    protocol: Protocol, server: ModelServer
) -> None:
    server.push(*[Canned(status=503, body=protocol.error(503, "down for maintenance"))] * 3)
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as info:
        call_with_retry(provider(protocol, server), ask(), FAST, sleep=sleeps)
    assert info.value.reason == "provider_unavailable"
    assert "down for maintenance" in str(info.value)
    assert len(server.requests) == 3
    assert sleeps.calls == [0.5, 1.0]


# --- permanent errors are reported at once ------------------------------------------------


def test_a_rejected_key_is_reported_at_once_naming_its_variable(
    protocol: Protocol, server: ModelServer
) -> None:
    server.push(Canned(status=401, body=protocol.error(401, "Incorrect API key provided")))
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as info:
        call_with_retry(provider(protocol, server), ask(), FAST, sleep=sleeps)
    err = info.value
    assert not err.transient and err.reason == "auth" and err.status_code == 401
    assert "Incorrect API key provided" in str(err)
    assert protocol.key_env in str(err)
    assert KEY not in str(err)
    assert sleeps.calls == [] and len(server.requests) == 1


def test_an_unknown_model_is_reported_at_once(protocol: Protocol, server: ModelServer) -> None:
    server.push(Canned(status=404, body=protocol.error(404, "model: no-such-model not found")))
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as info:
        call_with_retry(provider(protocol, server), ask(model="no-such-model"), FAST, sleep=sleeps)
    err = info.value
    assert not err.transient and err.reason == "model_not_found"
    assert "`no-such-model`" in str(err)
    assert sleeps.calls == [] and len(server.requests) == 1


def test_a_model_the_server_does_not_offer_is_refused_and_the_next_is_asked(
    protocol: Protocol, server: ModelServer
) -> None:
    # The provider's own 404 for the model (OpenAI's model_not_found, Anthropic's
    # not_found_error) is the one failure that moves a model list on.
    server.unknown_models = {"retired-model"}
    server.push(Canned(body=protocol.reply("hello", False, (12, 3))))
    sent = provider(protocol, server)
    with pytest.raises(ModelUnavailableError) as info:
        call_with_retry(sent, ask(model="retired-model"), FAST, sleep=Sleeps())
    assert info.value.model == "retired-model" and info.value.status_code == 404
    assert info.value.reason == "model_not_found" and not info.value.transient

    choices = ModelChoices(["retired-model", "current-model"])
    refused: list[str] = []
    reply = choices.call(
        ask(model="ignored"),
        lambda request: call_with_retry(sent, request, FAST, sleep=Sleeps()),
        on_refused=lambda model, error: refused.append(model),
    )
    assert reply.content == "hello" and refused == ["retired-model"]
    assert choices.current == "current-model"
    assert [r.body["model"] for r in server.requests] == ["retired-model"] * 2 + ["current-model"]
    # The same request, but for the model.
    same = [{k: v for k, v in r.body.items() if k != "model"} for r in server.requests[1:]]
    assert same[0] == same[1]
