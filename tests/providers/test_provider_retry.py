"""Retrying transient provider failures: backoff, Retry-After, giving up, deadlines."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptflow_resume.base.errors import ProviderError, QuotaWindowError
from promptflow_resume.base.retrypolicy import RetryPolicy
from promptflow_resume.chat import Message
from promptflow_resume.providers.provider import Reply, Request
from promptflow_resume.providers.retry import (
    REASON_DEADLINE,
    REASON_UNAVAILABLE,
    RetryEvent,
    backoff_delay,
    call_with_retry,
    http_failure,
    is_transport_error,
    parse_rate_limit_reset,
    parse_reset,
    parse_retry_after,
    usage_limit_wait,
)

REQUEST = Request(messages=(Message("user", "hi"),))
NO_JITTER = RetryPolicy(max_attempts=4, initial_delay=1.0, max_delay=10.0, multiplier=2.0, jitter=0)


class Flaky:
    """A provider that raises the queued errors, then answers."""

    name = "flaky"

    def __init__(self, *errors: ProviderError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        if on_text is not None:
            on_text("ok")
        return Reply(content="ok")


def transient(msg: str = "HTTP 503: busy", retry_after: float | None = None) -> ProviderError:
    return ProviderError(msg, transient=True, retry_after=retry_after, status_code=503)


class Recorder:
    """Records sleeps and retry events instead of waiting."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.events: list[RetryEvent] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def on_retry(self, event: RetryEvent) -> None:
        self.events.append(event)


def run(provider: Flaky, policy: RetryPolicy, rec: Recorder, **kw: Any) -> Reply:
    return call_with_retry(provider, REQUEST, policy, sleep=rec.sleep, on_retry=rec.on_retry, **kw)


def test_success_first_time_does_not_sleep() -> None:
    rec = Recorder()
    texts: list[str] = []
    reply = run(Flaky(), NO_JITTER, rec, on_text=texts.append)
    assert reply.content == "ok"
    assert texts == ["ok"]
    assert rec.sleeps == [] and rec.events == []


def test_transient_errors_back_off_exponentially_then_succeed() -> None:
    rec = Recorder()
    provider = Flaky(transient(), transient(), transient())
    assert run(provider, NO_JITTER, rec).content == "ok"
    assert provider.calls == 4
    assert rec.sleeps == [1.0, 2.0, 4.0]
    assert [(e.attempt, e.delay) for e in rec.events] == [(1, 1.0), (2, 2.0), (3, 4.0)]
    assert all(e.error.transient for e in rec.events)


def test_gives_up_after_max_attempts_naming_the_last_error() -> None:
    rec = Recorder()
    last = transient("HTTP 503: still down")
    provider = Flaky(transient(), transient(), transient(), last)
    with pytest.raises(ProviderError) as info:
        run(provider, NO_JITTER, rec)
    err = info.value
    assert provider.calls == 4
    assert err.reason == REASON_UNAVAILABLE
    assert not err.transient
    assert "4 attempts" in str(err) and "still down" in str(err)
    assert err.__cause__ is last
    assert err.status_code == 503
    # No sleep after the last attempt.
    assert len(rec.sleeps) == 3


def test_permanent_error_is_raised_at_once_unchanged() -> None:
    rec = Recorder()
    permanent = ProviderError("HTTP 401: bad key", status_code=401, reason="auth")
    provider = Flaky(transient(), permanent)
    with pytest.raises(ProviderError) as info:
        run(provider, NO_JITTER, rec)
    assert info.value is permanent
    assert provider.calls == 2
    assert rec.sleeps == [1.0]


def test_one_attempt_means_no_retry() -> None:
    rec = Recorder()
    with pytest.raises(ProviderError) as info:
        run(Flaky(transient()), RetryPolicy(max_attempts=1), rec)
    assert info.value.reason == REASON_UNAVAILABLE
    assert "1 attempt)" in str(info.value)
    assert rec.sleeps == []


def test_retry_after_replaces_the_backoff() -> None:
    rec = Recorder()
    provider = Flaky(transient(retry_after=7.5), transient(retry_after=0))
    run(provider, NO_JITTER, rec)
    assert rec.sleeps == [7.5, 0.0]


def test_retry_after_longer_than_max_delay_is_a_quota_window_not_a_sleep() -> None:
    rec = Recorder()
    provider = Flaky(transient("HTTP 429: slow down", retry_after=3600))
    with pytest.raises(QuotaWindowError) as info:
        run(provider, NO_JITTER, rec, wall=lambda: 1_000_000.0)
    # The engine suspends the run until the window opens (docs/spec.md 4.18).
    assert info.value.until == 1_003_600.0
    assert "3600" in str(info.value) and "max_delay" in str(info.value)
    assert rec.sleeps == []
    assert provider.calls == 1


