"""``flow validate`` and ``flow schema``: placeholder registered until the progress library lands."""

from __future__ import annotations
