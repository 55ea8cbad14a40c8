"""The openai provider through the real SDK, against a local server speaking its protocol."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from promptflow_resume.base.errors import ProviderError, ProviderSetupError
from promptflow_resume.chat import Message, ToolCall, ToolSpec
from promptflow_resume.providers import create_provider
from promptflow_resume.providers.endpoints import GITHUB_MODELS_URL, OLLAMA_URL, OPENAI_URL
from promptflow_resume.providers.openai import OpenAIProvider
from promptflow_resume.providers.openaiendpoint import NO_KEY, resolve_endpoint
from promptflow_resume.providers.provider import ProviderSettings, Request
from promptflow_resume.providers.retry import RetryEvent, call_with_retry
from tests.support.flowproc import flow_env
from tests.support.providers import FAST, PROXY_ENV_VARS, Sleeps, ask
from tests.support.providers_server import (
    Canned,
    ModelServer,
    error_body,
    http_date,
    openai_completion,
    openai_stream,
    openai_tool_call,
    openai_usage,
)

ENV_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_VERSION",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_ADMIN_KEY",
    "GITHUB_TOKEN",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_AD_TOKEN",
    "OLLAMA_HOST",
    *PROXY_ENV_VARS,
)

TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file in the workspace",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec("list_dir", "List a folder", {"type": "object", "properties": {}}),
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key, URL or proxy from the machine running the tests."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def provider(server: ModelServer, **kw: Any) -> OpenAIProvider:
    settings = ProviderSettings(
        name="openai",
        model=kw.pop("model", "gpt-4o"),
        base_url=kw.pop("base_url", server.url + "/v1"),
        timeout=kw.pop("timeout", 5.0),
        # The whole-body path unless a test streams (flow streams by default).
        stream=kw.pop("stream", False),
        **kw,
    )
    return OpenAIProvider(settings)


# --- set-up -------------------------------------------------------------------------------


def test_importing_the_provider_does_not_import_the_sdk() -> None:
    code = (
        "import sys, promptflow_resume.providers.openai, promptflow_resume.providers.anthropic;"
        "print(sorted(m for m in ('openai', 'anthropic', 'httpx', 'httpx2') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=flow_env(), capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_registry_builds_the_openai_provider(server: ModelServer) -> None:
    p = create_provider(ProviderSettings(name="openai", model="gpt-4o", base_url=server.url))
    assert isinstance(p, OpenAIProvider)
    assert p.name == "openai"


def test_missing_openai_key_names_the_variable_and_sends_nothing() -> None:
    with pytest.raises(ProviderSetupError) as info:
        OpenAIProvider(ProviderSettings(name="openai", model="gpt-4o"))
    assert "OPENAI_API_KEY" in str(info.value)
    assert info.value.exit_code == 10


def test_missing_github_token_sends_no_request(server: ModelServer) -> None:
    settings = ProviderSettings(
        name="openai", model="openai/gpt-4o", base_url=server.url, extra={"preset": "github"}
    )
    with pytest.raises(ProviderSetupError) as info:
        OpenAIProvider(settings)
    assert "GITHUB_TOKEN" in str(info.value)
    assert server.requests == []


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch, server: ModelServer) -> None:
    # A None entry in sys.modules makes `import openai` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ProviderSetupError) as info:
        provider(server)
    assert "pip install 'promptflow-resume[openai]'" in str(info.value)


def test_no_model_is_a_setup_error(server: ModelServer) -> None:
    # Raised when the provider is made (before a run exists), not at the first request.
    with pytest.raises(ProviderSetupError, match="--model"):
        provider(server, model=None)
    assert server.requests == []


@pytest.mark.parametrize(
    ("base_url", "extra", "env", "preset", "url", "key", "key_env"),
    [
        (None, {}, {"OPENAI_API_KEY": "sk-1"}, "openai", OPENAI_URL, "sk-1", "OPENAI_API_KEY"),
        (
            None,
            {},
            {"OPENAI_API_KEY": "sk-1", "OPENAI_BASE_URL": "http://gpu:8000/v1"},
            "custom",
            "http://gpu:8000/v1",
            "sk-1",
            "OPENAI_API_KEY",
        ),
        ("http://localhost:1234/v1", {}, {}, "custom", "http://localhost:1234/v1", NO_KEY, None),
        ("github", {}, {"GITHUB_TOKEN": "ghp"}, "github", GITHUB_MODELS_URL, "ghp", "GITHUB_TOKEN"),
        (None, {"preset": "github"}, {"GITHUB_TOKEN": "g"}, "github", GITHUB_MODELS_URL, "g", None),
        (
            "https://models.github.ai/inference",
            {},
            {"GITHUB_TOKEN": "g"},
            "github",
            GITHUB_MODELS_URL,
            "g",
            "GITHUB_TOKEN",
        ),
        ("ollama", {}, {}, "ollama", OLLAMA_URL, NO_KEY, None),
        (
            None,
            {"preset": "ollama"},
            {"OLLAMA_HOST": "0.0.0.0"},
            "ollama",
            OLLAMA_URL,
            NO_KEY,
            None,
        ),
        (
            None,
            {"preset": "ollama"},
            {"OLLAMA_HOST": "gpu-box:9000"},
            "ollama",
            "http://gpu-box:9000/v1",
            NO_KEY,
            None,
        ),
        (
            "azure",
            {},
            {"AZURE_OPENAI_API_KEY": "az", "AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com"},
            "azure",
            "https://r.openai.azure.com",
            "az",
            "AZURE_OPENAI_API_KEY",
        ),
        (
            "http://gw.local/v1",
            {"api_key_env": "GATEWAY_KEY"},
            {"GATEWAY_KEY": "gk"},
            "custom",
            "http://gw.local/v1",
            "gk",
            "GATEWAY_KEY",
        ),
    ],
)
def test_resolve_endpoint(
    base_url: str | None,
    extra: dict[str, Any],
    env: dict[str, str],
    preset: str,
    url: str,
    key: str,
    key_env: str | None,
) -> None:
    ep = resolve_endpoint(ProviderSettings(name="openai", base_url=base_url, extra=extra), env)
    assert (ep.preset, ep.base_url, ep.api_key) == (preset, url, key)
    if key_env is not None:
        assert ep.key_env == key_env


@pytest.mark.parametrize(
    ("base_url", "extra", "env", "needs"),
    [
        (None, {}, {}, "OPENAI_API_KEY"),
        ("https://api.openai.com/v1", {}, {}, "OPENAI_API_KEY"),
        ("github", {}, {}, "GITHUB_TOKEN"),
        (
            "azure",
            {},
            {"AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com"},
            "AZURE_OPENAI_API_KEY",
        ),
        ("azure", {}, {"AZURE_OPENAI_API_KEY": "k"}, "AZURE_OPENAI_ENDPOINT"),
        ("http://gw/v1", {"api_key_env": "GATEWAY_KEY"}, {}, "GATEWAY_KEY"),
        (None, {"preset": "bedrock"}, {}, "github, ollama, azure"),
    ],
)
def test_setup_errors_say_what_to_set(
    base_url: str | None, extra: dict[str, Any], env: dict[str, str], needs: str
) -> None:
    with pytest.raises(ProviderSetupError) as info:
        resolve_endpoint(ProviderSettings(name="openai", base_url=base_url, extra=extra), env)
    assert needs in str(info.value)


# --- replies ------------------------------------------------------------------------------


def test_plain_reply_with_usage_and_request_body(server: ModelServer) -> None:
    server.push(Canned(body=openai_completion("Hello!", usage=openai_usage(120, 7, cached=64))))
    request = Request(
        messages=(Message("system", "Be brief."), Message("user", "Say hello")),
        params={"temperature": 0.2, "top_p": 0.9},
    )
    reply = provider(server).complete(request)
    assert reply.content == "Hello!"
    assert reply.tool_calls == ()
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (120, 7)
    assert reply.usage.cached_tokens == 64
    assert reply.model == "gpt-4o-2024-08-06"
    assert reply.finish_reason == "stop"

    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {NO_KEY}"
    assert sent.body["model"] == "gpt-4o"
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hello"},
    ]
    assert sent.body["temperature"] == 0.2 and sent.body["top_p"] == 0.9
    assert "stream" not in sent.body and "tools" not in sent.body
    # A self-hosted server gets max_tokens as written (none was given here).
    assert "max_completion_tokens" not in sent.body


def test_key_from_environment_is_sent(server: ModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    server.push(Canned(body=openai_completion("ok")))
    provider(server).complete(ask())
    assert server.requests[0].headers["authorization"] == "Bearer sk-local-test"


def test_request_model_overrides_settings_model(server: ModelServer) -> None:
    server.push(Canned(body=openai_completion("ok")))
    provider(server, model="gpt-4o").complete(ask(model="gpt-4.1-mini"))
    assert server.requests[0].body["model"] == "gpt-4.1-mini"


def test_parallel_tool_calls_and_tool_specs(server: ModelServer) -> None:
    server.push(
        Canned(
            body=openai_completion(
                None,
                [
                    openai_tool_call("call_a", "read_file", '{"path": "a.txt"}'),
                    openai_tool_call("call_b", "read_file", '{"path": "b.txt"}'),
                ],
            )
        )
    )
    reply = provider(server).complete(ask("read both", tools=TOOLS))
    assert reply.content == ""
    assert reply.finish_reason == "tool_calls"
    assert reply.tool_calls == (
        ToolCall("call_a", "read_file", '{"path": "a.txt"}'),
        ToolCall("call_b", "read_file", '{"path": "b.txt"}'),
    )
    tools = server.requests[0].body["tools"]
    assert tools == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file in the workspace",
                "parameters": TOOLS[0].parameters,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "list_dir",
                "description": "List a folder",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


def test_tool_results_and_notes_are_sent_in_order(server: ModelServer) -> None:
    server.push(Canned(body=openai_completion("Both files say hi.")))
    history = (
        Message("system", "You read files."),
        Message("user", "read both"),
        Message(
            "assistant",
            "",
            tool_calls=(
                ToolCall("call_a", "read_file", '{"path": "a.txt"}'),
                ToolCall("call_b", "read_file", '{"path": "b.txt"}'),
            ),
        ),
        Message("tool", "hi from a", tool_call_id="call_a", name="read_file"),
        Message("tool", "no such file", tool_call_id="call_b", name="read_file", is_error=True),
        Message("user", "This run was resumed after an interruption.", note=True),
    )
    reply = provider(server).complete(Request(messages=history, tools=TOOLS))
    assert reply.content == "Both files say hi."
    assert server.requests[0].body["messages"] == [
        {"role": "system", "content": "You read files."},
        {"role": "user", "content": "read both"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "b.txt"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "hi from a"},
        {"role": "tool", "tool_call_id": "call_b", "content": "no such file"},
        {"role": "user", "content": "This run was resumed after an interruption."},
    ]


def test_streaming_text_calls_on_text_with_each_delta(server: ModelServer) -> None:
    server.push(
        Canned(events=openai_stream(["Hel", "lo, ", "world"], usage=openai_usage(30, 3, 16)))
    )
    seen: list[str] = []
    reply = provider(server, stream=True).complete(ask(), on_text=seen.append)
    assert seen == ["Hel", "lo, ", "world"]
    assert reply.content == "Hello, world"
    assert reply.usage.input_tokens == 30 and reply.usage.cached_tokens == 16
    assert reply.usage.output_tokens == 3
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_streaming_assembles_parallel_tool_call_deltas(server: ModelServer) -> None:
    server.push(
        Canned(
            events=openai_stream(
                ["Reading."],
                [
                    ("call_1", "read_file", ['{"pa', 'th": "a', '.txt"}']),
                    ("call_2", "list_dir", []),
                ],
            )
        )
    )
    reply = provider(server, stream=True).complete(ask(tools=TOOLS))
    assert reply.content == "Reading."
    assert reply.tool_calls == (
        ToolCall("call_1", "read_file", '{"path": "a.txt"}'),
        ToolCall("call_2", "list_dir", "{}"),
    )
    assert json.loads(reply.tool_calls[0].arguments) == {"path": "a.txt"}
    assert reply.finish_reason == "tool_calls"


def test_max_tokens_spelling_depends_on_the_endpoint(
    server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.push(Canned(body=openai_completion("ok")), Canned(body=openai_completion("ok")))
    provider(server).complete(ask(params={"max_tokens": 50}))
    assert server.requests[0].body["max_tokens"] == 50

    # Azure (like api.openai.com) wants max_completion_tokens; the deployment is the model.
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key")
    azure = provider(server, base_url=server.url, model="my-gpt4o", extra={"preset": "azure"})
    azure.complete(ask(params={"max_tokens": 50}))
    sent = server.requests[1]
    assert sent.path == "/openai/deployments/my-gpt4o/chat/completions"
    assert sent.query["api-version"] == ["2024-10-21"]
    assert sent.headers["api-key"] == "az-key"
    assert sent.body["max_completion_tokens"] == 50 and "max_tokens" not in sent.body


def test_github_preset_sends_the_token(
    server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_test")
    server.push(Canned(body=openai_completion("ok", model="openai/gpt-4o")))
    p = provider(server, base_url=server.url, model="openai/gpt-4o", extra={"preset": "github"})
    assert p.complete(ask()).model == "openai/gpt-4o"
    assert server.requests[0].headers["authorization"] == "Bearer ghp_test"


# --- transient errors and retries ---------------------------------------------------------


def test_429_with_retry_after_is_honoured(server: ModelServer) -> None:
    server.push(
        Canned(
            status=429,
            body=error_body("Rate limit", type="rate_limit_error"),
            headers={"Retry-After": "7"},
        ),
        Canned(body=openai_completion("finally")),
    )
    sleeps = Sleeps()
    events: list[RetryEvent] = []
    reply = call_with_retry(provider(server), ask(), FAST, sleep=sleeps, on_retry=events.append)
    assert reply.content == "finally"
    assert sleeps.calls == [7.0]
    assert len(events) == 1 and events[0].error.status_code == 429
    assert events[0].error.reason == "rate_limited"
    assert len(server.requests) == 2


def test_retry_after_ms_and_http_date(server: ModelServer) -> None:
    server.push(
        Canned(status=503, body=error_body("busy"), headers={"retry-after-ms": "1250"}),
        Canned(status=503, body=error_body("busy"), headers={"Retry-After": http_date(20)}),
        Canned(body=openai_completion("ok")),
    )
    sleeps = Sleeps()
    call_with_retry(provider(server), ask(), FAST, sleep=sleeps)
    assert sleeps.calls[0] == 1.25
    assert 17 <= sleeps.calls[1] <= 20


def test_500_then_success(server: ModelServer) -> None:
    server.push(
        Canned(status=500, body=error_body("The server had an error")),
        Canned(body=openai_completion("recovered")),
    )
    sleeps = Sleeps()
    reply = call_with_retry(provider(server), ask(), FAST, sleep=sleeps)
    assert reply.content == "recovered"
    assert sleeps.calls == [0.5]


@pytest.mark.parametrize("status", [502, 503, 504, 529])
def test_gateway_and_overload_statuses_are_transient(server: ModelServer, status: int) -> None:
    server.push(Canned(status=status, body=error_body("try later")))
    with pytest.raises(ProviderError) as info:
        provider(server).complete(ask())
    assert info.value.transient and info.value.status_code == status


def test_timeout_is_transient_and_retried(server: ModelServer) -> None:
    server.push(
        Canned(delay=1.5, body=openai_completion("too late")), Canned(body=openai_completion("ok"))
    )
    p = provider(server, timeout=0.3)
    with pytest.raises(ProviderError) as info:
        p.complete(ask())
    assert info.value.transient and info.value.reason == "idle_timeout"
    assert "no answer within 0.3 s (the request was not streamed" in str(info.value)
    assert p.complete(ask()).content == "ok"


def test_dropped_connection_is_transient(server: ModelServer) -> None:
    server.push(Canned(drop="before"), Canned(body=openai_completion("ok")))
    sleeps = Sleeps()
    assert call_with_retry(provider(server), ask(), FAST, sleep=sleeps).content == "ok"
    assert sleeps.calls == [0.5]


def test_stream_cut_midway_is_transient(server: ModelServer) -> None:
    server.push(Canned(events=openai_stream(["Hel", "lo"]), drop="mid", drop_after=2))
    seen: list[str] = []
    with pytest.raises(ProviderError) as info:
        provider(server, stream=True).complete(ask(), on_text=seen.append)
    assert info.value.transient
    assert seen == ["Hel"]


def test_refused_connection_is_transient() -> None:
    with ModelServer() as gone:
        url = gone.url
    p = OpenAIProvider(ProviderSettings(name="openai", model="m", base_url=url, timeout=2))
    with pytest.raises(ProviderError) as info:
        p.complete(ask())
    assert info.value.transient


def test_outage_longer_than_the_policy_ends_as_provider_unavailable(server: ModelServer) -> None:
    server.push(*[Canned(status=503, body=error_body("down for maintenance"))] * 3)
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as info:
        call_with_retry(provider(server), ask(), FAST, sleep=sleeps)
    assert info.value.reason == "provider_unavailable"
    assert "down for maintenance" in str(info.value)
    assert len(server.requests) == 3
    assert sleeps.calls == [0.5, 1.0]


# --- permanent errors ---------------------------------------------------------------------


def test_401_is_permanent_and_names_the_key_variable(
    server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    server.push(
        Canned(
            status=401,
            body=error_body(
                "Incorrect API key provided", type="invalid_request_error", code="invalid_api_key"
            ),
        )
    )
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as info:
        call_with_retry(provider(server), ask(), FAST, sleep=sleeps)
    err = info.value
    assert not err.transient and err.reason == "auth" and err.status_code == 401
    assert "Incorrect API key provided" in str(err)
    assert "OPENAI_API_KEY" in str(err)
    assert "sk-wrong" not in str(err)
    assert sleeps.calls == [] and len(server.requests) == 1


def test_401_from_github_names_github_token(
    server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_expired")
    server.push(Canned(status=401, body=error_body("Bad credentials", type="unauthorized")))
    p = provider(server, base_url=server.url, extra={"preset": "github"})
    with pytest.raises(ProviderError, match="GITHUB_TOKEN"):
        p.complete(ask())


def test_403_is_permanent(server: ModelServer) -> None:
    server.push(Canned(status=403, body=error_body("Project does not have access to model")))
    with pytest.raises(ProviderError) as info:
        provider(server).complete(ask())
    assert not info.value.transient and info.value.reason == "permission"


def test_404_model_not_found(server: ModelServer) -> None:
    server.push(
        Canned(
            status=404,
            body=error_body(
                "The model `gpt-9` does not exist",
                type="invalid_request_error",
                code="model_not_found",
            ),
        )
    )
    with pytest.raises(ProviderError) as info:
        provider(server, model="gpt-9").complete(ask())
    err = info.value
    assert not err.transient and err.reason == "model_not_found"
    assert "`gpt-9`" in str(err) and "--model" in str(err)


def test_context_length_exceeded(server: ModelServer) -> None:
    server.push(
        Canned(
            status=400,
            body=error_body(
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130000 tokens.",
                type="invalid_request_error",
                code="context_length_exceeded",
            ),
        )
    )
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as info:
        call_with_retry(provider(server), ask(), FAST, sleep=sleeps)
    err = info.value
    assert not err.transient and err.reason == "context_length_exceeded"
    assert "128000" in str(err) and "context window" in str(err)
    assert sleeps.calls == []


def test_other_400_is_an_invalid_request(server: ModelServer) -> None:
    server.push(
        Canned(
            status=400,
            body=error_body("Invalid value for 'temperature'", type="invalid_request_error"),
        )
    )
    with pytest.raises(ProviderError) as info:
        provider(server).complete(ask(params={"temperature": 9}))
    assert info.value.reason == "invalid_request" and not info.value.transient
    assert server.requests[0].body["temperature"] == 9


def test_error_event_inside_a_stream(server: ModelServer) -> None:
    events = openai_stream(["partial"])
    events.insert(2, (None, {"error": {"message": "server overloaded", "type": "server_error"}}))
    server.push(Canned(events=events))
    with pytest.raises(ProviderError) as info:
        provider(server, stream=True).complete(ask())
    assert info.value.transient
    assert "server overloaded" in str(info.value)


def test_an_error_in_on_text_is_not_taken_for_a_network_failure(server: ModelServer) -> None:
    server.push(Canned(events=openai_stream(["Hel", "lo"])))

    def broken_pipe(text: str) -> None:
        raise BrokenPipeError("stdout closed")

    with pytest.raises(BrokenPipeError):
        provider(server, stream=True).complete(ask(), on_text=broken_pipe)
