"""The ``openai`` provider: OpenAI and every server that speaks its chat completions API.

It runs through the official ``openai`` SDK, imported when the provider is built (never when
this module is imported, so ``flow --help`` stays fast). Where requests go, and which key
they carry, is decided by ``providers.openaiendpoint`` (``docs/spec.md`` section 5)::

    provider = OpenAIProvider(ProviderSettings(name="openai", model="gpt-4o"))
    reply = provider.complete(Request(messages=(Message("user", "hi"),)))

Presets, chosen by ``extra["preset"]`` or by passing the preset's name as the base URL:
``github`` (GitHub Models, key from ``GITHUB_TOKEN``), ``ollama`` (local Ollama, no key),
``azure`` (Azure OpenAI: ``AZURE_OPENAI_API_KEY``, ``AZURE_OPENAI_ENDPOINT``, api version).
Any other base URL (vLLM, LM Studio, llama.cpp's server, a gateway) needs no key;
``OPENAI_API_KEY`` is sent when set. The SDK never retries (``max_retries=0``): retrying is
``providers.retry``'s job, the same for every provider.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import ssl
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies

from ..base import collector
from ..base.errors import ProviderError, ProviderSetupError
from ..chat import Message, ToolCall, ToolSpec
from .generation import Generation, is_timeout
from .openaiendpoint import Endpoint, resolve_endpoint
from .provider import ProviderSettings, Reply, ReplyUsage, Request, require_model
from .retry import connection_failure, guard_callback, http_failure
from .sdkcall import call_sdk, map_sdk_error, read_stream


def import_sdk() -> Any:
    """The ``openai`` module, or a setup error naming the extra to install.

    Imported with the cycle collector paused (``collector.long_lived``): the SDK builds some
    2,600 classes that live as long as the process, and the collections their allocations set
    off (a full one among them) cost about a seventh of the import's time, finding nothing."""
    try:
        with collector.long_lived():
            return importlib.import_module("openai")
    except ImportError as exc:
        raise ProviderSetupError(
            "the `openai` provider needs the openai package, which is not installed.",
            hint="Install it with: pip install 'promptflow-resume[openai]'",
        ) from exc


# --- request shape --------------------------------------------------------------------------


def to_openai_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Provider-neutral messages in the chat completions shape (notes go as user messages)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments or "{}"},
                    }
                    for c in m.tool_calls
                ]
            elif item["content"] is None:
                item["content"] = ""
            out.append(item)
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def to_openai_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as chat completions ``tools``."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]


def request_params(params: Mapping[str, Any], endpoint: Endpoint) -> dict[str, Any]:
    """The workflow's model parameters as request body fields.

    OpenAI's own models reject ``max_tokens`` in favour of ``max_completion_tokens`` (the
    reasoning models do), while self-hosted servers know only ``max_tokens``: translate.
    """
    body = {k: v for k, v in params.items() if v is not None}
    if endpoint.openai_hosted and "max_tokens" in body and "max_completion_tokens" not in body:
        body["max_completion_tokens"] = body.pop("max_tokens")
    return body


# --- reply shape ----------------------------------------------------------------------------


