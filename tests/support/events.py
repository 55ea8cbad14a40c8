"""Event streams in tests: read ``--events`` files and check every event against the schema.

The test session collects the events of every ``flow`` it runs: ``tests/conftest.py`` sets
``FLOW_EVENTS`` (the documented variable, docs/spec.md 4.16) to one file for the session, which
the ``flow`` processes of every worker append to, and checks that file at the end.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from . import REPO

SCHEMA = REPO / "schemas" / "events.schema.json"


@cache
def _schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA.read_text(encoding="utf-8")))


@cache
def validator(kind: str | None = None) -> jsonschema.Draft202012Validator:
    """The validator of ``schemas/events.schema.json``; with ``kind``, of that event type
    alone (its messages name the field instead of "not valid under any of the schemas")."""
    schema = _schema()
    if kind is not None and kind in schema["$defs"]:
        schema = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{kind}"}
    return jsonschema.Draft202012Validator(schema)


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of an ``--events`` file, in order (fails on a line that is not JSON)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def problems(lines: list[str], source: str) -> list[str]:
    """What is wrong with each line of an events file: not JSON, or not valid by the schema."""
    found: list[str] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError as error:
            found.append(f"{source}:{number}: not JSON ({error}): {line[:200]}")
            continue
        kind = event.get("type") if isinstance(event, dict) else None
        for error in validator(kind if isinstance(kind, str) else None).iter_errors(event):
            where = "/".join(str(p) for p in error.absolute_path) or "(event)"
            found.append(f"{source}:{number}: {event.get('type')}: {where}: {error.message[:300]}")
    return found


def check_events(path: Path) -> list[dict[str, Any]]:
    """The events of ``path``, asserting each is valid by the schema."""
    lines = path.read_text(encoding="utf-8").splitlines()
    wrong = problems(lines, str(path))
    assert not wrong, "\n".join(wrong)
    return [json.loads(line) for line in lines if line.strip()]
