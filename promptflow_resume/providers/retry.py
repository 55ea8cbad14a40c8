"""Retrying transient provider failures, the same way for every provider.

Providers raise ``ProviderError(transient=True)`` for failures worth retrying (rate limits,
5xx, 529 overloaded, timeouts, dropped connections) and never retry themselves.
``call_with_retry`` retries with exponential backoff and jitter, honours the server's
``Retry-After``, and tells the caller about every retry so it can be shown and counted::

    reply = call_with_retry(
        provider, request, workflow.retry,
        on_retry=lambda ev: print(f"retry {ev.attempt} in {ev.delay:.1f}s: {ev.error}"),
    )

Rules (``docs/spec.md``, section 5):

- ``policy.max_attempts`` counts every call, the first included; ``1`` means no retry.
- The delay before retry *n* is ``initial_delay * multiplier**(n-1)``, spread by
  ``±jitter`` (a fraction) and capped at ``max_delay``.
- A wait named by the server (``Retry-After``, or the reset of an exhausted rate limit:
  OpenAI's ``x-ratelimit-reset-*`` durations, Anthropic's ``anthropic-ratelimit-*-reset``
  times, Anthropic's "regain access on" usage-limit message) replaces the computed delay.
  One longer than ``max_delay``, or one that would pass ``deadline``, is not slept here:
  ``QuotaWindowError`` carries the moment the window opens, and the engine suspends the run
  until then (docs/spec.md 4.18); retrying sooner would only be refused again.
- Out of attempts: ``ProviderError(reason="provider_unavailable")`` naming the last error.
- A timeout is not an identical request forever: one that ends a stream that had stalled is
  retried like any dropped connection, but after ``SILENT_TIMEOUTS`` timeouts in a row in
  which nothing arrived the request is not sent again (``provider_unavailable``, saying so);
  a request past its whole-request limit is never sent again (``ProviderTimeoutError`` with
  ``whole`` set is permanent: the same generation would not finish in time either).
- A computed (backoff) wait that would pass ``deadline`` (a ``time.monotonic()`` value) is not
  started: ``DeadlineError`` (a ``ProviderError``) instead, so the engine can stop the run as
  ``timeout``.
- Permanent errors are re-raised at once, unchanged.

This module also holds what both SDK providers share about HTTP failures: which status codes
are transient, and how to read ``Retry-After``.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from ..base.clock import sleep as clock_sleep
from ..base.clock import wall as clock_wall
from ..base.errors import (
    ContextLengthError,
    DeadlineError,
    ModelUnavailableError,
    ProviderError,
    ProviderTimeoutError,
    QuotaWindowError,
)
from ..base.retrypolicy import RetryPolicy
from .provider import Provider, Reply, Request

#: HTTP statuses retried: request timeout, rate limit, server errors, Anthropic's "overloaded".
TRANSIENT_STATUS: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504, 529})

#: Timeouts in a row with nothing received after which a request is not sent again.
SILENT_TIMEOUTS = 2

#: ``ProviderError.reason`` values this module raises: out of attempts, and a wait past the
#: deadline (``DeadlineError``; callers decide by its class).
REASON_UNAVAILABLE = "provider_unavailable"
REASON_DEADLINE = DeadlineError.REASON


@dataclass(frozen=True)
class RetryEvent:
    """One retry about to happen: the attempt that failed, the wait before the next, why."""

    #: 1-based number of the attempt that just failed.
    attempt: int
    #: Seconds ``call_with_retry`` will sleep before the next attempt.
    delay: float
    error: ProviderError


def backoff_delay(policy: RetryPolicy, attempt: int, rand: float = 0.5) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based).

    ``rand`` in [0, 1) is the jitter draw; ``rand=0.5`` gives the un-jittered delay. The
    result never exceeds ``policy.max_delay`` and is never negative.
    """
    exponent = max(attempt - 1, 0)
    try:
        base = policy.initial_delay * policy.multiplier**exponent
    except OverflowError:
        base = math.inf
    base = min(base, policy.max_delay)
    spread = 1.0 + policy.jitter * (2.0 * rand - 1.0)
    return max(0.0, min(base * spread, policy.max_delay))


