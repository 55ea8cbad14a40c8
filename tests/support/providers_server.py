"""A local HTTP server that speaks the OpenAI and Anthropic wire protocols, for tests.

It listens on 127.0.0.1 on a free port, in a background thread, and answers each POST with the
next scripted response: a JSON body, a Server-Sent Events stream, an error with headers, a
slow answer (for timeouts) or a dropped connection. Every request it receives is recorded
(path, headers, JSON body) so tests can check exactly what the SDK sent::

    with ModelServer() as server:
        server.push(Canned(body=openai_completion("hello")))
        ...  # point the provider at server.url + "/v1"
        assert server.requests[0].body["messages"][0]["role"] == "system"

Responses use HTTP/1.1 with chunked streams, so a stream cut short is a real protocol error
on the client side, as with a dropped connection in production.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from promptflow_resume.base import clock


@dataclass
class Canned:
    """One scripted response."""

    status: int = 200
    #: JSON body (ignored when ``events`` is given).
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: SSE events as (event name or None, data); dict data is sent as JSON, str as is.
    events: list[tuple[str | None, Any]] | None = None
    #: Seconds to wait before answering.
    delay: float = 0.0
    #: "before": close the connection without answering; "mid": send ``drop_after`` events of
    #: the stream, then close without ending it.
    drop: Literal["before", "mid"] | None = None
    drop_after: int = 1
    #: Seconds between the events of a stream: a model generating at ``1 / pace`` tokens/s.
    #: A whole reply (not streamed) is sent once its pieces would all have been generated.
    pace: float = 0.0
    #: (events sent, seconds): the stream stalls that long after that many events.
    stall: tuple[int, float] | None = None


@dataclass
class Received:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


class ModelServer:
    """The server; use as a context manager, ``push`` responses, read ``requests``."""

    def __init__(self) -> None:
        self._queue: deque[Canned] = deque()
        self._lock = threading.Lock()
        self.requests: list[Received] = []
        #: Answers computed from the request (a server with state of its own, e.g. one that
        #: enforces a context limit); when it returns None the queue answers.
        self.responder: Callable[[Received], Canned | None] | None = None
        #: Models this server does not offer: a request for one is answered with the
        #: provider's own 404 for an unknown model (``model_not_found``), whatever is queued.
        self.unknown_models: set[str] = set()
        #: A closed quota window: until this time (``clock.wall()``, flow's clock), every
        #: request is refused with the provider's own 429 (see ``close_window``).
        self.window_until = 0.0
        #: At most this many requests are refused by the window (None: all until it opens).
        self.window_refusals: int | None = None
        #: A window still to close: its length, and how many requests are answered first.
        self._window_pending: tuple[float, int] | None = None
        #: Requests the window refused so far.
        self.refused = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        # Quiet: a client that gives up mid-answer (timeout tests) is expected here.
        self._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def push(self, *responses: Canned) -> None:
        """Queue responses, answered in order, one per request."""
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        """Responses queued but not yet used."""
        with self._lock:
            return len(self._queue)

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def close_window(self, seconds: float, *, requests: int | None = None, after: int = 0) -> None:
        """Refuse requests with a rate-limit 429 for ``seconds`` (or only the next
        ``requests`` of them), with the headers each provider sends: OpenAI's
        ``x-ratelimit-*`` (a reset duration), Anthropic's ``retry-after`` and
        ``anthropic-ratelimit-*`` (an RFC 3339 reset time). With ``after``, the window closes
        once that many more requests were received, and lasts ``seconds`` from then."""
        with self._lock:
            self.refused = 0
            self.window_refusals = requests
            self._window_pending = (seconds, len(self.requests) + after)

    def _window(self) -> Canned | None:
        """The 429 of a closed quota window for the request just received, else None
        (called under the lock, after the request was recorded)."""
        received = self.requests[-1]
        pending = self._window_pending
        if pending is not None and len(self.requests) > pending[1]:
            self.window_until = clock.wall() + pending[0]
            self._window_pending = None
        left = self.window_until - clock.wall()
        if left <= 0 or (self.window_refusals is not None and self.refused >= self.window_refusals):
            return None
        self.refused += 1
        if received.path.endswith("/messages"):
            return anthropic_rate_limited(left)
        return openai_rate_limited(left)

    def _refusal(self, received: Received) -> Canned | None:
        """The 404 for a request whose model this server does not offer, else None."""
        model = received.body.get("model") if isinstance(received.body, dict) else None
        if not isinstance(model, str) or model not in self.unknown_models:
            return None
        if received.path.endswith("/messages"):
            return anthropic_model_not_found(model)
        return openai_model_not_found(model)

    def _next(self) -> Canned | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body are separate writes: without this, Nagle's algorithm and the
            # client's delayed ACK add about 40 ms to every answer.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                """Keep test output quiet."""

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                parts = urlsplit(self.path)
                received = Received(
                    method=self.command,
                    path=parts.path,
                    query=parse_qs(parts.query),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                with server._lock:
                    server.requests.append(received)
                    canned = server._window() if received.method == "POST" else None
                    canned = canned or server._refusal(received)
                    if canned is None and server.responder is not None:
                        canned = server.responder(received)
                if canned is None:
                    canned = server._next()
                if canned is None:
                    canned = Canned(status=500, body=error_body("no scripted response left"))
                canned = as_asked(canned, received)
                # The client may give up first (a timeout test): nothing left to do then.
                with contextlib.suppress(TimeoutError, BrokenPipeError, ConnectionResetError):
                    self._send(canned)

            def _send(self, canned: Canned) -> None:
                if canned.delay:
                    time.sleep(canned.delay)
                if canned.drop == "before":
                    self._cut()
                    return
                if canned.events is None:
                    payload = json.dumps(canned.body).encode("utf-8")
                    self.send_response(canned.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in canned.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                    self.wfile.flush()
                    return
                self.send_response(canned.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                for header, value in canned.headers.items():
                    self.send_header(header, value)
                self.end_headers()
                for sent, (event, data) in enumerate(canned.events):
                    if canned.drop == "mid" and sent >= canned.drop_after:
                        self._cut()
                        return
                    if canned.pace and sent:
                        time.sleep(canned.pace)
                    if canned.stall is not None and sent == canned.stall[0]:
                        time.sleep(canned.stall[1])
                    self._chunk(sse(event, data))
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _cut(self) -> None:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

        return Handler


def as_asked(canned: Canned, received: Received) -> Canned:
    """``canned`` in the form the request asked for: a whole reply (a chat completion or a
    message) to a request with ``"stream": true`` is sent as the stream a real server sends
    for it, as the same events, one piece of text per event."""
    streamed = isinstance(received.body, dict) and received.body.get("stream") is True
    body = canned.body
    if canned.events is not None or canned.status != 200 or not isinstance(body, dict):
        return canned
    if not streamed:
        if not canned.pace:
            return canned
        # Not streamed: nothing is sent until the whole reply was generated.
        generating = canned.pace * len(_openai_events(body) if "choices" in body else ())
        return dataclasses.replace(canned, delay=canned.delay + generating, pace=0.0)
    if body.get("object") == "chat.completion":
        events = _openai_events(body)
    elif body.get("type") == "message":
        events = _anthropic_events(body)
    else:
        return canned
    return dataclasses.replace(canned, events=events)


def as_stream_bytes(body: dict[str, Any]) -> bytes:
    """A whole chat completion as the Server-Sent Events a server streams for it, in one
    body (for servers of the tests that answer whole, to a request that asked to stream)."""
    return b"".join(sse(event, data) for event, data in _openai_events(body))


def pieces(text: str) -> list[str]:
    """``text`` in the pieces a server streams, about a token each: a word and the space
    after it (joined, the text as it was)."""
    return re.findall(r"\s*\S+\s*?(?=\s|$)|\s+$", text) if text else []


def _openai_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """A whole chat completion as its stream."""
    choice = body["choices"][0]
    message = choice["message"]
    calls = [
        (c["id"], c["function"]["name"], [c["function"]["arguments"]])
        for c in message.get("tool_calls") or ()
    ]
    texts = pieces(message.get("content") or "")
    events = openai_stream(texts, calls, model=body["model"], usage=body.get("usage"))
    finish = choice.get("finish_reason")
    if finish:  # the finish event is the one before the usage and [DONE]
        events[-3] = (None, _chunk(body["model"], {}, finish))
    return events


def _anthropic_events(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """A whole message as its stream."""
    texts = [p for b in body["content"] if b["type"] == "text" for p in pieces(b["text"])]
    uses = [
        (b["id"], b["name"], [json.dumps(b["input"])])
        for b in body["content"]
        if b["type"] == "tool_use"
    ]
    events = anthropic_stream(texts, uses, model=body["model"], usage=body.get("usage"))
    stop = body.get("stop_reason")
    if stop:
        delta = events[-2][1]
        delta["delta"]["stop_reason"] = stop
    return events


def sse(event: str | None, data: Any) -> bytes:
    """One Server-Sent Event as bytes."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def http_date(seconds_from_now: float) -> str:
    """An HTTP date ``seconds_from_now`` in the future, for ``Retry-After``."""
    moment = datetime.fromtimestamp(clock.wall() + seconds_from_now, tz=timezone.utc)
    return email.utils.format_datetime(moment, usegmt=True)


