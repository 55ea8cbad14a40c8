"""``python -m promptflow_resume`` runs the ``flow`` command."""

from __future__ import annotations

from .cli import _console_script

_console_script()
