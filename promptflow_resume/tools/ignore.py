"""``.gitignore`` rules, so that listing and searching skip what the repository ignores.

The common subset of git's rules, per ``.gitignore`` file (the workspace root's and those in
folders below it): blank lines and ``#`` comments are skipped; ``!`` re-includes; a trailing
``/`` matches folders only; a pattern with a ``/`` anywhere but at its end is anchored to the
folder of its ``.gitignore``, one without matches a name at any depth; ``*``, ``?``, ``[...]``
and ``**`` work as in git. The last matching rule wins::

    rules = IgnoreRules(root)
    rules.ignored("build/out.js", is_dir=False)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..base.globs import glob_regex


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool


def parse_rules(text: str, base: str) -> list[_Rule]:
    """The rules of one ``.gitignore`` in folder ``base`` (relative to the root, "" for it)."""
    rules: list[_Rule] = []
    prefix = f"{base}/" if base else ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = glob_regex(line, braces=False)
        where = re.escape(prefix) + body if anchored else re.escape(prefix) + "(?:.*/)?" + body
        rules.append(_Rule(re.compile(where + r"\Z", re.DOTALL), negated, dir_only))
    return rules


class IgnoreRules:
    """The ``.gitignore`` rules in force below ``root``, loaded as folders are entered."""

    def __init__(self, root: Path) -> None:
        """Start with the root's own ``.gitignore`` (if any)."""
        self.root = Path(os.path.realpath(root))
        self.rules: list[_Rule] = []
        self._seen: set[str] = set()
        self.enter("")

    def enter(self, rel_dir: str) -> None:
        """Add the rules of ``rel_dir``'s ``.gitignore`` (once per folder)."""
        if rel_dir in self._seen:
            return
        self._seen.add(rel_dir)
        path = self.root / rel_dir / ".gitignore" if rel_dir else self.root / ".gitignore"
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        self.rules.extend(parse_rules(text, rel_dir))

    def ignored(self, rel: str, *, is_dir: bool) -> bool:
        """True when the last rule that matches ``rel`` (``/``-separated) ignores it."""
        verdict = False
        for rule in self.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(rel):
                verdict = not rule.negated
        return verdict
