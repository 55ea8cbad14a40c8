"""Durations as people write them, one grammar for every option and field that takes one.

A duration is a number of seconds, or numbers with units run together: ``250ms``, ``90s``,
``10m``, ``1h30m``, ``2d``, ``1w``. Where a bare number means something other than seconds
the option says so (``flow clean --older-than 7`` is seven days) and passes ``bare_unit``::

    parse_duration("1h30m")                              # 5400.0
    parse_duration("7", bare_unit="d", allow_zero=True)  # 604800.0
    option_seconds("--timeout", "2d")                    # 172800.0, or an InputError
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

from .errors import InputError

#: Seconds per unit.
UNITS: dict[str, float] = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 7 * 86400.0,
}

_NUMBER = r"\d+(?:\.\d+)?"
_PART = re.compile(rf"({_NUMBER})\s*(ms|s|m|h|d|w)", re.IGNORECASE)
_WITH_UNITS = re.compile(rf"^\s*(?:{_NUMBER}\s*(?:ms|s|m|h|d|w)\s*)+$", re.IGNORECASE)
_BARE = re.compile(rf"^\s*{_NUMBER}\s*$")

#: Completes "… must be": the error text of a value that is not a duration.
DURATION_HINT = "a number of seconds or a duration such as 30s, 10m, 1h30m or 2d"


def parse_duration(value: Any, *, bare_unit: str = "s", allow_zero: bool = False) -> float:
    """Seconds in ``value`` (a number, or a string in the grammar above).

    A bare number counts in ``bare_unit``. Raises ``ValueError`` whose message completes the
    sentence "… must be"; callers add the option or the file position.
    """
    hint = DURATION_HINT if bare_unit == "s" else _hint(bare_unit)
    if isinstance(value, bool):
        raise ValueError(hint)
    if isinstance(value, (int, float)):
        seconds = float(value) * UNITS[bare_unit]
    elif isinstance(value, str) and _WITH_UNITS.match(value):
        seconds = sum(float(n) * UNITS[u.lower()] for n, u in _PART.findall(value))
    elif isinstance(value, str) and _BARE.match(value):
        seconds = float(value) * UNITS[bare_unit]
    else:
        raise ValueError(hint)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise ValueError(f"{hint}, greater than zero" if not allow_zero else hint)
    return seconds


def option_seconds(option: str, text: str | None) -> float | None:
    """A command-line duration (``--timeout 10m``) in seconds; None when not given."""
    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as e:
        raise InputError(f"{option} {text!r} is not a duration.", hint=f"Write {e}.") from None


def parse_age(text: str, *, option: str = "--older-than") -> timedelta:
    """An age such as ``30d``, ``12h``, ``2w``, ``0``; a bare number counts days."""
    try:
        seconds = parse_duration(text, bare_unit="d", allow_zero=True)
    except ValueError as e:
        raise InputError(f"{option} {text!r} is not an age.", hint=f"Write {e}.") from None
    return timedelta(seconds=seconds)


def _hint(bare_unit: str) -> str:
    name = {"ms": "milliseconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    return f"a number of {name[bare_unit]} or a duration such as 45s, 90m, 12h, 30d or 2w"