def error_body(message: str, *, type: str = "server_error", code: str | None = None) -> Any:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


# --- OpenAI chat completions ---------------------------------------------------------------


def openai_usage(prompt: int = 10, completion: int = 5, cached: int = 0) -> dict[str, Any]:
    """A ``usage`` object as chat completions report it."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def openai_tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One tool call in a chat completion message."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_completion(
    content: str | None = None,
    tool_calls: Sequence[dict[str, Any]] = (),
    *,
    model: str = "gpt-4o-2024-08-06",
    usage: dict[str, Any] | None = None,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A whole chat completion response body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": usage if usage is not None else openai_usage(),
    }


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def openai_stream(
    texts: Iterable[str] = (),
    tool_calls: Sequence[tuple[str, str, Sequence[str]]] = (),
    *,
    model: str = "gpt-4o-2024-08-06",
    usage: dict[str, Any] | None = None,
) -> list[tuple[str | None, Any]]:
    """SSE events of a streamed chat completion.

    ``tool_calls`` are (id, name, argument fragments): each call's id and name arrive in its
    first delta, its arguments in pieces, as the OpenAI API sends them.
    """
    events: list[tuple[str | None, Any]] = [(None, _chunk(model, {"role": "assistant"}))]
    events += [(None, _chunk(model, {"content": t})) for t in texts]
    for index, (call_id, name, fragments) in enumerate(tool_calls):
        first = {"index": index, "id": call_id, "type": "function"}
        first["function"] = {"name": name, "arguments": ""}
        events.append((None, _chunk(model, {"tool_calls": [first]})))
        for fragment in fragments:
            piece = {"index": index, "function": {"arguments": fragment}}
            events.append((None, _chunk(model, {"tool_calls": [piece]})))
    finish = "tool_calls" if tool_calls else "stop"
    events.append((None, _chunk(model, {}, finish)))
    final = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [],
        "usage": usage if usage is not None else openai_usage(),
    }
    events.append((None, final))
    events.append((None, "[DONE]"))
    return events


# --- Anthropic messages --------------------------------------------------------------------


def anthropic_usage(
    input: int = 10, output: int = 5, cache_read: int = 0, cache_write: int = 0
) -> dict[str, Any]:
    """A ``usage`` object as the messages API reports it (input excludes cache reads)."""
    return {
        "input_tokens": input,
        "output_tokens": output,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
    }


def anthropic_message(
    text: str | None = None,
    tool_uses: Sequence[tuple[str, str, dict[str, Any]]] = (),
    *,
    model: str = "claude-sonnet-4-6",
    usage: dict[str, Any] | None = None,
    stop_reason: str | None = None,
) -> dict[str, Any]:
    """A whole messages API response body; ``tool_uses`` are (id, name, input)."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    for tool_id, name, args in tool_uses:
        content.append({"type": "tool_use", "id": tool_id, "name": name, "input": args})
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": usage if usage is not None else anthropic_usage(),
    }


