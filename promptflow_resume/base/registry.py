"""Named implementations, imported on first use: the one shape of every registry in flow.

A registry maps a name to ``"module:attribute"``, the object that implements the registry's
Protocol: a provider class, a tool class, a ``flow`` command. Nothing is imported until an
entry is used, so ``flow --help`` loads no provider SDK. flow registers its own entries with
the call a third party uses for theirs, and ``tests/guards/test_layers.py`` checks each
``"module:attribute"`` string against the architecture contracts as an import of the module
that holds the registry:

>>> from promptflow_resume.base.registry import Registry
>>> encoders: Registry[object] = Registry("encoder")
>>> encoders.register("json", "json:dumps")
>>> "json" in encoders, encoders["json"]
(True, 'json:dumps')
>>> encoders.load("json")([1, 2])
'[1, 2]'
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class Registry(Mapping[str, str], Generic[T]):
    """Names → ``"module:attribute"`` targets, in the order they were registered.

    As a mapping it holds the target strings (``name in registry``, ``sorted(registry)``);
    ``load`` imports a target and returns the object, typed as the registry's Protocol ``T``.
    """

    def __init__(self, kind: str) -> None:
        """An empty registry of ``kind`` things (the word its errors use: "provider")."""
        self.kind = kind
        self._targets: dict[str, str] = {}

    def register(self, name: str, target: str) -> None:
        """Add ``name`` → ``target`` (``"package.module:attribute"``); nothing is imported.

        ValueError for a target not in that form, or a name already registered (a second
        registration would silently replace the first one's implementation).
        """
        if not _is_target(target):
            raise ValueError(
                f"the {self.kind} {name!r} names {target!r}; a target is 'package.module:attribute'"
            )
        if name in self._targets:
            raise ValueError(
                f"the {self.kind} {name!r} is already registered as {self._targets[name]!r}"
            )
        self._targets[name] = target

    def load(self, name: str) -> T:
        """The object ``name`` is registered as, its module imported now; KeyError if unknown."""
        module_name, _, attribute = self._targets[name].partition(":")
        return cast(T, getattr(importlib.import_module(module_name), attribute))

    def __getitem__(self, name: str) -> str:
        return self._targets[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self._targets!r})"


def _is_target(target: str) -> bool:
    """``package.module:attribute``: dotted Python names, one colon, one attribute name."""
    module, colon, attribute = target.partition(":")
    return (
        bool(colon) and attribute.isidentifier() and all(map(str.isidentifier, module.split(".")))
    )
