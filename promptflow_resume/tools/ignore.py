"""``.gitignore`` rules, so that listing and searching skip what the repository ignores.

Each ``.gitignore`` file (the workspace root's and those in folders below it) is read with
pathspec's ``GitIgnoreSpec``, which follows git's own pattern rules (comments, ``!``
re-includes, a trailing ``/`` for folders, anchoring by a ``/``, ``*``, ``?``, ``[...]``,
``**``, escapes and trailing spaces). A file's patterns apply below its folder; the last rule
that matches decides, and a deeper file's rules come after its parents'::

    rules = IgnoreRules(root)
    rules.ignored("build/out.js", is_dir=False)
"""

from __future__ import annotations

import os
from pathlib import Path

from pathspec import GitIgnoreSpec


class IgnoreRules:
    """The ``.gitignore`` rules in force below ``root``, loaded as folders are entered."""

    def __init__(self, root: Path) -> None:
        """Start with the root's own ``.gitignore`` (if any)."""
        self.root = Path(os.path.realpath(root))
        #: (folder relative to the root, with a trailing "/" unless the root; its rules), in
        #: the order the folders were entered.
        self.specs: list[tuple[str, GitIgnoreSpec]] = []
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
        spec = GitIgnoreSpec.from_lines(text.splitlines())
        if spec.patterns:
            self.specs.append((f"{rel_dir}/" if rel_dir else "", spec))

    def ignored(self, rel: str, *, is_dir: bool) -> bool:
        """True when the last rule that matches ``rel`` (``/``-separated) ignores it."""
        verdict = False
        for base, spec in self.specs:
            if not rel.startswith(base):
                continue
            # A folder is asked for with its trailing "/", as rules such as `out/` expect.
            within = rel[len(base) :] + ("/" if is_dir else "")
            included = spec.check_file(within).include
            if included is not None:
                verdict = included
        return verdict