def anthropic_stream(
    texts: Iterable[str] = (),
    tool_uses: Sequence[tuple[str, str, Sequence[str]]] = (),
    *,
    model: str = "claude-sonnet-4-6",
    usage: dict[str, Any] | None = None,
) -> list[tuple[str | None, Any]]:
    """SSE events of a streamed message; ``tool_uses`` are (id, name, JSON fragments)."""
    full = usage if usage is not None else anthropic_usage()
    start_usage = dict(full, output_tokens=1)
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    index = 0
    text_parts = list(texts)
    if text_parts:
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for part in text_parts:
            delta = {"type": "text_delta", "text": part}
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for tool_id, name, fragments in tool_uses:
        block = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        )
        for fragment in fragments:
            delta = {"type": "input_json_delta", "partial_json": fragment}
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    stop = "tool_use" if tool_uses else "end_turn"
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": full["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_error(message: str, type: str = "api_error") -> dict[str, Any]:
    """An Anthropic error body."""
    return {"type": "error", "error": {"type": type, "message": message}}


def openai_model_not_found(model: str) -> Canned:
    """OpenAI's answer to a model that does not exist or that the key may not use."""
    return Canned(
        status=404,
        body=error_body(
            f"The model `{model}` does not exist or you do not have access to it.",
            type="invalid_request_error",
            code="model_not_found",
        ),
    )


def anthropic_model_not_found(model: str) -> Canned:
    """Anthropic's answer to a model it does not know."""
    body = anthropic_error(f"model: {model}", "not_found_error")
    body["request_id"] = "req_011CUnknownModel000000000"
    return Canned(status=404, body=body)


