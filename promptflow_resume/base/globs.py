"""Glob patterns as regular expressions, one dialect for every place that matches paths.

Paths are ``/``-separated and relative. ``*`` and ``?`` stay within one path part, ``**``
crosses parts (``**/`` also matches no folder at all), ``[abc]``/``[!abc]`` are character
classes, ``\\x`` is a literal ``x`` and, where ``braces`` is on, ``{a,b}`` is either one::

    re.fullmatch(glob_regex("src/**/*.{py,md}"), "src/a/b.py")  # matches
"""

from __future__ import annotations

import re


def glob_regex(glob: str, *, braces: bool = True) -> str:
    """The regular expression (not anchored) that ``glob`` stands for.

    ``braces=False`` keeps ``{`` and ``}`` literal, as .gitignore files read them.
    """
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif braces and c == "{" and (end := glob.find("}", i + 1)) != -1:
            options = glob[i + 1 : end].split(",")
            out.append("(?:" + "|".join(glob_regex(o) for o in options) + ")")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)
