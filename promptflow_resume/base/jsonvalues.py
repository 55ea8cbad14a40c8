"""What a value read from a file may be: JSON's data model, finite and bounded.

Every format flow reads (progress front matter, journals, batch files, data rows, recordings)
holds JSON values, whatever its syntax. A file from someone else can still spell values JSON
has no room for, and each would break a later step: a NaN cost passes every budget comparison,
an integer of 100,000 hex digits cannot be printed (Python's 4,300-digit limit), and a value
nested 100,000 levels deep exhausts the stack. So the readers refuse them (docs/spec.md 10.5)::

    value = loads_json(line)          # BadJson for NaN, 1e400, 2**64, deep nesting
    problem = first_bad_value(value)  # for values parsed elsewhere: None or (parts, problem)
    excerpt("9" * 5000)                      # '99999999999999999999…(5,000 characters)'

The checks cost an ``isinstance`` per value on walks the readers already make; parsing itself
is untouched (a refused constant or a deep document is found only when it is there).
"""

from __future__ import annotations

import json
from typing import Any

#: Integers in flow's files fit in 64 bits, as in SQLite, Go, Rust and most JSON readers.
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
#: The longest text an integer scalar may have (``-0x8000_0000_0000_0000`` and some padding):
#: checked before converting, so a 100,000-digit number is refused without being built.
MAX_INT_CHARS = 64
#: How deeply lists and mappings may nest (the same limit as YAML, ``yamlio.MAX_DEPTH``).
MAX_DEPTH = 32
#: How much of a hostile value an error message quotes.
EXCERPT_CHARS = 40


class BadJson(ValueError):
    """JSON text holding a value flow refuses: ``problem`` says which, ``parts`` (its field
    path inside the document) and ``column`` (1-based, in the text) say where, when known."""

    def __init__(
        self,
        problem: str,
        *,
        parts: list[Any] | None = None,
        column: int | None = None,
        document: Any = None,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.parts = parts
        #: 1-based, in the text given to ``loads_json`` (which may hold several lines).
        self.line: int | None = None
        self.column = column
        #: The parsed document, when the text parsed and a value in it is refused.
        self.document = document


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` as an error message may quote it: at most ``limit`` characters, then a count."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text):,} characters)"


def field_path(parts: Any) -> str:
    """``$.steps.analyze.status`` / ``$.attempts[0].n`` / ``$.inputs["a key"]``."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.replace("_", "a").replace("-", "a").isalnum():
            out += f".{excerpt(part)}"
        else:
            out += f"[{excerpt(json.dumps(part, ensure_ascii=False))}]"
    return out


class _LongDigits(int):
    """An integer literal too long to convert, kept as its text (only while reporting it)."""

    text = ""


def _long_int(text: str) -> int:
    if len(text) <= MAX_INT_CHARS:
        return int(text)
    value = _LongDigits(INT_MAX)
    value.text = text
    return value


def number_problem(value: Any) -> str | None:
    """Why ``value`` (a number) is refused, or None when it is fine or not a number."""
    kind = type(value)
    if kind is float:
        if value - value == 0.0:  # false exactly for NaN and the infinities
            return None
        shown = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[repr(value)]
        return f"{shown} is not a finite number; numbers in flow's files must be finite"
    if kind is _LongDigits:
        return (
            f"the integer {excerpt(value.text)} is out of range; integers in flow's files lie "
            "between -2^63 and 2^63-1"
        )
    if kind is int and not INT_MIN <= value <= INT_MAX:
        return (
            f"the integer {excerpt(str(value) if value.bit_length() < 4000 else hex(value))} "
            "is out of range; integers in flow's files lie between -2^63 and 2^63-1"
        )
    return None


def first_bad_value(value: Any, max_depth: int = MAX_DEPTH) -> tuple[list[Any], str] | None:
    """The first value inside ``value`` that flow refuses, as (field path parts, problem).

    Refused: a non-finite float, an integer outside 64 bits, and lists or mappings nested more
    than ``max_depth`` levels. Iterative (any depth is safe); the path is built only for a
    document that has such a value, so a good one costs a type test per value.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        kind = type(current)
        if kind is dict or kind is list:
            if depth >= max_depth:
                return _locate(value, max_depth)
            items = current.values() if kind is dict else current
            stack.extend((item, depth + 1) for item in items)
        elif (kind is float or kind is int or kind is _LongDigits) and number_problem(
            current
        ) is not None:
            return _locate(value, max_depth)
    return None


def _locate(value: Any, max_depth: int) -> tuple[list[Any], str]:
    """``first_bad_value``'s slow path: the same walk in document order, with paths."""
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while stack:
        current, parts = stack.pop()
        kind = type(current)
        if kind is dict or kind is list:
            if len(parts) >= max_depth:
                return parts, f"values nest more than {max_depth} levels deep here"
            pairs = list(current.items() if kind is dict else enumerate(current))
            stack.extend((item, [*parts, key]) for key, item in reversed(pairs))
        elif kind is float or kind is int or kind is _LongDigits:
            problem = number_problem(current)
            if problem is not None:
                return parts, problem
    raise AssertionError("first_bad_value found a value _locate does not")  # pragma: no cover


def loads_json(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that refuses what ``first_bad_value`` refuses, ``NaN`` and ``Infinity``
    included, naming the value's field path (and its column, when it is easy to tell).

    Raises ``BadJson`` for a refused value, ``json.JSONDecodeError`` for text that is not JSON.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        # json's scanner recurses in C and stops at the interpreter's limit (about 1,000).
        error = BadJson(f"values nest more than {max_depth} levels deep")
        _place(error, text, _too_deep_at(text, max_depth))
        raise error from None
    except json.JSONDecodeError:
        raise
    except ValueError:
        # int() refuses more than 4,300 decimal digits; read again, keeping such text as it is,
        # to say where it is (only a hostile line takes this path).
        value = json.loads(text, parse_int=_long_int)
    bad = first_bad_value(value, max_depth)
    if bad is None:
        return value
    parts, problem = bad
    error = BadJson(problem, parts=parts, document=value)
    if "finite" in problem:
        found = [at for at in (text.find("NaN"), text.find("Infinity")) if at >= 0]
        _place(error, text, min(found) if found else None)
    raise error


def _place(error: BadJson, text: str, at: int | None) -> None:
    """Set the line and column of ``error`` from the 0-based offset ``at`` in ``text``."""
    if at is None:
        return
    error.line = text.count("\n", 0, at) + 1
    error.column = at - (text.rfind("\n", 0, at) + 1) + 1


def _too_deep_at(text: str, max_depth: int) -> int | None:
    """The 0-based offset where nesting passes ``max_depth`` (strings skipped), if found."""
    depth = 0
    in_string = escaped = False
    for at, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                return at
        elif char in "]}":
            depth -= 1
    return None
