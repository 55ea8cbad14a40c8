"""Run ids: sortable, readable, unique names such as ``20261121-232529-release-notes-3fa2``.

``flow run`` names a run's folder by its id (``.flow/runs/<run-id>/progress.md``); a folder
the user chose with ``--progress`` is never taken for an id, so ids stay unique however many
runs share a folder name such as ``out/``.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone
from pathlib import Path

#: The shape ``new_run_id`` gives.
_GENERATED = re.compile(r"\d{8}-\d{6}-[a-z0-9-]{1,40}-[0-9a-f]{4}")
#: What the progress schema accepts as a run id.
_VALID = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")


def valid_run_id(text: object) -> bool:
    """True when ``text`` is a run id the progress schema accepts (lower case letters, digits
    and dashes): safe as one folder's name and in a git ref."""
    return isinstance(text, str) and _VALID.fullmatch(text) is not None


def slug(text: str) -> str:
    """A run-id-safe slug of ``text`` (lower case letters, digits and dashes)."""
    value = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return value[:40].strip("-") or "run"


def new_run_id(name: str, now: datetime | None = None) -> str:
    """A new id for a run of the workflow called ``name``."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{slug(name)}-{secrets.token_hex(2)}"


def id_from_folder(progress: Path) -> str | None:
    """The id a progress file's folder gives its run, if the folder was made for the run.

    That is a folder of the default layout (``.flow/runs/<run-id>/progress.md``), or one named
    with an id ``new_run_id`` made; any other folder (``out/``, ``ci/``) gives none.
    """
    folder = progress.parent
    if _GENERATED.fullmatch(folder.name):
        return folder.name
    runs = folder.parent
    if runs.name == "runs" and runs.parent.name == ".flow" and _VALID.fullmatch(folder.name):
        return folder.name
    return None
