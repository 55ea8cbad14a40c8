"""Words for messages: counted nouns (``1 turn``, ``2 turns``, ``1,024 entries``) and lists
(``a, b or c``)."""

from __future__ import annotations

from collections.abc import Iterable


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it needs (``plural`` defaults to ``singular + "s"``)."""
    noun = singular if n == 1 else (plural or singular + "s")
    return f"{n:,} {noun}"


def either(names: Iterable[str]) -> str:
    """``a, b or c``: the choices as a sentence lists them.

    >>> either(["a"]), either(["a", "b"]), either(["a", "b", "c"])
    ('a', 'a or b', 'a, b or c')
    """
    items = list(names)
    return " or ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])} or {items[-1]}"
