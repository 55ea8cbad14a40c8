"""The anthropic provider through the real SDK, against a local server speaking its protocol."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from promptflow_resume.base.errors import ProviderError, ProviderSetupError
from promptflow_resume.chat import Message, ToolCall, ToolSpec
from promptflow_resume.providers import create_provider
from promptflow_resume.providers.anthropic import (
    AnthropicProvider,
    resolve_credentials,
    to_anthropic,
)
from promptflow_resume.providers.pricing import DEFAULT_MAX_OUTPUT_TOKENS, cost_usd
from promptflow_resume.providers.provider import ProviderSettings, Request
from promptflow_resume.providers.retry import RetryEvent, call_with_retry
from tests.support.providers import FAST, PROXY_ENV_VARS, Sleeps, ask
from tests.support.providers_server import (
    Canned,
    ModelServer,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    anthropic_usage,
)

ENV_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CUSTOM_HEADERS",
    *PROXY_ENV_VARS,
)
KEY = "sk-ant-test-key"
TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file in the workspace",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec("list_dir", "List a folder", {}),
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test key, and nothing else from the machine running the tests."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def provider(server: ModelServer, **kw: Any) -> AnthropicProvider:
    settings = ProviderSettings(
        name="anthropic",
        model=kw.pop("model", "claude-sonnet-4-6"),
        base_url=kw.pop("base_url", server.url),
        timeout=kw.pop("timeout", 5.0),
        # The whole-body path unless a test streams (flow streams by default).
        stream=kw.pop("stream", False),
        **kw,
    )
    return AnthropicProvider(settings)


def sent_key(headers: dict[str, str]) -> str | None:
    """The key as the SDK sends it (``x-api-key``, or a bearer token in newer versions)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth else None


# --- set-up -------------------------------------------------------------------------------


def test_registry_builds_the_anthropic_provider(server: ModelServer) -> None:
    p = create_provider(ProviderSettings(name="anthropic", model="m", base_url=server.url))
    assert isinstance(p, AnthropicProvider)
    assert p.name == "anthropic"


def test_missing_key_names_the_variable_and_sends_nothing(
    server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ProviderSetupError) as info:
        provider(server)
    assert "ANTHROPIC_API_KEY" in str(info.value)
    assert info.value.exit_code == 10
    assert server.requests == []


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch, server: ModelServer) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ProviderSetupError) as info:
        provider(server)
    assert "pip install 'promptflow-resume[anthropic]'" in str(info.value)


def test_credentials_from_environment() -> None:
    settings = ProviderSettings(name="anthropic")
    creds = resolve_credentials(settings, {"ANTHROPIC_API_KEY": "k"})
    assert (creds.api_key, creds.auth_token, creds.key_env) == ("k", None, "ANTHROPIC_API_KEY")
    assert creds.base_url == "https://api.anthropic.com"
    token = resolve_credentials(settings, {"ANTHROPIC_AUTH_TOKEN": "t"})
    assert (token.api_key, token.auth_token) == (None, "t")
    moved = resolve_credentials(
        settings, {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://proxy:8080"}
    )
    assert moved.base_url == "http://proxy:8080"
    explicit = ProviderSettings(name="anthropic", base_url="http://a", extra={"api_key_env": "K2"})
    assert resolve_credentials(explicit, {"K2": "v"}).api_key == "v"
    with pytest.raises(ProviderSetupError, match="K2"):
        resolve_credentials(explicit, {"ANTHROPIC_API_KEY": "k"})


# --- request shape ------------------------------------------------------------------------


def test_history_conversion_merges_roles_and_puts_tool_results_first() -> None:
    system, messages = to_anthropic(
        (
            Message("system", "You read files."),
            Message("user", "read both"),
            Message(
                "assistant",
                "Reading.",
                tool_calls=(
                    ToolCall("tu_a", "read_file", '{"path": "a.txt"}'),
                    ToolCall("tu_b", "read_file", "not json"),
                ),
            ),
            Message("tool", "hi from a", tool_call_id="tu_a", name="read_file"),
            Message("tool", "no such file", tool_call_id="tu_b", name="read_file", is_error=True),
            Message("user", "The run was resumed.", note=True),
            Message("user", ""),
        )
    )
    assert system == "You read files."
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "read both"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "tu_a", "name": "read_file", "input": {"path": "a.txt"}},
                {
                    "type": "tool_use",
                    "id": "tu_b",
                    "name": "read_file",
                    "input": {"_arguments": "not json"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_a", "content": "hi from a"},
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_b",
                    "content": "no such file",
                    "is_error": True,
                },
                {"type": "text", "text": "The run was resumed."},
            ],
        },
    ]


