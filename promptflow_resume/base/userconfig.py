"""The person's own settings: ``config.yaml`` in flow's folder (``base.flowhome``).

It lives outside every repository, so nothing a clone brings can change it. One section so
far, ``models:``, names models the way the person's files write them (docs/spec.md 5.6)::

    models:
      Claude Opus 4.7: {provider: anthropic, model: claude-opus-4-7}
      Raptor mini: gpt-5-mini          # a model id; its provider from flow's families

    user_config()["models"]            # {} when the file or the section is absent

A file that is not a YAML mapping is an ``InvalidFileError`` (exit 4) naming it, line and
column; it is read again only when it changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import yamlio
from .errors import InvalidFileError
from .flowhome import flow_home
from .safeopen import read_regular

#: The file's name in flow's folder.
CONFIG_FILE = "config.yaml"
#: The largest configuration read (a few lines are usual).
MAX_CONFIG_BYTES = 256 * 1024

_cache: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}


def config_path() -> Path:
    """Where the person's configuration is (it need not exist)."""
    return flow_home() / CONFIG_FILE


def user_config() -> dict[str, Any]:
    """The configuration as a mapping ({} without the file)."""
    path = config_path()
    try:
        info = os.stat(path)
    except OSError:
        return {}
    stamp = (info.st_mtime_ns, info.st_size)
    cached = _cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    data = read_regular(path, MAX_CONFIG_BYTES, what="flow's configuration", follow=True)
    if data is None:
        return {}
    if len(data) > MAX_CONFIG_BYTES:
        raise InvalidFileError(f"the file is over {MAX_CONFIG_BYTES:,} bytes.", path=path)
    try:
        loaded = yamlio.load(data.decode("utf-8-sig"), path=path)
    except UnicodeDecodeError as error:
        raise InvalidFileError(f"the file is not UTF-8 (byte {error.start}).", path=path) from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise InvalidFileError(
            "flow's configuration must be a YAML mapping (e.g. `models:` at the top).", path=path
        )
    _cache[path] = (stamp, loaded)
    return loaded
