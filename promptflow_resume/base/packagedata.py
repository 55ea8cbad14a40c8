"""The data files shipped inside the package (``data/pricing.json`` ...).

Read through the package's loader (``pkgutil.get_data``), which works wherever the package
was imported from and costs no import: ``importlib.resources`` pulls in zipfile and tempfile
(about 3 ms of every command that reads a table).
"""

from __future__ import annotations

import pkgutil


def read_text(name: str) -> str:
    """The UTF-8 text of the package file ``name`` (a path relative to the package)."""
    data = pkgutil.get_data("promptflow_resume", name)
    if data is None:  # a loader that cannot read files: not one Python ships
        raise FileNotFoundError(f"promptflow_resume/{name}")
    return data.decode("utf-8")
