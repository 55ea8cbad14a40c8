"""Upgrades of older progress files to the current format, applied on read (and so on save).

A file is parsed with the upgrades registered from its version up to ``FORMAT_VERSION``; the
next write saves it in the current format. Version 2 changed how the file is written (message
content as Markdown, one-line records in the front matter) and one default; version 4 made two
kinds of attempt note fields (``edits``, ``mcp_tools``). Versions 3, 5, 6 and 7 added optional
keys only, and version 8 is the stable format that needs no number for that any more: its
upgrade adds the minor and ``min_flow`` (docs/spec.md 2.5)::

    data, body = MIGRATIONS[1](data, body)     # a version 1 front matter and body
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .versions import FORMAT_VERSION, MIN_FLOW

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


#: Words by which a version 3 note reported a hand edit (resume, reconcile and rewind wrote
#: them). Read here only: from version 4 on, ``attempts[].edits`` says which notes they are.
_V3_EDIT_MARKERS = ("by hand", "hand edit", "hand-edit")
#: How a version 3 note recorded the MCP servers' tool-list hashes.
_V3_MCP_PREFIX = "mcp tools: "
_MCP_HASH = re.compile(r"sha256:[0-9a-f]{16}")


def _v3_edits(notes: list[Any]) -> list[str]:
    """The version 3 notes that reported hand edits (what ``flow log`` matched by words)."""
    return [
        n for n in notes if isinstance(n, str) and any(m in n.lower() for m in _V3_EDIT_MARKERS)
    ]


def _v3_mcp_tools(notes: list[Any]) -> dict[str, str]:
    """The tool-list hashes of the last ``mcp tools: a=sha256:…, b=…`` note (empty: none)."""
    found: dict[str, str] = {}
    for note in notes:
        if not isinstance(note, str) or not note.startswith(_V3_MCP_PREFIX):
            continue
        found = {}
        for item in note[len(_V3_MCP_PREFIX) :].split(", "):
            server, sep, digest = item.rpartition("=")
            if sep and server and _MCP_HASH.fullmatch(digest):
                found[server] = digest
    return found


def v3_to_v4(data: dict[str, Any], body: str) -> tuple[dict[str, Any], str]:
    """Version 3 to 4: two things a version 3 file kept only in attempt notes become fields of
    the attempt. ``edits`` lists the notes that report hand edits (version 3 readers matched
    "by hand", "hand edit" or "hand-edit" in them; this upgrade is the only place that still
    does), and ``mcp_tools`` the servers' tool-list hashes of an ``mcp tools: …`` note. The
    notes stay as they are; the body reads the same."""
    attempts = data.get("attempts")
    if isinstance(attempts, list):
        upgraded: list[Any] = []
        for attempt in attempts:
            notes = attempt.get("notes") if isinstance(attempt, dict) else None
            if not isinstance(notes, list):
                upgraded.append(attempt)
                continue
            # Derived again from the notes even where present (a version 3 journal replayed on
            # an upgraded file): in version 3 the notes were the only record.
            attempt = {k: v for k, v in attempt.items() if k not in ("edits", "mcp_tools")}
            edits = _v3_edits(notes)
            if edits:
                attempt["edits"] = edits
            hashes = _v3_mcp_tools(notes)
            if hashes:
                attempt["mcp_tools"] = hashes
            upgraded.append(attempt)
        data = {**data, "attempts": upgraded}
    return {**data, "flow_progress": 4}, body


def v4_to_v5(data: dict[str, Any], body: str) -> tuple[dict[str, Any], str]:
    """Version 4 to 5: version 5 adds keys only (``config.models``, ``attempts[].model``,
    ``attempts[].refused``: a ``model:`` list and what each attempt did with it); a version 4
    file has none, which reads as a run with one model and attempts that were refused none."""
    return {**data, "flow_progress": 5}, body


def v5_to_v6(data: dict[str, Any], body: str) -> tuple[dict[str, Any], str]:
    """Version 5 to 6: version 6 adds a key only (``config.prices``, prices given with
    ``--price``/``--prices``); a version 5 file has none, which reads as a run priced by the
    table alone."""
    return {**data, "flow_progress": 6}, body


def v6_to_v7(data: dict[str, Any], body: str) -> tuple[dict[str, Any], str]:
    """Version 6 to 7: version 7 adds the keys ``trace`` (the run's trace id, docs/spec.md 13)
    and ``snapshots`` (the working tree after each call that can change files, 12), and the
    entry marker fields ``at``, ``ms``, ``model``, ``answered_by``, ``tokens``, ``cost``,
    ``finish``, ``retries``, ``kind`` and ``server`` (2.3). A version 6 file has none of them:
    its trace id is derived from its run id when it is exported, its spans are timed by its
    steps, and it reads as a run that recorded no file snapshots (rewind and fork then move the
    conversation only)."""
    return {**data, "flow_progress": 7}, body


def v7_to_v8(data: dict[str, Any], body: str) -> tuple[dict[str, Any], str]:
    """Version 7 to 8: the stable format, open to additions (docs/spec.md 2.5). Version 8
    names its minor (``flow_progress_minor: 0``) and the oldest flow that resumes it
    (``min_flow``); it has every key version 7 had. Version 7 was written with four key sets
    (traces alone, file snapshots alone, both, and both with ``attempts[].first_entry``),
    each a part of version 8's, and every key of them optional: any of them reads as it did,
    and the upgrade changes nothing else."""
    return {**data, "flow_progress": 8, "flow_progress_minor": 0, "min_flow": MIN_FLOW}, body


#: Registered upgrades by the version they upgrade *from*.
MIGRATIONS: dict[int, Migration] = {
    1: v1_to_v2,
    2: v2_to_v3,
    3: v3_to_v4,
    4: v4_to_v5,
    5: v5_to_v6,
    6: v6_to_v7,
    7: v7_to_v8,
}


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