def go_duration(seconds: float) -> str:
    """``seconds`` the way OpenAI writes a reset: ``20ms``, ``1.5s``, ``6m0s``, ``1h2m3s``."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if minutes or hours:
        text = f"{int(minutes)}m{text}"
    if hours:
        text = f"{int(hours)}h{text}"
    return text


def openai_rate_limited(seconds: float) -> Canned:
    """OpenAI's 429 for an exhausted request limit that resets in ``seconds`` (no
    ``retry-after``: the reset headers say when)."""
    return Canned(
        status=429,
        body=error_body(
            "Rate limit reached for gpt-4o-mini in organization org-test on requests per day "
            f"(RPD): Limit 200, Used 200, Requested 1. Please try again in {go_duration(seconds)}.",
            type="requests",
            code="rate_limit_exceeded",
        ),
        headers={
            "x-ratelimit-limit-requests": "200",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": go_duration(seconds),
            "x-ratelimit-limit-tokens": "200000",
            "x-ratelimit-remaining-tokens": "199980",
            "x-ratelimit-reset-tokens": "6ms",
        },
    )


def openai_insufficient_quota() -> Canned:
    """OpenAI's 429 for an account out of credit: no reset, waiting does not help."""
    return Canned(
        status=429,
        body=error_body(
            "You exceeded your current quota, please check your plan and billing details.",
            type="insufficient_quota",
            code="insufficient_quota",
        ),
    )


def rfc3339(seconds_from_now: float) -> str:
    """A UTC time ``seconds_from_now`` ahead, as Anthropic writes a reset."""
    moment = datetime.fromtimestamp(clock.wall() + seconds_from_now, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def anthropic_rate_limited(seconds: float) -> Canned:
    """Anthropic's 429 ``rate_limit_error``: ``retry-after`` in whole seconds and the
    exhausted limit's reset as an RFC 3339 time."""
    import math

    return Canned(
        status=429,
        body=anthropic_error(
            "This request would exceed the rate limit for your organization of 50 requests "
            "per minute. Please try again later.",
            "rate_limit_error",
        ),
        headers={
            "retry-after": str(max(1, math.ceil(seconds))),
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": rfc3339(seconds),
            "anthropic-ratelimit-tokens-limit": "40000",
            "anthropic-ratelimit-tokens-remaining": "39000",
            "anthropic-ratelimit-tokens-reset": rfc3339(0),
        },
    )


def anthropic_usage_limit(when: datetime) -> Canned:
    """Anthropic's refusal of a workspace past its spend limit: a 400 naming the day and
    minute access returns."""
    stamp = when.astimezone(timezone.utc)
    return Canned(
        status=400,
        body=anthropic_error(
            "You have reached your specified API usage limits. You will regain access on "
            f"{stamp:%Y-%m-%d} at {stamp:%H:%M} UTC.",
            "invalid_request_error",
        ),
    )


# --- local model servers: llama.cpp, Ollama, vLLM ----------------------------------------------
# Their error bodies and the pages that say a model's context window, as each project documents
# them (llama.cpp's tools/server README, vLLM's OpenAI-compatible server, Ollama's API notes).


def llamacpp_context_exceeded(prompt_tokens: int, n_ctx: int) -> Canned:
    """llama.cpp's ``llama-server`` refusing a prompt longer than its window: HTTP 400, type
    ``exceed_context_size_error``, with the counts beside the message."""
    return Canned(
        status=400,
        body={
            "error": {
                "code": 400,
                "message": f"request ({prompt_tokens} tokens) exceeds the available context "
                f"size ({n_ctx} tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt_tokens,
                "n_ctx": n_ctx,
            }
        },
    )


def llamacpp_props(n_ctx: int, model: str = "model.gguf") -> Canned:
    """llama.cpp's ``GET /props``: the window each slot was started with."""
    return Canned(
        body={
            "default_generation_settings": {"n_ctx": n_ctx, "params": {}},
            "total_slots": 1,
            "model_alias": model,
            "model_path": f"/models/{model}",
        }
    )


def ollama_context_exceeded() -> Canned:
    """Ollama's OpenAI-compatible endpoint refusing a prompt longer than its window (with
    truncation off): HTTP 400 with its own words, no numbers."""
    return Canned(
        status=400,
        body=error_body(
            "the input length exceeds the context length", type="invalid_request_error"
        ),
    )


def vllm_context_exceeded(window: int, requested: int) -> Canned:
    """vLLM refusing a request longer than the model's ``max_model_len``: HTTP 400, a
    top-level ``object: error`` body naming both numbers."""
    return Canned(
        status=400,
        body={
            "object": "error",
            "message": f"This model's maximum context length is {window} tokens. However, you "
            f"requested {requested} tokens ({requested - 256} in the messages, 256 in the "
            "completion). Please reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    )


def vllm_models(model: str, max_model_len: int) -> Canned:
    """vLLM's ``GET /v1/models``: each model with its ``max_model_len``."""
    return Canned(
        body={
            "object": "list",
            "data": [
                {
                    "id": model,
                    "object": "model",
                    "created": 1_700_000_000,
                    "owned_by": "vllm",
                    "root": model,
                    "parent": None,
                    "max_model_len": max_model_len,
                }
            ],
        }
    )
