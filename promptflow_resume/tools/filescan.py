"""Walking the workspace's files fast, and a cache of their text for repeated searches.

``walk`` yields the regular files below a folder in sorted order as ``(absolute path, path
relative to the workspace root)`` strings: no ``pathlib`` objects and one ``scandir`` per
folder, since a model searches a 10,000-file repository many times per run. Skipped: the
folders in ``SKIPPED_DIRS`` (``.git``, ``node_modules`` …), what the repository's
``.gitignore`` files ignore, symbolic links (they may lead outside the workspace), FIFOs and
devices.

``read_text`` returns a file's text (``None`` for a binary file) from a process-wide cache that
is checked against the file's size and modification time on every use, so an edit is always
seen; the cache holds at most ``CACHE_BYTES`` of text, least recently used out first::

    for path, rel in walk(root, root):
        text = read_text(path, max_bytes=4 << 20)
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from .ignore import IgnoreRules

#: Folders a recursive listing or search does not enter (unless asked for by ``path``).
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".flow",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)
#: Bytes looked at to tell a binary file from text.
SNIFF_BYTES = 8192
#: Most text kept in the cache (characters, roughly bytes).
CACHE_BYTES = 96 * 1024 * 1024

#: Marks a file that is too large to search (distinct from None, a binary file).
TOO_LARGE = "\x00too-large"


def walk(root: str, start: str) -> Iterator[tuple[str, str]]:
    """Regular files below ``start`` (inside ``root``), sorted, as (path, relative to root)."""
    root = os.path.realpath(root)
    start = os.path.realpath(start)
    rules = IgnoreRules(Path(root))
    rel_start = os.path.relpath(start, root).replace(os.sep, "/")
    rel_start = "" if rel_start == "." else rel_start
    parts = rel_start.split("/") if rel_start else []
    for depth in range(1, len(parts) + 1):
        rules.enter("/".join(parts[:depth]))
    yield from _walk(start, rel_start, rules)


def _walk(folder: str, rel: str, rules: IgnoreRules) -> Iterator[tuple[str, str]]:
    rules.enter(rel)
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    prefix = f"{rel}/" if rel else ""
    has_rules = bool(rules.specs)
    subdirs: list[tuple[str, str]] = []
    for entry in entries:
        name = entry.name
        try:
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if name in SKIPPED_DIRS:
                    continue
                if has_rules and rules.ignored(prefix + name, is_dir=True):
                    continue
                subdirs.append((entry.path, prefix + name))
            elif entry.is_file(follow_symlinks=False):
                if has_rules and rules.ignored(prefix + name, is_dir=False):
                    continue
                yield entry.path, prefix + name
        except OSError:
            continue
    # Files first, then folders: the order ``os.walk`` gave before (sorted within each).
    for path, sub in subdirs:
        yield from _walk(path, sub, rules)


#: path -> ((mtime_ns, ctime_ns, size, inode), text)
_cache: OrderedDict[str, tuple[tuple[int, int, int, int], str | None]] = OrderedDict()
_cached_chars = 0
_lock = threading.Lock()


def read_text(path: str, *, max_bytes: int) -> str | None:
    """The file's text (UTF-8, undecodable bytes replaced, CRLF as LF), None for a binary
    file, ``TOO_LARGE`` above ``max_bytes``; OSError when it cannot be read."""
    global _cached_chars
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"{path} is not a regular file")
    if info.st_size > max_bytes:
        return TOO_LARGE
    # The inode changes on every atomic replace (the edit tools' way of writing), so an edit
    # within one tick of the clock is still seen.
    key = (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino)
    with _lock:
        hit = _cache.get(path)
        if hit is not None and hit[0] == key:
            _cache.move_to_end(path)
            return hit[1]
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    text: str | None
    if b"\x00" in data[:SNIFF_BYTES]:
        text = None
    else:
        text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    with _lock:
        old = _cache.pop(path, None)
        if old is not None and old[1] is not None:
            _cached_chars -= len(old[1])
        size = len(text) if text is not None else 0
        if size <= CACHE_BYTES // 4:
            _cache[path] = (key, text)
            _cached_chars += size
            while _cached_chars > CACHE_BYTES and _cache:
                _, (_, dropped) = _cache.popitem(last=False)
                _cached_chars -= len(dropped) if dropped is not None else 0
    return text


def clear_cache() -> None:
    """Forget every cached text (tests and benchmarks measure a cold cache this way)."""
    global _cached_chars
    with _lock:
        _cache.clear()
        _cached_chars = 0


_CLASS_ESCAPES = frozenset("wWdDsSbBAZzGnrtfv0123456789xuUN")


def required_literal(pattern: str) -> str | None:
    """A piece of plain text that every match of the regular expression ``pattern`` contains
    (the longest such run found), or None when none is certain.

    Used to skip files cheaply (``literal in text``) before running the expression. Patterns
    with alternation or inline flags give None: a literal is only taken where it is sure.
    """
    if "|" in pattern or "(?" in pattern or re.search(r"\)[*?{]", pattern):
        return None  # alternatives, flags, or a whole group that may be absent
    runs: list[str] = []
    current = ""
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in _CLASS_ESCAPES or nxt.isalnum():
                runs.append(current)
                current = ""
            else:
                current += nxt
            i += 2
            continue
        if ch in "*?{":
            current = current[:-1]  # the previous character may be absent
            runs.append(current)
            current = ""
            if ch == "{":
                end = pattern.find("}", i)
                i = end + 1 if end != -1 else len(pattern)
                continue
        elif ch == "+":
            runs.append(current)
            current = ""
        elif ch == "[":
            runs.append(current)
            current = ""
            end = pattern.find("]", i + 2)
            if end == -1:
                return None
            i = end + 1
            continue
        elif ch in ".^$()":
            runs.append(current)
            current = ""
        else:
            current += ch
        i += 1
    runs.append(current)
    best = max(runs, key=len)
    return best if len(best) >= 3 else None
