"""flow's own folder on this machine: what it keeps outside every repository.

The sealing key (``progress/seal.py``) and the person's decisions about folders live here, never
in a repository or a run's folder, so that nothing a clone or a pull request brings can forge
them. The folder is ``$FLOW_HOME`` when set, else ``$XDG_CONFIG_HOME/flow``, else
``~/.config/flow``; machines that must share these decisions (workers of a Ray cluster, a CI
runner with a cache) point ``FLOW_HOME`` at one copy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .errors import FlowError


def flow_home() -> Path:
    """``$FLOW_HOME``, ``$XDG_CONFIG_HOME/flow`` or ``~/.config/flow`` (not made here)."""
    home = os.environ.get("FLOW_HOME")
    if home:
        return Path(home)
    config = os.environ.get("XDG_CONFIG_HOME")
    base = Path(config) if config else Path.home() / ".config"
    return base / "flow"


def not_private(fd: int, path: Path) -> str | None:
    """Why the open file ``fd`` (at ``path``) in flow's folder cannot be trusted as this
    user's own, or None: it belongs to another user, or it or its folder can be written by
    others (anyone who can write it could forge what flow keeps there)."""
    info = os.fstat(fd)
    if info.st_uid != os.getuid():
        return "it belongs to another user"
    if info.st_mode & 0o022:
        return f"others can write it (mode {info.st_mode & 0o777:04o})"
    folder = os.stat(path.parent)
    if folder.st_mode & 0o022:
        return f"others can write its folder {path.parent} (mode {folder.st_mode & 0o777:04o})"
    if folder.st_uid not in (os.getuid(), 0):
        return f"its folder {path.parent} belongs to another user"
    return None


def read_private(
    path: Path, limit: int, *, what: str, problem: Callable[[str], FlowError]
) -> bytes | None:
    """At most ``limit + 1`` bytes of the private file ``path`` in flow's folder, or None when
    it does not exist. A link, a pipe or a device, or a file another user owns or others can
    write (it or its folder: ``not_private``), is refused with ``problem(why)``: whoever could
    plant it could forge what flow keeps there (the seal key, trust, what flow made)."""
    from .errors import SpecialFileError
    from .safeopen import open_regular, read_fd

    try:
        fd = open_regular(path, what=what)
    except FileNotFoundError:
        return None
    except SpecialFileError:
        raise problem("it is not a regular file") from None
    except OSError as error:
        raise problem(f"it cannot be opened ({error.strerror})") from error
    try:
        why = not_private(fd, path)
        if why is not None:
            raise problem(why)
        return read_fd(fd, limit)
    finally:
        os.close(fd)