def test_note_before_tool_results_still_sends_results_first() -> None:
    _, messages = to_anthropic(
        (
            Message("user", "go"),
            Message("assistant", "", tool_calls=(ToolCall("t1", "list_dir", "{}"),)),
            Message("user", "note", note=True),
            Message("tool", "a b c", tool_call_id="t1"),
        )
    )
    assert [b["type"] for b in messages[-1]["content"]] == ["tool_result", "text"]


# --- replies ------------------------------------------------------------------------------


def test_plain_reply_usage_and_request_body(server: ModelServer) -> None:
    server.push(
        Canned(
            body=anthropic_message(
                "Hello!", usage=anthropic_usage(input=20, output=7, cache_read=1000, cache_write=30)
            )
        )
    )
    request = Request(
        messages=(Message("system", "Be brief."), Message("user", "Say hello")),
        params={"temperature": 0.2, "stop": "###"},
    )
    reply = provider(server).complete(request)
    assert reply.content == "Hello!"
    assert reply.finish_reason == "end_turn"
    assert reply.model == "claude-sonnet-4-6"
    # flow's convention: input counts every input token, cached ones included.
    assert reply.usage.input_tokens == 1050
    assert reply.usage.cached_tokens == 1000
    assert reply.usage.output_tokens == 7
    assert cost_usd(reply.model, reply.usage) == pytest.approx(
        (50 * 3.0 + 1000 * 0.30 + 7 * 15.0) / 1e6
    )

    (sent,) = server.requests
    assert sent.path == "/v1/messages"
    assert sent_key(sent.headers) == KEY
    assert "anthropic-version" in sent.headers
    assert sent.body["model"] == "claude-sonnet-4-6"
    assert sent.body["system"] == "Be brief."
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello"}]}
    ]
    assert sent.body["max_tokens"] == DEFAULT_MAX_OUTPUT_TOKENS
    assert sent.body["temperature"] == 0.2
    assert sent.body["stop_sequences"] == ["###"]
    assert "stop" not in sent.body and "stream" not in sent.body


def test_max_tokens_from_params(server: ModelServer) -> None:
    server.push(Canned(body=anthropic_message("ok")))
    provider(server).complete(ask(params={"max_completion_tokens": 256}))
    assert server.requests[0].body["max_tokens"] == 256
    assert "max_completion_tokens" not in server.requests[0].body


def test_parallel_tool_use_and_tool_specs(server: ModelServer) -> None:
    server.push(
        Canned(
            body=anthropic_message(
                "I'll read both.",
                [("tu_1", "read_file", {"path": "a.txt"}), ("tu_2", "read_file", {"path": "b"})],
            )
        )
    )
    reply = provider(server).complete(ask("read both", tools=TOOLS))
    assert reply.content == "I'll read both."
    assert reply.finish_reason == "tool_use"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("tu_1", "read_file", {"path": "a.txt"}),
        ("tu_2", "read_file", {"path": "b"}),
    ]
    assert server.requests[0].body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file in the workspace",
            "input_schema": TOOLS[0].parameters,
        },
        {
            "name": "list_dir",
            "description": "List a folder",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]


def test_tool_results_round_trip_over_the_wire(server: ModelServer) -> None:
    server.push(Canned(body=anthropic_message("a.txt says hi")))
    history = (
        Message("user", "read a"),
        Message("assistant", "", tool_calls=(ToolCall("tu_1", "read_file", '{"path":"a.txt"}'),)),
        Message("tool", "hi", tool_call_id="tu_1", name="read_file"),
    )
    provider(server).complete(Request(messages=history, tools=TOOLS))
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read a"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "tu_1", "name": "read_file", "input": {"path": "a.txt"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "hi"}],
        },
    ]


def test_streaming_text_and_tool_input_deltas(server: ModelServer) -> None:
    server.push(
        Canned(
            events=anthropic_stream(
                ["Let me ", "look."],
                [("tu_1", "read_file", ['{"pa', 'th": "a.txt"}']), ("tu_2", "list_dir", [])],
                usage=anthropic_usage(input=12, output=40, cache_read=500),
            )
        )
    )
    seen: list[str] = []
    reply = provider(server, stream=True).complete(ask(tools=TOOLS), on_text=seen.append)
    assert seen == ["Let me ", "look."]
    assert reply.content == "Let me look."
    assert reply.tool_calls == (
        ToolCall("tu_1", "read_file", '{"path": "a.txt"}'),
        ToolCall("tu_2", "list_dir", "{}"),
    )
    assert reply.finish_reason == "tool_use"
    assert (reply.usage.input_tokens, reply.usage.cached_tokens) == (512, 500)
    assert reply.usage.output_tokens == 40
    assert server.requests[0].body["stream"] is True


# --- transient errors and retries ---------------------------------------------------------


