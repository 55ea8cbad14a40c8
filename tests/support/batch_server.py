"""A local OpenAI-compatible server whose answers depend on the request, for batch tests.

Rows of a batch run in parallel processes, so a queue of canned answers (``ModelServer``)
cannot say which row gets which; this server answers each chat completion from the request
itself: ``ok <n>: <first words of the last step prompt>``, where n counts the assistant
messages already in the request. A request whose messages contain ``fail_marker`` gets a
permanent 400 error while ``failing`` is true; ``delay`` slows every answer (to interrupt
rows mid-run), and ``hold(*markers)`` keeps the answers to the requests whose text contains a
marker waiting until ``release()`` (to kill what runs the rows while they wait). Every
request's text is recorded, to check which rows ran. A POST to ``/effect/<name>`` (a command
tool's or a hook's effect, not a model call) is counted by name in ``effects`` when it
arrives, and answered (or held) after: a row held there has its effect done and its call in
flight.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.providers_server import (
    as_stream_bytes,
    error_body,
    openai_completion,
    openai_usage,
)

WORKFLOW = """\
---
name: triage
provider: openai
model: gpt-4o-mini
inputs:
  topic:
    type: string
  count:
    type: integer
    default: 1
---
You triage topics.

## Step 1: Read
Read about ${input:topic} ${input:count} times.

## Step 2: Think
Think about ${input:topic}.

## Step 3: Write
Write a note on ${input:topic}.
"""


class _Server(ThreadingHTTPServer):
    """Quiet about clients that went away (a row's process killed while it waited)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class RowServer:
    """The server; a context manager. ``url`` is the base URL to pass with ``/v1``."""

    def __init__(self, *, delay: float = 0.0, fail_marker: str = "FAIL") -> None:
        self.delay = delay
        self.fail_marker = fail_marker
        self.failing = True
        self.requests: list[str] = []
        #: POSTs to ``/effect/<name>``, counted by name.
        self.effects: dict[str, int] = {}
        #: Answers waiting for ``release()`` right now, and the text of each.
        self.waiting: list[str] = []
        self._held: tuple[str, ...] = ()
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> RowServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._httpd.shutdown()
        self._httpd.server_close()

    def hold(self, *markers: str) -> None:
        """From now on, keep the answer to each request whose text contains one of
        ``markers`` (every request, without any) waiting until ``release()``."""
        self._held = markers or ("",)
        self._open.clear()

    def release(self) -> None:
        """Let the held answers (and every later one) go."""
        self._open.set()

    def _wait(self, text: str) -> None:
        """Hold here while ``text`` is to be held (see ``hold``)."""
        if self._open.is_set() or not any(m in text for m in self._held):
            return
        with self._lock:
            self.waiting.append(text)
        self._open.wait()
        with self._lock:
            self.waiting.remove(text)

    def effect(self, name: str) -> None:
        """Count one effect called ``name``, then answer it (or hold the answer)."""
        with self._lock:
            self.effects[name] = self.effects.get(name, 0) + 1
        self._wait(f"/effect/{name}")

    def sent(self, text: str) -> int:
        """How many requests recorded so far contain ``text``."""
        with self._lock:
            return sum(1 for r in self.requests if text in r)

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        """The status and JSON body for one chat completion request."""
        messages = body.get("messages", [])
        text = json.dumps(messages)
        with self._lock:
            self.requests.append(text)
        # Held answers wait here, so the request counts as sent while the row waits on it.
        self._wait(text)
        if self.delay:
            time.sleep(self.delay)
        if self.failing and self.fail_marker in text:
            return 400, error_body("this row is refused", type="invalid_request_error")
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        # flow's own note on resume is a user message too; quote the step's prompt instead.
        user = [
            m
            for m in messages
            if m.get("role") == "user" and not str(m.get("content")).startswith("Note from flow")
        ]
        last = str(user[-1].get("content") if user else "")
        words = " ".join(last.split()[:6])
        return 200, openai_completion(f"ok {turn}: {words}", usage=openai_usage(100, 20))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.startswith("/effect/"):
                    server.effect(self.path.removeprefix("/effect/"))
                    self.send_response(204)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.loads(raw or b"{}")
                status, payload = server.answer(body)
                streamed = status == 200 and body.get("stream") is True
                data = as_stream_bytes(payload) if streamed else json.dumps(payload).encode()
                self.send_response(status)
                kind = "text/event-stream" if streamed else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def write_case(folder: Path, topics: list[str], workflow: str = WORKFLOW) -> None:
    """``triage.prompt.md`` and ``rows.jsonl`` (one row per topic) in ``folder``."""
    (folder / "triage.prompt.md").write_text(workflow, encoding="utf-8")
    lines = [json.dumps({"topic": t}) for t in topics]
    (folder / "rows.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