def call_with_retry(
    provider: Provider,
    request: Request,
    policy: RetryPolicy,
    *,
    on_text: Callable[[str], None] | None = None,
    on_retry: Callable[[RetryEvent], None] | None = None,
    sleep: Callable[[float], None] = clock_sleep,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    rand: Callable[[], float] = random.random,
    wall: Callable[[], float] = clock_wall,
) -> Reply:
    """Call ``provider.complete`` until it succeeds, a permanent error, or the policy gives up;
    a server-named wait too long for this process raises ``QuotaWindowError``."""
    max_attempts = max(1, policy.max_attempts)
    attempt = 0
    silent = 0  # timeouts in a row in which nothing at all arrived
    while True:
        attempt += 1
        try:
            return provider.complete(request, on_text=on_text)
        except ProviderError as err:
            if not err.transient:
                raise
            last = err
        silent = silent + 1 if isinstance(last, ProviderTimeoutError) and not last.tokens else 0
        if silent >= SILENT_TIMEOUTS:
            # The same request to a server that sent nothing in time, twice: a third try
            # would wait as long again for the same silence.
            raise _unavailable(
                last,
                f"it sent nothing within the timeout {silent} times in a row",
                attempts=attempt,
                hint="Progress is saved. A local model that reads a long prompt slowly needs a "
                "longer --idle-timeout (a request that is not streamed: its whole answer within "
                "it); check that the server is up and not busy, then resume the run.",
            )
        window = _window(last, policy, deadline, clock)
        if window is not None:
            raise QuotaWindowError(
                f"{_describe(last)}; {window}.",
                until=wall() + (last.retry_after or 0.0),
                status_code=last.status_code,
                hint="The run is suspended: `flow resume --wait` continues it when the window "
                "opens.",
            ) from last
        if attempt >= max_attempts:
            raise _unavailable(
                last,
                f"gave up after {attempt} attempt{'s' if attempt != 1 else ''}",
                attempts=attempt,
            )
        if last.retry_after is not None:
            delay = max(0.0, last.retry_after)
        else:
            delay = backoff_delay(policy, attempt, rand())
        if deadline is not None and clock() + delay > deadline:
            raise DeadlineError(
                f"{_describe(last)}; not retried: waiting {delay:.1f} s would pass the run's "
                "time limit.",
                status_code=last.status_code,
                hint="The run can be resumed with a larger time limit.",
            ) from last
        if on_retry is not None:
            on_retry(RetryEvent(attempt=attempt, delay=delay, error=last))
        sleep(delay)


def _window(
    err: ProviderError,
    policy: RetryPolicy,
    deadline: float | None,
    clock: Callable[[], float],
) -> str | None:
    """Why the server-named wait of ``err`` is not slept in this process (None: it is)."""
    wait = err.retry_after
    if wait is None:
        return None
    if wait > policy.max_delay:
        return (
            f"the provider's window opens in {wait:g} s, longer than the retry policy's "
            f"max_delay of {policy.max_delay:g} s"
        )
    if deadline is not None and clock() + wait > deadline:
        return f"the provider's window opens in {wait:g} s, after the run's time limit"
    return None


def _describe(err: ProviderError) -> str:
    """The error's message without a trailing full stop, for embedding in a sentence."""
    return err.message.rstrip().rstrip(".")


def _unavailable(
    last: ProviderError, why: str, *, attempts: int, hint: str | None = None
) -> ProviderError:
    """The error that ends retrying: names the last failure and how to continue."""
    err = ProviderError(
        f"the model provider is unavailable ({why}); last error: {_describe(last)}.",
        transient=False,
        status_code=last.status_code,
        reason=REASON_UNAVAILABLE,
        hint=hint
        or (
            "Progress is saved: resume the run once the provider is reachable again, or raise "
            "`retry.max_attempts` / `retry.max_delay` in the workflow."
        ),
    )
    err.__cause__ = last
    return err


