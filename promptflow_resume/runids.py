"""Run ids: sortable, readable, unique names such as ``20261121-232529-release-notes-3fa2``.

``flow run`` names a run's folder by its id (``.flow/runs/<run-id>/progress.md``); a folder
the user chose with ``--progress`` is never taken for an id, so ids stay unique however many
runs share a folder name such as ``out/``.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone

#: The shape ``new_run_id`` gives.
_GENERATED = re.compile(r"\d{8}-\d{6}-[a-z0-9-]{1,40}-[0-9a-f]{4}")


def slug(text: str) -> str:
    """A run-id-safe slug of ``text`` (lower case letters, digits and dashes)."""
    value = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return value[:40].strip("-") or "run"


def new_run_id(name: str, now: datetime | None = None) -> str:
    """A new id for a run of the workflow called ``name``."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{slug(name)}-{secrets.token_hex(2)}"


def is_generated(text: str) -> bool:
    """True when ``text`` has the shape of an id ``new_run_id`` made."""
    return _GENERATED.fullmatch(text) is not None
