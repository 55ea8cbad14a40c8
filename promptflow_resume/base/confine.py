"""Where a path from a file or a model may lead: inside a root folder, never through a link out.

Paths arrive from people (a command line), from models (a tool's arguments) and from files
someone else wrote (a progress file's worktree, a hooks file's ``cwd``, an MCP server's
``envFile``, a link committed in a repository). Two rules, one for each use, both here so that
every command applies the same one:

- **Reading** (``confine``): what counts is where the path really leads, every symbolic link
  followed: a link inside the root that points inside it is fine, one that leads out is not.
- **Writing or removing** (``no_link_on_the_way``): git's "beyond a symbolic link" rule. Nothing
  is created, written or removed below a path component that is a symbolic link, wherever the
  link points, because the link may change between the check and the use, and because a
  removal through a link deletes what the link points at::

      confine(workspace, "src/main.py")          # the real path, or PathEscapeError
      no_link_on_the_way(repo, "a/b/file.txt")   # repo/a/b/file.txt, or PathEscapeError

Names from a file that become one folder's name (a run id in ``<git dir>/flow/<run-id>``, a
worktree's ``.flow/worktrees/<name>``) pass ``plain_name``; paths read from a git tree that
flow would write into a work tree pass ``tree_path`` (git's own rule: no ``.git`` part).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath


class PathEscapeError(ValueError):
    """A path leaves its root folder (or passes a link on the way); the message says how."""


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or below it (both taken as given, not resolved)."""
    return path == root or root in path.parents


def confine(root: Path, path: str) -> Path:
    """``path`` (relative to ``root``, or absolute inside it) resolved, or PathEscapeError.

    What counts is where the path really leads (every symbolic link followed); the returned
    path is that real location, so the file checked is the file then opened.
    """
    if "\x00" in path:
        raise PathEscapeError("the path contains a NUL character")
    root_abs = Path(os.path.abspath(root))
    candidate = Path(os.path.normpath(root_abs / path))
    resolved = Path(os.path.realpath(candidate))
    if is_within(resolved, Path(os.path.realpath(root_abs))):
        return resolved
    if not is_within(candidate, root_abs):
        raise PathEscapeError(
            f"'{path}' is outside the workspace; use a path relative to the workspace root "
            "(e.g. 'src/main.py')"
        )
    raise PathEscapeError(
        f"'{path}' leads outside the workspace through a symbolic link; only files inside "
        "the workspace can be used"
    )


#: git's own folder: it holds a checkout's credentials (``actions/checkout`` keeps its token in
#: ``.git/config``), never a file a repository brings.
GIT_FOLDER = ".git"


def leads_inside(root: Path, path: Path) -> bool:
    """True when ``path``, every link on it followed, ends inside ``root`` (also resolved)
    and outside its ``.git`` folder: what a repository brings is read only when this holds."""
    real, base = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    return is_within(real, base) and GIT_FOLDER not in real.relative_to(base).parts


def relative_name(path: Path, root: Path) -> str:
    """``path`` relative to the workspace root, with ``/`` separators ("." for the root)."""
    rel = os.path.relpath(path, os.path.realpath(root))
    return "." if rel == "." else rel.replace(os.sep, "/")


def plain_relative(rel: str) -> PurePosixPath:
    """``rel`` as a relative path with no ``..``, no ``.`` parts, no NUL and no absolute start,
    or PathEscapeError: the only form a path from a file may take before it is used."""
    if not rel or "\x00" in rel or "\\" in rel:
        raise PathEscapeError(f"'{rel}' is not a plain relative path")
    pure = PurePosixPath(rel)
    if pure.is_absolute() or any(part in ("..", ".", "") for part in rel.split("/")):
        raise PathEscapeError(
            f"'{rel}' is not a plain relative path (it is absolute or has '..' or '.' in it)"
        )
    return pure


def plain_name(name: str) -> str:
    """``name`` when it is one plain path component (no ``/``, not ``.`` or ``..``, no NUL),
    else PathEscapeError: the only form a name from a file may take before it names a folder."""
    pure = plain_relative(name)
    if len(pure.parts) != 1:
        raise PathEscapeError(f"'{name}' is not a plain name (it has a '/' in it)")
    return name


def tree_path(rel: str) -> PurePosixPath:
    """``rel`` (a path read from a git tree) as ``plain_relative`` has it, or PathEscapeError
    also when a part is ``.git`` in any case: git never checks such a path out, and neither
    does flow, since a file there would change the repository itself (its hooks, its config)."""
    pure = plain_relative(rel)
    if any(part.lower() == GIT_FOLDER for part in pure.parts):
        raise PathEscapeError(f"'{rel}' is inside a .git folder: nothing is written there")
    return pure


def link_on_the_way(root: Path, rel: str) -> str | None:
    """The first folder of ``rel`` below ``root`` that is a symbolic link (relative to
    ``root``), or None when there is none (``rel`` must be plain, as ``plain_relative``)."""
    pure = plain_relative(rel)
    here = Path(root)
    for part in pure.parts[:-1]:
        here = here / part
        if here.is_symlink():
            return here.relative_to(root).as_posix()
    return None


def no_link_on_the_way(root: Path, rel: str) -> Path:
    """``root/rel`` for writing or removing, or PathEscapeError when ``rel`` is not a plain
    relative path or any folder on the way below ``root`` is a symbolic link (the last part
    may be one: it is the link itself that is replaced or removed, never its target)."""
    link = link_on_the_way(root, rel)
    if link is not None:
        raise PathEscapeError(
            f"'{rel}' is beyond a symbolic link ('{link}' is a link): nothing is written or "
            "removed through a link"
        )
    return Path(root).joinpath(*plain_relative(rel).parts)
