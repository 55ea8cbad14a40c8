"""The ``anthropic`` provider: Claude models through the official ``anthropic`` SDK.

The SDK is imported when the provider is built, never when this module is imported. The key
comes from ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN`` for a bearer token); the base
URL from the settings, else ``ANTHROPIC_BASE_URL``, else the SDK's default::

    provider = AnthropicProvider(ProviderSettings(name="anthropic", model="claude-sonnet-4-5"))
    reply = provider.complete(Request(messages=(Message("user", "hi"),)))

The messages API differs from chat completions in ways this module hides: the system prompt
is a separate field, tool results are ``tool_result`` blocks in a user message, roles must
alternate (consecutive messages of one role are merged), and ``max_tokens`` is required
(``pricing.DEFAULT_MAX_OUTPUT_TOKENS`` when the workflow gives none). The SDK never retries.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..base import collector
from ..base.errors import ProviderError, ProviderSetupError
from ..chat import Message, ToolCall, ToolSpec
from .endpoints import ANTHROPIC_URL, check_base_url
from .generation import Generation, is_timeout
from .pricing import DEFAULT_MAX_OUTPUT_TOKENS
from .provider import ProviderSettings, Reply, ReplyUsage, Request, require_model
from .retry import connection_failure, guard_callback, http_failure
from .sdkcall import call_sdk, map_sdk_error, read_stream


@dataclass(frozen=True)
class Credentials:
    """How requests are authenticated and where they go."""

    base_url: str
    api_key: str | None
    auth_token: str | None
    #: The environment variable the credential came from, for hints.
    key_env: str


def resolve_credentials(
    settings: ProviderSettings, env: Mapping[str, str] | None = None
) -> Credentials:
    """Key and base URL from the settings and the environment; no network.

    Raises ``ProviderSetupError`` naming the variable to set when there is no key.
    """
    env = os.environ if env is None else env
    base_url = (
        (settings.base_url or "").strip()
        or env.get("ANTHROPIC_BASE_URL", "").strip()
        or ANTHROPIC_URL
    )
    check_base_url(base_url, "anthropic")
    override = (settings.extra or {}).get("api_key_env")
    if isinstance(override, str) and override.strip():
        var = override.strip()
        key = env.get(var, "").strip()
        if key:
            return Credentials(base_url, key, None, var)
        raise _missing_key(var)
    key = env.get("ANTHROPIC_API_KEY", "").strip()
    if key:
        return Credentials(base_url, key, None, "ANTHROPIC_API_KEY")
    token = env.get("ANTHROPIC_AUTH_TOKEN", "").strip()
    if token:
        return Credentials(base_url, None, token, "ANTHROPIC_AUTH_TOKEN")
    raise _missing_key("ANTHROPIC_API_KEY")


def _missing_key(var: str) -> ProviderSetupError:
    return ProviderSetupError(
        f"no API key for Anthropic: the environment variable {var} is not set.",
        hint=f"Set {var} to a key from console.anthropic.com and run again; flow reads keys "
        "only from the environment and never writes them to the progress file.",
    )


def import_sdk() -> Any:
    """The ``anthropic`` module, or a setup error naming the extra to install; imported with
    the cycle collector paused, as the ``openai`` one is (``providers/openai.py``)."""
    try:
        with collector.long_lived():
            return importlib.import_module("anthropic")
    except ImportError as exc:
        raise ProviderSetupError(
            "the `anthropic` provider needs the anthropic package, which is not installed.",
            hint="Install it with: pip install 'promptflow-resume[anthropic]'",
        ) from exc


# --- request shape --------------------------------------------------------------------------


def _tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as the object ``tool_use.input`` must be.

    Models sometimes produce arguments that are not a JSON object; the API would reject the
    whole history, so the text is kept under ``_arguments`` instead of being dropped.
    """
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return {"_arguments": arguments}
    return value if isinstance(value, dict) else {"_arguments": value}


def _blocks(message: Message) -> list[dict[str, Any]]:
    """The content blocks of one message (empty text is left out: the API refuses it)."""
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    if message.role == "assistant":
        for call in message.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": _tool_input(call.arguments),
                }
            )
    return blocks


