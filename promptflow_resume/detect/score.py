"""Scoring a stored run against a new one: keyword overlap times recency.

``score = jaccard(new, stored) * recency(updated)``; candidates need ``score >= THRESHOLD``,
the best ``MAX_CANDIDATES`` are offered. Pure functions, no I/O::

    >>> jaccard({"api", "auth"}, {"api", "db"})
    0.3333333333333333
    >>> recency_factor(timedelta(days=2))
    0.85
"""

from __future__ import annotations

from collections.abc import Set
from datetime import datetime, timedelta, timezone

#: Scores below this are not offered.
THRESHOLD = 0.35
#: At most this many runs are offered.
MAX_CANDIDATES = 3
#: (age up to, factor): a run updated within a day counts fully, older ones less and less.
RECENCY_BUCKETS: tuple[tuple[timedelta, float], ...] = (
    (timedelta(days=1), 1.00),
    (timedelta(days=3), 0.85),
    (timedelta(days=7), 0.65),
    (timedelta(days=14), 0.40),
)
#: Factor for runs older than the last bucket.
RECENCY_FLOOR = 0.20


def jaccard(new: Set[str], stored: Set[str]) -> float:
    """``|new ∩ stored| / |new ∪ stored|``; 0.0 when both are empty."""
    if not new or not stored:
        return 0.0
    shared = len(new & stored)
    return shared / (len(new) + len(stored) - shared)


def recency_factor(age: timedelta) -> float:
    """The weight of a run last updated ``age`` ago (a future time counts as now)."""
    for limit, factor in RECENCY_BUCKETS:
        if age <= limit:
            return factor
    return RECENCY_FLOOR


def parse_time(text: str | None) -> datetime | None:
    """An aware UTC datetime from an ISO string (``Z`` or offset; naive is taken as UTC)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def score(new: Set[str], stored: Set[str], age: timedelta) -> float:
    """The detector's score of a stored run: keyword overlap times recency."""
    return jaccard(new, stored) * recency_factor(age)
