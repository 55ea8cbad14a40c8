"""Counted nouns for messages: ``1 turn``, ``2 turns``, ``1,024 entries``."""

from __future__ import annotations


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it needs (``plural`` defaults to ``singular + "s"``)."""
    noun = singular if n == 1 else (plural or singular + "s")
    return f"{n:,} {noun}"