def to_anthropic(messages: Iterable[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """(system prompt, messages) in the messages API shape.

    System messages, wherever they are, join the system prompt in order. Tool results become
    user turns; consecutive turns of one role are merged into one, with tool results first
    in a user turn, as the API requires after a ``tool_use``.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            if m.content:
                system.append(m.content)
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # Stable: tool results keep their order, and so does the rest.
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return ("\n\n".join(system) or None), turns


def to_anthropic_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as messages API ``tools``."""
    return [
        {
            "name": t.name,
            "description": t.description,
            "input_schema": t.parameters or {"type": "object", "properties": {}},
        }
        for t in tools
    ]


def request_params(params: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    """(max_tokens, other body fields) from the workflow's model parameters.

    ``max_completion_tokens`` and ``stop`` are the OpenAI spellings; they are translated so a
    workflow can switch providers without editing its parameters.
    """
    body = {k: v for k, v in params.items() if v is not None}
    max_tokens = DEFAULT_MAX_OUTPUT_TOKENS
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.pop(key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            max_tokens = value
    if "stop" in body and "stop_sequences" not in body:
        stop = body.pop("stop")
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    return max_tokens, body


# --- reply shape ----------------------------------------------------------------------------


def _usage(raw: Any, prior: ReplyUsage | None = None) -> ReplyUsage:
    """Usage in flow's convention: ``input_tokens`` counts cached and cache-written tokens too.

    The messages API reports ``input_tokens`` without the tokens read from or written to the
    prompt cache; those come in their own fields and are added here.
    """
    if raw is None:
        return prior or ReplyUsage()

    def field(name: str) -> int | None:
        value = getattr(raw, name, None)
        return int(value) if value is not None else None

    base = prior or ReplyUsage()
    uncached = field("input_tokens")
    read = field("cache_read_input_tokens")
    written = field("cache_creation_input_tokens")
    output = field("output_tokens")
    if uncached is None and read is None and written is None:
        input_tokens, cached = base.input_tokens, base.cached_tokens
    else:
        input_tokens = (uncached or 0) + (read or 0) + (written or 0)
        cached = read or 0
    return ReplyUsage(
        input_tokens=input_tokens,
        output_tokens=output if output is not None else base.output_tokens,
        cached_tokens=cached,
    )


def _reply_from_message(message: Any, model: str) -> Reply:
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in getattr(message, "content", None) or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            text.append(block.text)
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=block.id,
                    name=block.name,
                    arguments=json.dumps(block.input, ensure_ascii=False),
                )
            )
    return Reply(
        content="".join(text),
        tool_calls=tuple(calls),
        usage=_usage(getattr(message, "usage", None)),
        model=getattr(message, "model", None) or model,
        finish_reason=getattr(message, "stop_reason", None),
    )


class _StreamAssembler:
    """Builds one reply from messages API stream events."""

    def __init__(self, on_text: Callable[[str], None] | None, on_piece: Callable[[], None]) -> None:
        self.on_text = on_text
        self.on_piece = on_piece
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage = ReplyUsage()
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            message = event.message
            self.model = getattr(message, "model", None)
            self.usage = _usage(getattr(message, "usage", None), self.usage)
        elif kind == "content_block_start":
            block = event.content_block
            btype = getattr(block, "type", None)
            entry: dict[str, Any] = {"type": btype, "parts": []}
            if btype == "text":
                initial = getattr(block, "text", "") or ""
                if initial:
                    self._text(entry, initial)
            elif btype == "tool_use":
                entry["id"] = block.id
                entry["name"] = block.name
            self.blocks[event.index] = entry
        elif kind == "content_block_delta":
            entry = self.blocks.setdefault(event.index, {"type": None, "parts": []})
            delta = event.delta
            dtype = getattr(delta, "type", None)
            self.on_piece()
            if dtype == "text_delta":
                self._text(entry, delta.text)
            elif dtype == "input_json_delta":
                entry["parts"].append(delta.partial_json)
        elif kind == "message_delta":
            self.stop_reason = getattr(event.delta, "stop_reason", None) or self.stop_reason
            self.usage = _usage(getattr(event, "usage", None), self.usage)
        elif kind == "message_stop":
            self.stopped = True

    def _text(self, entry: dict[str, Any], piece: str) -> None:
        entry["parts"].append(piece)
        if self.on_text is not None and piece:
            self.on_text(piece)

    def reply(self, model: str) -> Reply:
        text: list[str] = []
        calls: list[ToolCall] = []
        for _, entry in sorted(self.blocks.items()):
            if entry["type"] == "text":
                text.append("".join(entry["parts"]))
            elif entry["type"] == "tool_use":
                arguments = "".join(entry["parts"]).strip() or "{}"
                calls.append(ToolCall(id=entry["id"], name=entry["name"], arguments=arguments))
        return Reply(
            content="".join(text),
            tool_calls=tuple(calls),
            usage=self.usage,
            model=self.model or model,
            finish_reason=self.stop_reason,
        )


# --- the provider ---------------------------------------------------------------------------


def _error_fields(body: Any, fallback: str) -> tuple[str, str | None]:
    """(message, type) from an Anthropic error body ``{"type": "error", "error": {...}}``."""
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        etype = err.get("type")
        return str(err.get("message") or fallback), str(etype) if etype is not None else None
    return fallback, None


class AnthropicProvider:
    """The messages API through the official ``anthropic`` SDK."""

    name = "anthropic"

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        # Checked here, before a run exists, rather than at the first request.
        require_model("anthropic", settings.model)
        self.credentials = resolve_credentials(settings)
        self._sdk = import_sdk()
        creds = self.credentials
        with collector.long_lived():
            self._client = self._sdk.Anthropic(
                api_key=creds.api_key,
                auth_token=creds.auth_token,
                base_url=creds.base_url,
                timeout=settings.timeout,
                max_retries=0,
            )
            # The SDK imports the messages resource on its first use: here, paused too.
            self._client.messages  # noqa: B018

    def _model(self, request: Request) -> str:
        return require_model("anthropic", request.model or self.settings.model)

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        """Send one messages request, streamed unless the settings say not to. The timeout is
        given per call, so the SDK never substitutes its own long-request timeout."""
        model = self._model(request)
        system, messages = to_anthropic(request.messages)
        max_tokens, extra_body = request_params(request.params)
        kwargs: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "messages": messages,
        }
        if system is not None:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = to_anthropic_tools(request.tools)
        if extra_body:
            kwargs["extra_body"] = extra_body

        def attempt() -> Reply:
            settings = self.settings
            generation = Generation.of("Anthropic", settings)
            timed = dict(kwargs, timeout=generation.client_timeout())
            try:
                if not settings.stream:
                    return _reply_from_message(self._client.messages.create(**timed), model)
                stream = self._client.messages.create(stream=True, **timed)
                assembler = _StreamAssembler(guard_callback(on_text), generation.piece)
                read_stream(stream, assembler.feed)
            except Exception as exc:
                if is_timeout(exc):
                    raise generation.timed_out() from exc
                raise
            if not assembler.stopped:
                raise connection_failure(
                    "Anthropic", "the streamed reply ended before it was complete."
                )
            return dataclasses.replace(assembler.reply(model), timing=generation.timing())

        return call_sdk(attempt, lambda exc: self._map_error(exc, model))

    def _map_error(self, exc: Exception, model: str) -> ProviderError | None:
        """The ``ProviderError`` for an SDK or network failure; None for anything else (a bug)."""

        def api_error(exc: Any) -> ProviderError:
            message, etype = _error_fields(exc.body, exc.message)
            if isinstance(exc, self._sdk.APIStatusError):
                # An error event inside a stream arrives on a response whose status was 200.
                status = exc.status_code if exc.status_code >= 400 else None
                return http_failure(
                    provider="Anthropic",
                    status=status,
                    message=message,
                    headers=dict(exc.response.headers),
                    error_type=etype,
                    key_env=self.credentials.key_env,
                    model=model,
                    base_url=self.credentials.base_url,
                    body=exc.body,
                )
            return http_failure(
                provider="Anthropic",
                status=None,
                message=message,
                error_type=etype,
                key_env=self.credentials.key_env,
                model=model,
            )

        return map_sdk_error(
            exc,
            sdk=self._sdk,
            label="Anthropic",
            timeout=self.settings.timeout,
            api_error=api_error,
        )