# --- shared by the SDK providers ----------------------------------------------------------


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds the server asks us to wait, from ``retry-after-ms`` or ``retry-after``; else None.

    ``retry-after`` may be a number of seconds or an HTTP date. Header names are matched
    case-insensitively; unparseable or negative values are ignored.
    """
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = -1.0
        if ms >= 0 and math.isfinite(ms):
            return ms / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        import email.utils  # only for the rare date form; it costs ~6 ms to import

        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        current = now if now is not None else clock_wall()
        seconds = when.timestamp() - current
        return max(0.0, seconds)
    if seconds < 0 or not math.isfinite(seconds):
        return None
    return seconds


#: The rate limits whose reset a 429 may name: OpenAI sends ``x-ratelimit-reset-<limit>`` as a
#: duration (``6m0s``, ``1s``, ``20ms``), Anthropic ``anthropic-ratelimit-<limit>-reset`` as an
#: RFC 3339 time; each beside the limit's ``remaining`` count.
_RESET_HEADERS = (
    ("x-ratelimit-reset-requests", "x-ratelimit-remaining-requests"),
    ("x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens"),
    ("anthropic-ratelimit-requests-reset", "anthropic-ratelimit-requests-remaining"),
    ("anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-tokens-remaining"),
    ("anthropic-ratelimit-input-tokens-reset", "anthropic-ratelimit-input-tokens-remaining"),
    ("anthropic-ratelimit-output-tokens-reset", "anthropic-ratelimit-output-tokens-remaining"),
)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
#: Anthropic's spend-limit refusal names the day and time access returns (a 400).
_REGAIN_ACCESS = re.compile(r"regain access on (\d{4}-\d{2}-\d{2}) at (\d{1,2}:\d{2}) UTC")


def parse_reset(value: str, *, now: float) -> float | None:
    """Seconds until a rate limit's reset: a Go-style duration (``1m30s``, ``20ms``) or an
    RFC 3339 time; None when unreadable."""
    text = value.strip()
    parts = _DURATION_PART.findall(text)
    if parts and "".join(n + u for n, u in parts) == text:
        scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        return sum(float(n) * scale[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - now)


def parse_rate_limit_reset(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds until the exhausted rate limits of a 429 reset (the latest of those whose
    ``remaining`` is 0); None when no exhausted limit names its reset."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    current = now if now is not None else clock_wall()
    waits = []
    for reset_key, remaining_key in _RESET_HEADERS:
        raw = lowered.get(reset_key)
        if raw is None or lowered.get(remaining_key, "").strip() != "0":
            continue
        wait = parse_reset(raw, now=current)
        if wait is not None and math.isfinite(wait):
            waits.append(wait)
    return max(waits) if waits else None


def usage_limit_wait(message: str, *, now: float | None = None) -> float | None:
    """Seconds until the moment an Anthropic usage-limit message says access returns."""
    found = _REGAIN_ACCESS.search(message)
    if found is None:
        return None
    try:
        when = datetime.fromisoformat(f"{found.group(1)}T{found.group(2):0>5}:00+00:00")
    except ValueError:
        return None
    return max(0.0, when.timestamp() - (now if now is not None else clock_wall()))


#: Error ``type``/``code`` values in a provider's error body that mean "try again later", even
#: when they arrive inside a stream whose HTTP status was 200.
_TRANSIENT_ERROR_TYPES = frozenset(
    {"overloaded_error", "rate_limit_error", "api_error", "server_error", "rate_limit_exceeded"}
)
#: Phrases providers use for a prompt that does not fit the model's context window: OpenAI's
#: code, llama.cpp's type and words ("exceeds the available context size", "larger than the
#: max context size"; Ollama passes them on), vLLM's "maximum context length", Ollama's "the
#: input length exceeds the context length", Anthropic's "prompt is too long".
_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "exceed_context_size_error",
    "context length",
    "context window",
    "context size",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)
#: Where a refusal names the window: llama.cpp's "available context size (4096 tokens)" and
#: "max context size (4096 tokens)", vLLM's and OpenAI's "maximum context length is 4096
#: tokens".
_WINDOW_IN_TEXT = (
    re.compile(r"context size \((\d+) tokens\)"),
    re.compile(r"maximum context length is (\d+) tokens"),
)


def window_in(text: str, body: object = None) -> int | None:
    """The context window a refusal names, in tokens: llama.cpp's ``n_ctx`` beside its error,
    else a number in the words; None when it names none."""
    err = body.get("error", body) if isinstance(body, dict) else None
    n_ctx = err.get("n_ctx") if isinstance(err, dict) else None
    if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
        return n_ctx
    for pattern in _WINDOW_IN_TEXT:
        found = pattern.search(text)
        if found is not None:
            return int(found.group(1))
    return None


def http_failure(
    *,
    provider: str,
    status: int | None,
    message: str,
    headers: Mapping[str, str] | None = None,
    error_type: str | None = None,
    error_code: str | None = None,
    key_env: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    body: object = None,
) -> ProviderError:
    """Turn a provider's HTTP error response into a ``ProviderError`` with its reason and fix.

    ``provider`` names the service in the message (e.g. ``"OpenAI"``); ``key_env`` is the
    environment variable the key came from, named in the hint for 401/403; ``body`` is the
    error body as parsed (where a server puts details beside the message).
    """
    text = " ".join(message.split()) or "no error message"
    if not text.endswith((".", "!", "?")):
        text += "."
    where = f"HTTP {status}" if status is not None else "an error"
    lead = f"{provider} returned {where}: {text}"
    kinds = {k for k in (error_type, error_code) if k}
    if "insufficient_quota" in kinds:
        # A 429 that waiting does not fix: the account is out of credit.
        return ProviderError(
            lead,
            status_code=status,
            reason="insufficient_quota",
            hint="The account behind the key has no credit or quota left: add credit or raise "
            "the limit with the provider, then resume the run.",
        )
    lowered = f"{text} {' '.join(kinds)}".lower()
    # Ollama has answered a prompt too long for its window with a 500, llama.cpp inside a
    # stream (no status of its own): no retry fixes either.
    if status in (None, 400, 413, 422, 500) and any(m in lowered for m in _CONTEXT_MARKERS):
        return ContextLengthError(
            lead,
            status_code=status,
            window=window_in(text, body),
            hint="The conversation no longer fits the model's context window: choose a model "
            "with a larger window (or start the server with a larger one), shorten the "
            "prompts, or trim long tool results from the transcript in the progress file, "
            "then resume the run.",
        )
    passing = _passing_failure(lead, status, text, kinds, headers)
    if passing is not None:
        return passing
    named = f"`{model}`" if model else "the requested model"
    at = f" at {base_url}" if base_url else ""
    if is_model_refusal(status, text, error_type, error_code, model):
        return ModelUnavailableError(
            lead,
            model=model,
            status_code=status,
            hint=f"The provider{at} does not offer {named} to this key: check the model name "
            "(`model:` in the workflow or --model), the key and the base URL, or list other "
            "models to try in `model:`, then resume the run.",
        )
    return _failure_by_status(lead, status, key_env, named, at)


def _passing_failure(
    lead: str,
    status: int | None,
    text: str,
    kinds: set[str],
    headers: Mapping[str, str] | None,
) -> ProviderError | None:
    """The failure as one that waiting fixes (a rate limit, an overloaded server, a spend
    limit with a known end), with how long to wait where the response says; else None."""
    # The error type decides only where the status does not: inside a stream (no status of
    # its own) or for a 5xx; a 403 labelled "server_error" is still a 403.
    typed_transient = bool(kinds & _TRANSIENT_ERROR_TYPES) and (status is None or status >= 500)
    if typed_transient or (status is not None and status in TRANSIENT_STATUS):
        wait = parse_retry_after(headers)
        if wait is None and status == 429:
            wait = parse_rate_limit_reset(headers)
        return ProviderError(
            lead,
            transient=True,
            retry_after=wait,
            status_code=status,
            reason="rate_limited" if status == 429 else "provider_transient",
        )
    regain = usage_limit_wait(text) if status in (400, 403, 429) else None
    if regain is not None:
        # A spend limit with a known end: a window like a rate limit's, only longer.
        return ProviderError(
            lead,
            transient=True,
            retry_after=regain,
            status_code=status,
            reason="usage_limit",
        )
    return None


def _failure_by_status(
    lead: str, status: int | None, key_env: str | None, named: str, at: str
) -> ProviderError:
    """A failure no retry fixes, its reason and hint chosen by the HTTP status."""
    key_hint = f"`{key_env}`" if key_env else "the API key"
    if status == 401:
        return ProviderError(
            lead,
            status_code=status,
            reason="auth",
            hint=f"The key in {key_hint} was refused: check that it is set, current and "
            "belongs to this endpoint, then resume the run.",
        )
    if status == 403:
        return ProviderError(
            lead,
            status_code=status,
            reason="permission",
            hint=f"The key in {key_hint} has no access to this model or endpoint: use a key "
            "with access or choose another model, then resume the run.",
        )
    if status == 404:
        # A 404 that does not say the model is unknown: most often a wrong base URL path.
        return ProviderError(
            lead,
            status_code=status,
            reason="not_found",
            hint=f"The provider{at} answered 404 to the request for {named} without saying "
            "the model is unknown: check the base URL and the model name, then resume the run.",
        )
    if status is not None and 400 <= status < 500:
        return ProviderError(
            lead,
            status_code=status,
            reason="invalid_request",
            hint="The provider rejected the request: fix the model parameters, tools or "
            "messages it names (in the workflow or the progress file), then resume the run.",
        )
    return ProviderError(
        lead,
        status_code=status,
        reason="provider_error",
        hint="This failure is not one flow retries: check the provider's status and the base "
        "URL, then resume the run.",
    )


def is_model_refusal(
    status: int | None,
    message: str,
    error_type: str | None,
    error_code: str | None,
    model: str | None,
) -> bool:
    """Whether an HTTP error says the requested model does not exist or is not available to
    this key, and nothing else: OpenAI's code ``model_not_found`` (404, or 403 for a project
    without access), Anthropic's 404 ``not_found_error`` about the model (``model: NAME``), or
    another server's 404 whose message names the model it was asked for (vLLM, Ollama: "The
    model `x` does not exist", "model \"x\" not found"). Any other 4xx, a 404 about something
    else and every transient error are not refusals of the model."""
    if status not in (403, 404):
        return False
    if error_code == "model_not_found":
        return True
    if status != 404:
        return False
    lowered = message.lower()
    if error_type == "not_found_error" and lowered.startswith("model:"):
        return True
    if not model:
        return False
    return model.lower() in lowered and any(
        word in lowered for word in ("not found", "does not exist", "unknown model", "not exist")
    )


def connection_failure(provider: str, what: str, *, url: str | None = None) -> ProviderError:
    """A transient error for a timeout or a dropped or refused connection."""
    at = f" at {url}" if url else ""
    return ProviderError(
        f"{provider}{at}: {what}",
        transient=True,
        reason="connection",
        hint="Check the network and the base URL; flow retries this by itself.",
    )


def is_transport_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a network failure raised below the SDK (e.g. a stream cut short).

    The SDKs wrap failures while sending a request, but errors while reading a streamed body
    come straight from the HTTP library (``httpx``/``httpcore`` or their successors), so they
    are recognised by the module that defines them rather than by importing it.
    """
    if isinstance(exc, (OSError, EOFError)):
        return True
    for cls in type(exc).__mro__:
        root = cls.__module__.split(".", 1)[0]
        if root.startswith(("httpx", "httpcore")) or root in ("h11", "h2"):
            return True
    return False


class CallbackFailed(Exception):
    """An exception from the caller's ``on_text``, carried out of a stream unchanged.

    Without the wrapper, an ``OSError`` from printing (a closed pipe) would look like a network
    failure and be retried; the providers unwrap it and re-raise ``original``.
    """

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


def guard_callback(on_text: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """``on_text`` with its exceptions wrapped in ``CallbackFailed``; None stays None."""
    if on_text is None:
        return None
    callback = on_text

    def guarded(text: str) -> None:
        try:
            callback(text)
        except Exception as exc:
            raise CallbackFailed(exc) from exc

    return guarded
