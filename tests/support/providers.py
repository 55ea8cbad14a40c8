"""Helpers shared by the tests of the SDK providers (``openai``, ``anthropic``)."""

from __future__ import annotations

from typing import Any

from promptflow_resume.base.retrypolicy import RetryPolicy
from promptflow_resume.chat import Message
from promptflow_resume.providers.provider import Request

#: Proxy variables the SDKs' HTTP client would obey; cleared so requests reach the local server.
PROXY_ENV_VARS = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
#: Three attempts, the first wait half a second and no jitter: waits a test can predict.
FAST = RetryPolicy(max_attempts=3, initial_delay=0.5, max_delay=30.0, jitter=0)


def ask(text: str = "hi", **kw: Any) -> Request:
    """A request of one user message."""
    return Request(messages=(Message("user", text),), **kw)


class Sleeps:
    """A stand-in for ``time.sleep`` that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
