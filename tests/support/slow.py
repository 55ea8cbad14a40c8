"""Sweeps that run whole by the slow switch and in part by default.

A test parametrized over every crash point, signal timing or seed is one behaviour tried many
ways. The default run keeps the cases named here (one per behaviour at least); ``--slow`` (and
CI) runs them all::

    @pytest.mark.parametrize("point", sweep(crash_points(), keep={"store.fold.renamed"}))
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import pytest


def sweep(values: Iterable[Any], keep: int | Collection[Any] = 1) -> list[Any]:
    """``values`` as parameters; those not kept (the first ``keep`` values, or the values in
    ``keep``) are marked slow."""
    listed = list(values)
    if isinstance(keep, int):
        kept = set(range(keep))
    else:
        kept = {i for i, value in enumerate(listed) if value in keep}
        if len(kept) != len(keep):  # a renamed case must not drop out of the default run
            raise ValueError(f"sweep: kept values missing from the sweep: {keep!r}")
    return [
        value if i in kept else pytest.param(*_args(value), marks=pytest.mark.slow)
        for i, value in enumerate(listed)
    ]


def _args(value: Any) -> tuple[Any, ...]:
    """The arguments of one parameter set: a tuple for several argument names, else one (so a
    single argument that is itself a tuple cannot be swept here: list its cases instead)."""
    return value if isinstance(value, tuple) else (value,)
