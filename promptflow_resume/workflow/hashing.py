"""Content hashes of workflows and steps: ``sha256:v1:<64 lowercase hex>``.

Hashes are taken over a canonical JSON form of what changes a run's behaviour, with text
normalised first (``textnorm.normalize_text``), so that line endings, trailing whitespace, a
BOM, blank-line runs and the order of front-matter keys never change a hash, while any changed
word does. The ``v1`` part
names this recipe: a later recipe gets a new version, and old checkpoints stay comparable.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

HASH_PREFIX = "sha256:v1:"


def digest(payload: Any) -> str:
    """``sha256:v1:`` hash of a JSON-ready value in canonical form (sorted keys, no spaces)."""
    canonical = json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return HASH_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def short_hash(value: str) -> str:
    """The first 12 hex digits of a hash, for display."""
    return value.rsplit(":", 1)[-1][:12]
