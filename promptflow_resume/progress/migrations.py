"""Upgrades of older progress files to the current format, applied on read (and so on save).

A file is parsed with the upgrades registered from its version up to ``FORMAT_VERSION``; the
next write saves it in the current format. Version 2 changed how the file is written (message
content as Markdown, one-line records in the front matter) and one default::

    data, body = MIGRATIONS[1](data, body)     # a version 1 front matter and body
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .model import FORMAT_VERSION

#: Upgrades a parsed file of version N to N + 1: ``(front matter, body) -> (front matter, body)``.
Migration = Callable[[dict[str, Any], str], tuple[dict[str, Any], str]]


def v1_to_v2(data: dict[str, Any], body: str) -> tuple[dict[str, Any], str]:
    """Version 1 to 2: a step's missing ``turns`` meant 0; in version 2 it means "as many as
    its ``usage.turns``", so it is written out. The body reads the same in both versions (the
    version 2 reader accepts every form version 1 wrote)."""
    steps = data.get("steps")
    if isinstance(steps, dict):
        data = {
            **data,
            "steps": {
                sid: {**s, "turns": 0} if isinstance(s, dict) and "turns" not in s else s
                for sid, s in steps.items()
            },
        }
    return {**data, "flow_progress": 2}, body


def v2_to_v3(data: dict[str, Any], body: str) -> tuple[dict[str, Any], str]:
    """Version 2 to 3: version 3 adds keys only (``seal``, ``config.permissions``,
    ``in_flight[].server``); a version 2 file has none of them, which reads as "not written
    here", "no permissions recorded" and "no MCP server recorded" (docs/spec.md 2.5)."""
    return {**data, "flow_progress": 3}, body


#: Registered upgrades by the version they upgrade *from*.
MIGRATIONS: dict[int, Migration] = {1: v1_to_v2, 2: v2_to_v3}


def upgrade_front_matter(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a front matter or a journal event's) upgraded to ``FORMAT_VERSION`` when it is
    of an older version this flow can upgrade; otherwise unchanged (validation reports it)."""
    version = data.get("flow_progress")
    while isinstance(version, int) and not isinstance(version, bool) and version in MIGRATIONS:
        if version >= FORMAT_VERSION:
            break
        data, _ = MIGRATIONS[version](data, "")
        version = data.get("flow_progress")
    return data
