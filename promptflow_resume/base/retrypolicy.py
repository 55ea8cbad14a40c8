"""How transient provider errors are retried: the workflow's ``retry:`` settings as a record.

The record lives in the ground layer because two parts read it: the workflow loader builds it
from ``retry:`` and the providers' retry loop (``providers/retry.py``) follows it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How transient provider errors are retried (the workflow's ``retry:``): exponential backoff
    with jitter."""

    max_attempts: int = 5
    initial_delay: float = 1.0
    max_delay: float = 60.0
    multiplier: float = 2.0
    jitter: float = 0.25
