"""How one model request is going while it streams: time to first token, tokens, rate, limits.

Every request a provider can stream is streamed (docs/spec.md 5.2), so a timeout means "no
token for N seconds" (the idle timeout, ``ProviderSettings.timeout``), not "the answer took
long"; a limit on the whole request (``ProviderSettings.request_timeout``) is an option. A
provider starts a ``Generation`` per attempt, tells it of each piece of reply that arrives
(text, a tool call's arguments), and turns a timeout into the error this module words::

    generation = Generation("the server at http://localhost:8080/v1", idle=120.0)
    ...
    generation.piece()                   # per delta; raises past the whole-request limit
    ...
    except Exception as exc:
        if is_timeout(exc):
            raise generation.timed_out() from exc
    reply = dataclasses.replace(reply, timing=generation.timing())

A piece is one delta of the stream, which servers send one token at a time (OpenAI, llama.cpp,
vLLM, Ollama); the rate recorded on the entry uses the output tokens the provider reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..base.errors import ProviderTimeoutError
from .provider import ProviderSettings, Timing


class Generation:
    """One attempt's stream, watched: pieces counted, times kept, the whole limit enforced."""

    def __init__(
        self,
        label: str,
        *,
        idle: float,
        whole: float | None = None,
        streamed: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.idle = idle
        self.whole = whole
        self.streamed = streamed
        self._clock = clock
        self.started = clock()
        self.first: float | None = None
        self.last: float | None = None
        self.pieces = 0

    @classmethod
    def of(cls, label: str, settings: ProviderSettings) -> Generation:
        """The generation of one attempt of a provider with ``settings`` (its idle and
        whole-request timeouts, and whether it streams)."""
        return cls(
            label, idle=settings.timeout, whole=settings.request_timeout, streamed=settings.stream
        )

    def client_timeout(self) -> float:
        """The HTTP client's timeout for this request: the idle timeout, or the whole
        request's limit when that is shorter."""
        return min(self.idle, self.whole) if self.whole else self.idle

    def piece(self) -> None:
        """One piece of reply arrived; past the whole-request limit, the request stops."""
        now = self._clock()
        if self.first is None:
            self.first = now
        self.last = now
        self.pieces += 1
        if self.whole is not None and now - self.started > self.whole:
            raise self.timed_out(whole=True)

    def timing(self) -> Timing:
        """What arrived when: for the reply's entry (docs/spec.md 2.3)."""
        end = self._clock()
        first = None if self.first is None else self.first - self.started
        generating = 0.0 if self.first is None else end - self.first
        return Timing(first_token=first, generating=generating, pieces=self.pieces)

    def progress(self) -> str:
        """What had arrived, in words: ``340 tokens in 25.1 s (13.5 tokens/s)``."""
        elapsed = self._clock() - self.started
        if not self.pieces:
            return f"nothing in {elapsed:.1f} s"
        rate = self.timing().rate(self.pieces)
        per = f" ({rate:.1f} tokens/s)" if rate else ""
        return f"{self.pieces} tokens in {elapsed:.1f} s{per}"

    def timed_out(self, *, whole: bool = False) -> ProviderTimeoutError:
        """The error for this request's timeout: no token for the idle timeout, or (``whole``)
        past the whole request's limit."""
        lead = f"{self.label}: "
        # A client timeout at the whole limit (shorter than the idle one) is that limit's.
        whole = whole or (self.whole is not None and self._clock() - self.started >= self.whole)
        if whole:
            return ProviderTimeoutError(
                f"{lead}the request passed its limit of {self.whole:g} s with "
                f"{self.progress()}: the same generation at this speed cannot finish within "
                "the limit, so it is not sent again.",
                tokens=self.pieces,
                whole=True,
                hint="Raise --request-timeout or leave it out (the idle timeout alone still "
                "stops a stream that stalls), ask for a shorter answer (max_tokens), or use a "
                "faster model; then resume the run.",
            )
        if not self.streamed:
            what = (
                f"no answer within {self.client_timeout():g} s (the request was not streamed, "
                "so the whole answer had to arrive within the timeout)"
            )
        elif not self.pieces:
            what = f"no token within {self.idle:g} s of sending the request"
        else:
            what = f"no token for {self.idle:g} s after {self.progress()}"
        return ProviderTimeoutError(
            f"{lead}{what}.",
            tokens=self.pieces,
            whole=False,
            hint="flow retries this by itself; a server that sends nothing twice in a row is "
            "not asked again. A local model reading a long prompt may need a longer "
            "--idle-timeout.",
        )


def is_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` is a timeout of the HTTP layer: the SDKs' ``APITimeoutError``, or a
    read timeout raised while a streamed body is read (``httpx``/``httpcore``'s, or a
    socket's ``TimeoutError``), recognised by name so neither library is imported here."""
    if isinstance(exc, TimeoutError):
        return True
    for cls in type(exc).__mro__:
        root = cls.__module__.split(".", 1)[0]
        if cls.__name__ == "APITimeoutError" or (
            root.startswith(("httpx", "httpcore")) and "Timeout" in cls.__name__
        ):
            return True
    return False
