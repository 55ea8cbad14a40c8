"""The time as flow reads it and waits for it, and timestamps as the progress file writes
them (UTC, whole seconds, ``Z`` suffix).

Waits that depend on the time of day (a provider's quota window, ``flow resume --wait``) read
``wall()`` and wait with ``sleep()``: the system's clock, unless another ``Clock`` is put in
place for a block, which is how a test or a simulation lets an hour pass at once::

    with using(SteppedClock()):   # sleep() moves this clock on instead of waiting
        resume_run(path, options)
    now_iso()                     # 2026-11-21T23:25:29Z
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone


class Clock:
    """The system's clock: the time of day, a steady clock, and waiting."""

    def time(self) -> float:
        """Seconds since the epoch."""
        return time.time()

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for lengths of time)."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        time.sleep(seconds)


class SteppedClock(Clock):
    """A clock that waits by moving on: ``sleep(s)`` adds ``s`` to both readings at once.

    It starts at the system's time (or ``start``), and otherwise stands still."""

    def __init__(self, start: float | None = None) -> None:
        """Start at ``start`` seconds since the epoch (default: now)."""
        self._now = time.time() if start is None else start
        self._steady = 0.0
        self._lock = threading.Lock()

    def time(self) -> float:
        """The clock's time of day."""
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        """The seconds the clock was moved on since it was made."""
        with self._lock:
            return self._steady

    def sleep(self, seconds: float) -> None:
        """Move the clock on by ``seconds``, without waiting."""
        with self._lock:
            self._now += max(0.0, seconds)
            self._steady += max(0.0, seconds)


_current: Clock = Clock()


def wall() -> float:
    """Seconds since the epoch, on the clock in use."""
    return _current.time()


def monotonic() -> float:
    """The steady clock in use (for waits measured with ``sleep``)."""
    return _current.monotonic()


def ms_since(began: float) -> int:
    """Milliseconds since ``began``, read from ``time.monotonic`` (the process's own steady
    clock, which the times recorded in entries' ``ms`` always come from)."""
    return max(0, round((time.monotonic() - began) * 1000))


def sleep(seconds: float) -> None:
    """Wait ``seconds`` on the clock in use."""
    _current.sleep(seconds)


@contextlib.contextmanager
def using(clock: Clock) -> Iterator[Clock]:
    """Within the block, ``wall``, ``monotonic``, ``sleep`` and the timestamps read ``clock``."""
    global _current
    saved, _current = _current, clock
    try:
        yield clock
    finally:
        _current = saved


def _now() -> datetime:
    return datetime.fromtimestamp(_current.time(), timezone.utc)


def now_iso() -> str:
    """The current time as ``2026-11-21T23:25:29Z``."""
    return _now().strftime("%Y-%m-%dT%H:%M:%SZ")


def now_iso_ms() -> str:
    """The current time with milliseconds, as transcript entries record it
    (``2026-11-21T23:25:29.123Z``; docs/spec.md 2.3)."""
    return _now().strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_iso(text: str) -> datetime:
    """Parse a timestamp written by ``now_iso`` (or any ISO 8601 form with a zone)."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def age(text: str, now: datetime | None = None) -> str:
    """A short human age of a timestamp: ``42s``, ``5m``, ``3h``, ``2d``."""
    seconds = max(0, int(((now or _now()) - parse_iso(text)).total_seconds()))
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
