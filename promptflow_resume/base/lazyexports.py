"""Package attributes imported on first use, from a table of names.

A package whose public names live in submodules exports them lazily, so that importing one
light module of it does not load the heavy ones (PEP 562)::

    _EXPORTS = {"load_workflow": "loader", "Workflow": "model"}
    __getattr__ = lazy_exports(__name__, _EXPORTS)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name in ``exports`` is imported from the
    submodule it maps to on first use and then kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        # Into the namespace itself (not setattr): the progress package refuses attributes
        # named like two of its submodules, and the next lookup must not come here again.
        vars(sys.modules[package])[name] = value
        return value

    return __getattr__