def test_a_named_wait_past_the_deadline_is_a_quota_window() -> None:
    rec = Recorder()
    provider = Flaky(transient(retry_after=5))
    with pytest.raises(QuotaWindowError) as info:
        run(provider, NO_JITTER, rec, deadline=103.0, clock=lambda: 100.0, wall=lambda: 50.0)
    assert info.value.until == 55.0
    assert "time limit" in str(info.value)
    assert rec.sleeps == []


def test_a_window_on_the_last_attempt_still_suspends() -> None:
    policy = RetryPolicy(max_attempts=1, initial_delay=1.0, max_delay=10.0, jitter=0)
    with pytest.raises(QuotaWindowError):
        run(Flaky(transient(retry_after=60)), policy, Recorder())


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("6m0s", 360.0), ("1s", 1.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("17.28s", 17.28)],
)
def test_openai_reset_durations(value: str, seconds: float) -> None:
    assert parse_reset(value, now=0.0) == pytest.approx(seconds)


def test_anthropic_reset_times() -> None:
    now = datetime(2026, 11, 26, 12, 0, 0, tzinfo=timezone.utc).timestamp()
    assert parse_reset("2026-11-26T12:00:42Z", now=now) == 42.0
    assert parse_reset("2026-11-26T11:00:00Z", now=now) == 0.0
    assert parse_reset("soon", now=now) is None


def test_only_exhausted_limits_name_the_wait() -> None:
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-remaining-tokens": "1200",
        "x-ratelimit-reset-tokens": "1h0m0s",
    }
    assert parse_rate_limit_reset(headers, now=0.0) == 360.0
    headers["x-ratelimit-remaining-requests"] = "3"
    assert parse_rate_limit_reset(headers, now=0.0) is None


def test_a_429_with_reset_headers_carries_the_wait() -> None:
    err = http_failure(
        provider="OpenAI",
        status=429,
        message="Rate limit reached",
        headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2m0s"},
        error_type="requests",
        error_code="rate_limit_exceeded",
    )
    assert err.transient and err.retry_after == 120.0
    # Retry-After, when sent, wins over the reset headers.
    err = http_failure(
        provider="Anthropic",
        status=429,
        message="rate limited",
        headers={
            "retry-after": "7",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2099-01-01T00:00:00Z",
        },
        error_type="rate_limit_error",
    )
    assert err.retry_after == 7.0


def test_insufficient_quota_fails_as_billing_without_a_window() -> None:
    err = http_failure(
        provider="OpenAI",
        status=429,
        message="You exceeded your current quota",
        headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"},
        error_type="insufficient_quota",
        error_code="insufficient_quota",
    )
    assert not err.transient and err.reason == "insufficient_quota"


def test_anthropic_usage_limit_names_when_access_returns() -> None:
    now = datetime(2026, 11, 26, 12, 0, 0, tzinfo=timezone.utc).timestamp()
    text = (
        "You have reached your specified API usage limits. You will regain access on "
        "2026-12-01 at 00:00 UTC."
    )
    assert usage_limit_wait(text, now=now) == (4 * 24 + 12) * 3600.0
    err = http_failure(
        provider="Anthropic", status=400, message=text, error_type="invalid_request_error"
    )
    assert err.transient and err.reason == "usage_limit" and err.retry_after is not None
    with pytest.raises(QuotaWindowError):
        run(Flaky(err), NO_JITTER, Recorder())


def test_never_sleeps_past_the_deadline() -> None:
    rec = Recorder()
    now = [100.0]
    provider = Flaky(transient(), transient())
    with pytest.raises(ProviderError) as info:
        run(provider, NO_JITTER, rec, deadline=101.5, clock=lambda: now[0])
    # The first wait (1 s) fits before the deadline, the second (2 s) would not.
    assert rec.sleeps == [1.0]
    assert info.value.reason == REASON_DEADLINE
    assert not info.value.transient
    assert provider.calls == 2


def test_jitter_spreads_delays_within_bounds() -> None:
    policy = RetryPolicy(max_attempts=3, initial_delay=2.0, max_delay=60.0, jitter=0.25)
    low = call_delays(policy, rand=0.0)
    high = call_delays(policy, rand=0.999999)
    assert low == pytest.approx([1.5, 3.0])
    assert high == pytest.approx([2.5, 5.0], rel=1e-5)


