"""A tiny inventory module: the sample project the triage-todos workflow reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Item:
    """One stock item."""

    sku: str
    name: str
    quantity: int
    price_cents: int


def total_value(items: list[Item]) -> int:
    """Stock value in cents."""
    # TODO: items with a negative quantity should be rejected, not counted.
    return sum(item.quantity * item.price_cents for item in items)


def restock(item: Item, amount: int) -> Item:
    """A copy of ``item`` with ``amount`` more units."""
    # TODO: log every restock so that audits can replay them.
    return Item(item.sku, item.name, item.quantity + amount, item.price_cents)


def find(items: list[Item], sku: str) -> Item | None:
    """The item with ``sku``, or None."""
    # TODO: this is a linear scan; index by sku once inventories grow past a few hundred items.
    return next((item for item in items if item.sku == sku), None)
