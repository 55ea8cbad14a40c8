"""One SDK call, the same for every provider built on an official SDK (``openai``, ``anthropic``).

Both SDKs share one error tree (``APITimeoutError`` < ``APIConnectionError`` < ``APIError`` >
``APIStatusError``) and both stream by iterating a response that must be closed. What differs,
the request body and how an error body is read, stays in the provider::

    return call_sdk(lambda: send(kwargs), lambda exc: self._map_error(exc, model))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from ..base.errors import ProviderError
from .provider import Reply
from .retry import CallbackFailed, connection_failure, is_transport_error

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class ClosableStream(Iterable[T_co], Protocol):
    """A streamed SDK response: its events, and ``close`` to release the connection."""

    def close(self) -> None:
        """Release the connection."""


def read_stream(stream: ClosableStream[T], feed: Callable[[T], None]) -> None:
    """Feed every event of ``stream`` in order, closing it however the reading ends."""
    try:
        for event in stream:
            feed(event)
    finally:
        stream.close()


def call_sdk(
    attempt: Callable[[], Reply], map_error: Callable[[Exception], ProviderError | None]
) -> Reply:
    """Run ``attempt``; an SDK or network failure becomes the ``ProviderError`` ``map_error`` gives.

    A ``ProviderError`` passes unchanged, an exception from the caller's ``on_text`` propagates
    as itself (it is not the server's fault), and what ``map_error`` does not know is a bug and
    propagates too.
    """
    try:
        return attempt()
    except ProviderError:
        raise
    except CallbackFailed as failed:
        raise failed.original from None
    except Exception as exc:
        mapped = map_error(exc)
        if mapped is None:
            raise
        raise mapped from exc


def map_sdk_error(
    exc: Exception,
    *,
    sdk: Any,
    label: str,
    timeout: float,
    api_error: Callable[[Any], ProviderError],
) -> ProviderError | None:
    """The ``ProviderError`` for a failure of ``sdk``; None for anything else (a bug).

    Timeouts and connection failures read the same for every SDK; ``api_error`` turns the
    server's own error (an ``APIError``, with or without an HTTP status) into one.
    """
    if isinstance(exc, sdk.APITimeoutError):
        return connection_failure(label, f"no answer within {timeout:g} s (request timed out).")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        why = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        return connection_failure(label, f"could not connect or the connection dropped{why}.")
    if isinstance(exc, sdk.APIError):
        return api_error(exc)
    if is_transport_error(exc):
        return connection_failure(
            label, f"the connection dropped while reading the reply ({type(exc).__name__})."
        )
    return None