def test_429_with_retry_after_is_honoured(server: ModelServer) -> None:
    server.push(
        Canned(
            status=429,
            body=anthropic_error(
                "Number of requests has exceeded your rate limit", "rate_limit_error"
            ),
            headers={"retry-after": "4"},
        ),
        Canned(body=anthropic_message("done")),
    )
    sleeps = Sleeps()
    events: list[RetryEvent] = []
    reply = call_with_retry(provider(server), ask(), FAST, sleep=sleeps, on_retry=events.append)
    assert reply.content == "done"
    assert sleeps.calls == [4.0]
    assert events[0].error.reason == "rate_limited"


def test_529_overloaded_is_transient(server: ModelServer) -> None:
    server.push(
        Canned(status=529, body=anthropic_error("Overloaded", "overloaded_error")),
        Canned(body=anthropic_message("ok")),
    )
    sleeps = Sleeps()
    assert call_with_retry(provider(server), ask(), FAST, sleep=sleeps).content == "ok"
    assert sleeps.calls == [0.5]


def test_500_then_success(server: ModelServer) -> None:
    server.push(
        Canned(status=500, body=anthropic_error("Internal server error", "api_error")),
        Canned(body=anthropic_message("recovered")),
    )
    assert call_with_retry(provider(server), ask(), FAST, sleep=Sleeps()).content == "recovered"
    assert len(server.requests) == 2


def test_overloaded_error_event_mid_stream_is_transient(server: ModelServer) -> None:
    events = anthropic_stream(["partial"])
    events.insert(4, ("error", anthropic_error("Overloaded", "overloaded_error")))
    server.push(Canned(events=events))
    with pytest.raises(ProviderError) as info:
        provider(server, stream=True).complete(ask())
    assert info.value.transient
    assert "Overloaded" in str(info.value)


def test_timeout_is_transient(server: ModelServer) -> None:
    server.push(Canned(delay=1.5, body=anthropic_message("too late")))
    with pytest.raises(ProviderError) as info:
        provider(server, timeout=0.3).complete(ask())
    assert info.value.transient and info.value.reason == "idle_timeout"


def test_dropped_connection_is_transient(server: ModelServer) -> None:
    server.push(Canned(drop="before"), Canned(body=anthropic_message("ok")))
    sleeps = Sleeps()
    assert call_with_retry(provider(server), ask(), FAST, sleep=sleeps).content == "ok"
    assert sleeps.calls == [0.5]


def test_stream_cut_midway_is_transient(server: ModelServer) -> None:
    server.push(Canned(events=anthropic_stream(["a", "b", "c"]), drop="mid", drop_after=4))
    with pytest.raises(ProviderError) as info:
        provider(server, stream=True).complete(ask())
    assert info.value.transient


def test_outage_ends_as_provider_unavailable(server: ModelServer) -> None:
    server.push(*[Canned(status=529, body=anthropic_error("Overloaded", "overloaded_error"))] * 3)
    with pytest.raises(ProviderError) as info:
        call_with_retry(provider(server), ask(), FAST, sleep=Sleeps())
    assert info.value.reason == "provider_unavailable"
    assert len(server.requests) == 3


# --- permanent errors ---------------------------------------------------------------------


def test_401_names_the_key_variable(server: ModelServer) -> None:
    server.push(
        Canned(status=401, body=anthropic_error("invalid x-api-key", "authentication_error"))
    )
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as info:
        call_with_retry(provider(server), ask(), FAST, sleep=sleeps)
    err = info.value
    assert not err.transient and err.reason == "auth"
    assert "ANTHROPIC_API_KEY" in str(err) and "invalid x-api-key" in str(err)
    assert KEY not in str(err)
    assert sleeps.calls == []


def test_404_model_not_found(server: ModelServer) -> None:
    server.push(Canned(status=404, body=anthropic_error("model: claude-9", "not_found_error")))
    with pytest.raises(ProviderError) as info:
        provider(server, model="claude-9").complete(ask())
    assert info.value.reason == "model_not_found" and "`claude-9`" in str(info.value)


def test_prompt_too_long(server: ModelServer) -> None:
    server.push(
        Canned(
            status=400,
            body=anthropic_error(
                "prompt is too long: 215000 tokens > 200000 maximum", "invalid_request_error"
            ),
        )
    )
    with pytest.raises(ProviderError) as info:
        provider(server).complete(ask())
    assert info.value.reason == "context_length_exceeded" and not info.value.transient


def test_an_error_in_on_text_is_not_taken_for_a_network_failure(server: ModelServer) -> None:
    server.push(Canned(events=anthropic_stream(["a", "b"])))

    def broken_pipe(text: str) -> None:
        raise BrokenPipeError("stdout closed")

    with pytest.raises(BrokenPipeError):
        provider(server, stream=True).complete(ask(), on_text=broken_pipe)