def call_delays(policy: RetryPolicy, rand: float) -> list[float]:
    rec = Recorder()
    call_with_retry(
        Flaky(transient(), transient()), REQUEST, policy, sleep=rec.sleep, rand=lambda: rand
    )
    return rec.sleeps


@settings(max_examples=200, deadline=None)
@given(
    attempt=st.integers(min_value=1, max_value=200),
    initial=st.floats(min_value=0, max_value=30),
    multiplier=st.floats(min_value=1, max_value=10),
    max_delay=st.floats(min_value=0, max_value=600),
    jitter=st.floats(min_value=0, max_value=1),
    rand=st.floats(min_value=0, max_value=1, exclude_max=True),
)
def test_backoff_delay_stays_within_policy(
    attempt: int, initial: float, multiplier: float, max_delay: float, jitter: float, rand: float
) -> None:
    policy = RetryPolicy(
        initial_delay=initial, multiplier=multiplier, max_delay=max_delay, jitter=jitter
    )
    delay = backoff_delay(policy, attempt, rand)
    base = min(initial * multiplier ** (attempt - 1), max_delay)
    assert 0 <= delay <= max_delay
    assert delay >= base * (1 - jitter) - 1e-9
    assert delay <= base * (1 + jitter) + 1e-9


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"retry-after": "-4"}, None),
        ({"retry-after": "soon"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str] | None, expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after({"Retry-After": "Tue, 14 Nov 2023 22:13:40 GMT"}, now=now) == 20.0
    # A date in the past means "now".
    assert parse_retry_after({"Retry-After": "Tue, 14 Nov 2023 22:00:00 GMT"}, now=now) == 0.0


@pytest.mark.parametrize(
    ("status", "error_type", "code", "message", "transient", "reason"),
    [
        (429, "rate_limit_error", None, "slow down", True, "rate_limited"),
        (429, "insufficient_quota", "insufficient_quota", "no credit", False, "insufficient_quota"),
        (500, None, None, "oops", True, "provider_transient"),
        (502, None, None, "bad gateway", True, "provider_transient"),
        (503, None, None, "unavailable", True, "provider_transient"),
        (504, None, None, "gateway timeout", True, "provider_transient"),
        (529, "overloaded_error", None, "Overloaded", True, "provider_transient"),
        (None, "overloaded_error", None, "Overloaded", True, "provider_transient"),
        (401, None, None, "bad key", False, "auth"),
        (403, None, None, "forbidden", False, "permission"),
        (404, None, "model_not_found", "no such model", False, "model_not_found"),
        (400, None, "context_length_exceeded", "too long", False, "context_length_exceeded"),
        (
            400,
            "invalid_request_error",
            None,
            "prompt is too long: 9 > 5",
            False,
            "context_length_exceeded",
        ),
        (400, "invalid_request_error", None, "temperature must be <= 2", False, "invalid_request"),
        (501, None, None, "not implemented", False, "provider_error"),
    ],
)
def test_http_failure_classification(
    status: int | None,
    error_type: str | None,
    code: str | None,
    message: str,
    transient: bool,
    reason: str,
) -> None:
    err = http_failure(
        provider="Example",
        status=status,
        message=message,
        error_type=error_type,
        error_code=code,
        key_env="EXAMPLE_KEY",
        model="m-1",
    )
    assert err.transient is transient
    assert err.reason == reason
    assert err.status_code == status
    assert str(err).startswith("Example returned")
    assert message in str(err)
    if not transient:
        assert err.hint, "a permanent error must say how to fix it"


def test_auth_failure_names_the_key_variable_and_404_the_model() -> None:
    auth = http_failure(provider="X", status=401, message="nope", key_env="X_API_KEY")
    assert "X_API_KEY" in str(auth)
    missing = http_failure(provider="X", status=404, message="nope", model="gpt-9")
    assert "gpt-9" in str(missing)


def test_retry_after_header_is_carried_on_transient_errors() -> None:
    err = http_failure(provider="X", status=429, message="wait", headers={"Retry-After": "12"})
    assert err.retry_after == 12.0


def test_is_transport_error() -> None:
    class RemoteProtocolError(Exception):
        pass

    RemoteProtocolError.__module__ = "httpcore._exceptions"
    assert is_transport_error(RemoteProtocolError("cut"))
    assert is_transport_error(ConnectionResetError())
    assert not is_transport_error(ValueError("bug"))