def _arguments_text(value: Any) -> str:
    """Tool-call arguments as JSON text (some servers send an object instead of a string)."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _usage(raw: Any) -> ReplyUsage:
    if raw is None:
        return ReplyUsage()
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return ReplyUsage(
        input_tokens=int(getattr(raw, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
        cached_tokens=int(cached or 0),
    )


class _StreamAssembler:
    """Builds one reply from chat completion chunks: text, tool-call deltas, usage."""

    def __init__(self, on_text: Callable[[str], None] | None, on_piece: Callable[[], None]) -> None:
        self.on_text = on_text
        self.on_piece = on_piece
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: ReplyUsage | None = None
        self.model: str | None = None
        self.finish_reason: str | None = None

    def feed(self, chunk: Any) -> None:
        if getattr(chunk, "model", None):
            self.model = chunk.model
        if getattr(chunk, "usage", None) is not None:
            self.usage = _usage(chunk.usage)
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue
            delta = getattr(choice, "delta", None)
            if delta is not None:
                piece = getattr(delta, "content", None)
                calls = getattr(delta, "tool_calls", None) or ()
                # Reasoning text (llama.cpp, vLLM: ``reasoning_content``) is generated too.
                if piece or calls or getattr(delta, "reasoning_content", None):
                    self.on_piece()
                if piece:
                    self.text.append(piece)
                    if self.on_text is not None:
                        self.on_text(piece)
                for tc in calls:
                    self._tool_delta(tc)
            if getattr(choice, "finish_reason", None):
                self.finish_reason = choice.finish_reason

    def _tool_delta(self, tc: Any) -> None:
        index = getattr(tc, "index", None)
        call_id = getattr(tc, "id", None)
        if index is None:
            # Servers that send whole calls without an index: match by id, else a new call.
            index = next(
                (i for i, c in self.calls.items() if call_id and c["id"] == call_id),
                len(self.calls),
            )
        call = self.calls.setdefault(index, {"id": None, "name": "", "args": []})
        if call_id:
            call["id"] = call_id
        fn = getattr(tc, "function", None)
        if fn is not None:
            if getattr(fn, "name", None):
                call["name"] = fn.name
            args = getattr(fn, "arguments", None)
            if args:
                call["args"].append(_arguments_text(args))

    def reply(self, model: str) -> Reply:
        calls = tuple(
            ToolCall(
                id=c["id"] or f"call_{i}",
                name=c["name"],
                arguments="".join(c["args"]) or "{}",
            )
            for i, c in sorted(self.calls.items())
        )
        return Reply(
            content="".join(self.text),
            tool_calls=calls,
            usage=self.usage or ReplyUsage(),
            model=self.model or model,
            finish_reason=self.finish_reason,
        )


def _reply_from_completion(completion: Any, model: str, label: str) -> Reply:
    choices = getattr(completion, "choices", None) or []
    if not choices:
        raise ProviderError(
            f"{label} returned a reply without choices.",
            reason="bad_response",
            hint="The server's answer is not a chat completion; check the base URL and model.",
        )
    choice = choices[0]
    message = choice.message
    calls = tuple(
        ToolCall(
            id=getattr(tc, "id", None) or f"call_{i}",
            name=tc.function.name,
            arguments=_arguments_text(tc.function.arguments),
        )
        for i, tc in enumerate(getattr(message, "tool_calls", None) or ())
    )
    return Reply(
        content=getattr(message, "content", None) or "",
        tool_calls=calls,
        usage=_usage(getattr(completion, "usage", None)),
        model=getattr(completion, "model", None) or model,
        finish_reason=getattr(choice, "finish_reason", None),
    )


# --- the provider ---------------------------------------------------------------------------


def _positive(value: Any) -> int | None:
    """``value`` when it is a whole number above 0 (a size a server reported), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _error_fields(body: Any, fallback: str) -> tuple[str, str | None, str | None]:
    """(message, type, code) from an OpenAI-style error body."""
    err = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(err, dict):
        message = err.get("message") or fallback
        etype = err.get("type")
        code = err.get("code")
        return (
            str(message),
            str(etype) if etype is not None else None,
            str(code) if code is not None else None,
        )
    if isinstance(err, str) and err:
        return err, None, None
    return fallback, None, None


