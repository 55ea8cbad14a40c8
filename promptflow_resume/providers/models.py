"""Copilot model display names (``GPT-4.1``, ``Claude Sonnet 4``) → provider and model id.

Prompt files written for VS Code name models as the editor's model picker shows them. The
table ships as ``data/models.json``; a name not in it is a model id already and passes
through unchanged::

    model_id("Claude Sonnet 4 (copilot)")   # ("anthropic", "claude-sonnet-4-0")
    model_id("GPT-5.1-Codex (Preview) (copilot)")  # ("openai", "gpt-5.1-codex")
    model_id("gpt-4o-mini")                 # (None, "gpt-4o-mini")
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from ..base.packagedata import read_text

_SUFFIX = re.compile(r"(?:\s*\((?:copilot|preview)\))+\s*$", re.I)


@lru_cache(maxsize=1)
def _table() -> dict[str, tuple[str, str]]:
    text = read_text("data/models.json")
    models = json.loads(text)["models"]
    return {name.lower(): (provider, model) for name, (provider, model) in models.items()}


def model_id(name: str) -> tuple[str | None, str]:
    """The provider (None when the name is not a display name) and the model id for ``name``."""
    key = _SUFFIX.sub("", name.strip()).lower()
    found = _table().get(key)
    if found is None:
        return None, name
    return found
