"""Timestamps as the progress file writes them: UTC, whole seconds, ``Z`` suffix."""

from __future__ import annotations

from datetime import datetime, timezone


def now_iso() -> str:
    """The current time as ``2026-11-21T23:25:29Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_iso_ms() -> str:
    """The current time with milliseconds, as transcript entries record it
    (``2026-11-21T23:25:29.123Z``; docs/spec.md 2.3)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_iso(text: str) -> datetime:
    """Parse a timestamp written by ``now_iso`` (or any ISO 8601 form with a zone)."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def age(text: str, now: datetime | None = None) -> str:
    """A short human age of a timestamp: ``42s``, ``5m``, ``3h``, ``2d``."""
    seconds = max(0, int(((now or datetime.now(timezone.utc)) - parse_iso(text)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def iso_at(epoch: float) -> str:
    """``epoch`` (seconds, UTC) as ``now_iso`` writes it, rounded up to the whole second so
    a moment to wait for is never written earlier than it is."""
    import math

    # Rounded to the millisecond first: float sums must not push a whole second up.
    moment = datetime.fromtimestamp(math.ceil(round(epoch, 3)), timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