class _TLSOnFirstUse:
    """The HTTP client's transport for an ``http://`` base URL: ``http://`` requests go through
    a connection pool that never makes a TLS connection, anything else (a redirect to
    ``https://``) through the library's default transport, built at that moment with the
    system's certificates and verifying them as it always does."""

    def __init__(self, http: Any, limits: Any) -> None:
        self._http = http
        self._limits = limits
        # Verification required and no certificate loaded: TLS through it could only fail;
        # no request is ever sent through it but ``http://`` ones.
        no_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._plain = http.HTTPTransport(verify=no_tls, limits=limits)
        self._tls: Any = None

    def handle_request(self, request: Any) -> Any:
        """Send ``request`` through the transport for its scheme."""
        if request.url.scheme == "http":
            return self._plain.handle_request(request)
        if self._tls is None:
            self._tls = self._http.HTTPTransport(limits=self._limits)
        return self._tls.handle_request(request)

    def close(self) -> None:
        """Close both pools."""
        self._plain.close()
        if self._tls is not None:
            self._tls.close()

    def __enter__(self) -> _TLSOnFirstUse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OpenAIProvider:
    """Chat completions through the official ``openai`` SDK."""

    name = "openai"

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        # Checked here, before a run exists, rather than at the first request.
        require_model("openai", settings.model)
        self.endpoint = resolve_endpoint(settings)
        self._sdk = import_sdk()
        with collector.long_lived():
            self._client = self._make_client()
            # The SDK imports the chat resources on their first use; here, with the
            # collector paused, rather than in the first request.
            self._client.chat.completions  # noqa: B018

    def _make_client(self) -> Any:
        ep = self.endpoint
        common: dict[str, Any] = {
            "api_key": ep.api_key,
            "timeout": self.settings.timeout,
            "max_retries": 0,
        }
        if ep.preset == "azure":
            return self._sdk.AzureOpenAI(
                azure_endpoint=ep.base_url, api_version=ep.api_version, **common
            )
        return self._sdk.OpenAI(base_url=ep.base_url, http_client=self._plain_http(), **common)

    def _plain_http(self) -> Any | None:
        """For an ``http://`` base URL with no proxy in the environment: the SDK's default
        HTTP client (``DefaultHttpxClient``, its limits and redirects) whose TLS set-up waits
        for a request to an ``https://`` URL (``_TLSOnFirstUse``). None otherwise: the SDK
        builds its own client, as for every ``https://`` endpoint.

        The SDK's client loads the system's certificate bundle when it is built (about 20 ms
        of a resumed run's path to its first request) even when no request will use TLS.
        A proxy in the environment keeps the SDK's client: giving the client a transport of
        one's own turns the environment's proxies off.
        """
        if urlsplit(self.endpoint.base_url).scheme.lower() != "http":
            return None
        if any(value for scheme, value in getproxies().items() if scheme != "no"):
            return None
        client_class = self._sdk.DefaultHttpxClient
        # The HTTP library the SDK is built on (``httpx``, or ``httpx2`` in later versions).
        http = sys.modules[client_class.__mro__[1].__module__.partition(".")[0]]
        transport = _TLSOnFirstUse(http, self._sdk.DEFAULT_CONNECTION_LIMITS)
        return client_class(
            base_url=self.endpoint.base_url, timeout=self.settings.timeout, transport=transport
        )

    def _model(self, request: Request) -> str:
        return require_model("openai", request.model or self.settings.model)

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        """Send one chat completion request, streamed unless the settings say not to."""
        model = self._model(request)
        body = request_params(request.params, self.endpoint)
        body["messages"] = to_openai_messages(request.messages)
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
        # The body goes in as ``extra_body``, which the SDK sends as is. Passed as ``messages=``
        # it would first be walked against the SDK's typed-dict declarations, which costs
        # about 0.2 ms per message (0.2 s per call at 1,000 messages) on plain JSON like ours.
        kwargs: dict[str, Any] = {"model": model, "messages": [], "extra_body": body}

        def attempt() -> Reply:
            settings = self.settings
            generation = Generation.of(self.endpoint.label, settings)
            timed = dict(kwargs, timeout=generation.client_timeout())
            try:
                if not settings.stream:
                    completion = self._client.chat.completions.create(**timed)
                    return _reply_from_completion(completion, model, self.endpoint.label)
                stream = self._client.chat.completions.create(
                    stream=True, stream_options={"include_usage": True}, **timed
                )
                assembler = _StreamAssembler(guard_callback(on_text), generation.piece)
                read_stream(stream, assembler.feed)
            except Exception as exc:
                if is_timeout(exc):
                    raise generation.timed_out() from exc
                raise
            if assembler.finish_reason is None:
                raise connection_failure(
                    self.endpoint.label,
                    "the streamed reply ended before it was complete.",
                    url=None,
                )
            return dataclasses.replace(assembler.reply(model), timing=generation.timing())

        return call_sdk(attempt, lambda exc: self._map_error(exc, model))

    def context_window(self, model: str | None = None) -> int | None:
        """The context window the server says it serves ``model`` with, in tokens; None
        when it does not say (or is OpenAI's own API or Azure, which say it nowhere).

        llama.cpp's server answers ``GET /props`` (``default_generation_settings.n_ctx``, the
        window it was started with) and names it per model in ``GET /v1/models``
        (``meta.n_ctx``); vLLM gives ``max_model_len`` there. Asked only after a request was
        refused as too long without the window in the refusal; a failure is no answer."""
        if self.endpoint.openai_hosted or self.endpoint.preset == "github":
            return None
        wanted = model or self.settings.model
        base = self.endpoint.base_url.rstrip("/")
        root = base[: -len("/v1")] if base.endswith("/v1") else base
        props = self._get_json(f"{root}/props")
        if isinstance(props, dict):
            settings = props.get("default_generation_settings")
            size = _positive(settings.get("n_ctx") if isinstance(settings, dict) else None)
            if size is not None:
                return size
        listing = self._get_json(f"{base}/models")
        rows = listing.get("data") if isinstance(listing, dict) else None
        for row in rows if isinstance(rows, list) else ():
            if not isinstance(row, dict) or (wanted and row.get("id") not in (wanted, None)):
                continue
            meta = row.get("meta")
            for value in (
                row.get("max_model_len"),
                meta.get("n_ctx") if isinstance(meta, dict) else None,
            ):
                size = _positive(value)
                if size is not None:
                    return size
        return None

    def _get_json(self, url: str) -> Any:
        """``GET url`` through the provider's client (its key, proxies and TLS); the JSON
        answer, or None for any failure."""
        try:
            return self._client.with_options(timeout=10.0).get(url, cast_to=object)
        except Exception:  # a server that has no such page, or none at all: no answer
            return None

    def _map_error(self, exc: Exception, model: str) -> ProviderError | None:
        """The ``ProviderError`` for an SDK or network failure; None for anything else (a bug)."""
        label = self.endpoint.label

        def api_error(exc: Any) -> ProviderError:
            message, etype, code = _error_fields(exc.body, exc.message)
            if isinstance(exc, self._sdk.APIStatusError):
                return http_failure(
                    provider=label,
                    status=exc.status_code,
                    message=message,
                    headers=dict(exc.response.headers),
                    error_type=etype,
                    error_code=code,
                    key_env=self.endpoint.key_env,
                    model=model,
                    base_url=self.endpoint.base_url,
                    body=exc.body,
                )
            # An error event inside a stream: no HTTP status of its own.
            return http_failure(
                provider=label,
                status=None,
                message=message,
                error_type=etype,
                error_code=code,
                key_env=self.endpoint.key_env,
                model=model,
                body=exc.body,
            )

        return map_sdk_error(
            exc, sdk=self._sdk, label=label, timeout=self.settings.timeout, api_error=api_error
        )
