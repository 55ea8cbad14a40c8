"""The built-in ``search_files`` tool: lines of the workspace's text files that match a regular
expression (or literal text), bounded in matches, line length, file size and time::

    SearchFiles().run({"pattern": "TODO", "glob": "*.py"}, ToolContext(workspace)).content
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from ..base.confine import confine, relative_name
from ..chat import ToolSpec
from .builtin import BuiltinTool, _object_schema, error_result, glob_matcher
from .filescan import TOO_LARGE, read_text, required_literal, walk
from .tool import ToolResult

MAX_SEARCH_MATCHES = 200
#: Longest line shown in a search result; longer ones are cut with "…".
MAX_MATCH_LINE_CHARS = 300
#: Files larger than this are skipped by ``search_files`` (and counted in its note).
MAX_SEARCH_FILE_BYTES = 4 * 1024 * 1024
#: A search stops after this many seconds and says so (a pathological pattern cannot hang it).
SEARCH_TIME_LIMIT = 20.0


class SearchFiles(BuiltinTool):
    """``search_files {pattern, path?, glob?}``: lines of text files that match.

    ``pattern`` is a Python regular expression; one that does not compile is searched for as
    literal text (and the result says so). Each match is one line ``path:line: text``. Binary
    files, files above ``MAX_SEARCH_FILE_BYTES`` and ``SKIPPED_DIRS`` are skipped.
    """

    #: Changes no file: no snapshot after its calls (docs/spec.md 12).
    read_only = True

    reads_skills = True
    spec = ToolSpec(
        name="search_files",
        description=(
            "Search text files in the workspace for a regular expression (or literal text) and "
            "return matching lines as 'path:line: text'. Use (?i) for case-insensitive search."
        ),
        parameters=_object_schema(
            {
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Regular expression or literal text to find.",
                },
                "path": {
                    "type": "string",
                    "description": "Folder or file to search. Default: the workspace root.",
                },
                "glob": {
                    "type": "string",
                    "description": "Only search files matching this glob, e.g. '*.py'.",
                },
            },
            ["pattern"],
        ),
    )

    def _run(self, arguments: dict[str, Any], root: Path) -> ToolResult:
        start = confine(root, arguments.get("path") or ".")
        rel_start = relative_name(start, root)
        if not start.exists():
            return error_result(f"there is no file or folder '{rel_start}'")
        if not start.is_dir() and not start.is_file():
            return error_result(f"'{rel_start}' is not a regular file or folder")
        notes: list[str] = []
        pattern_text: str = arguments["pattern"]
        try:
            regex = re.compile(pattern_text)
        except re.error as exc:
            regex = re.compile(re.escape(pattern_text))
            notes.append(f"not a valid regular expression ({exc}); searched for it literally")
        # A first search over the whole file (lines as in MULTILINE mode) finds the few files
        # worth splitting into lines. The anchors \A and \Z mean something else there.
        whole = None
        if "\\A" not in pattern_text and "\\Z" not in pattern_text:
            whole = re.compile(regex.pattern, regex.flags | re.MULTILINE)
        # Text every match must contain: most files are ruled out by a substring test.
        literal = required_literal(regex.pattern)
        glob = arguments.get("glob")
        is_dir = start.is_dir()
        matcher = glob_matcher(glob) if glob and is_dir else None
        cut = 0 if rel_start == "." else len(rel_start) + 1
        files = walk(str(root), str(start)) if is_dir else iter([(str(start), rel_start)])
        matches: list[str] = []
        skipped_large = 0
        truncated = timed_out = False
        deadline = time.monotonic() + SEARCH_TIME_LIMIT
        for path, name in files:
            if matcher is not None and not matcher(name[cut:]):
                continue
            if time.monotonic() > deadline:
                timed_out = True
                break
            try:
                text = read_text(path, max_bytes=MAX_SEARCH_FILE_BYTES)
            except OSError:
                continue  # unreadable or vanished: not worth failing the whole search
            if text is TOO_LARGE:
                skipped_large += 1
                continue
            if text is None or (literal is not None and literal not in text):
                continue
            if whole is not None and not whole.search(text):
                continue
            # Split on newlines only, so line numbers agree with read_file's offsets.
            for number, line in enumerate(text.split("\n"), 1):
                if regex.search(line):
                    if len(matches) == MAX_SEARCH_MATCHES:
                        truncated = True
                        break
                    if len(line) > MAX_MATCH_LINE_CHARS:
                        line = line[:MAX_MATCH_LINE_CHARS] + "…"
                    matches.append(f"{name}:{number}: {line}")
            if truncated:
                break
        if truncated:
            notes.append(
                f"first {MAX_SEARCH_MATCHES} matches shown, there are more; narrow with path, "
                "glob or a more specific pattern"
            )
        if timed_out:
            notes.append(f"the search stopped after {SEARCH_TIME_LIMIT:g} s; narrow it")
        if skipped_large:
            notes.append(
                f"{skipped_large} file(s) larger than {MAX_SEARCH_FILE_BYTES} bytes not searched"
            )
        where = f" in '{glob}' files" if glob else ""
        text = "\n".join(matches) if matches else f"(no matches under '{rel_start}'{where})"
        if notes:
            text += "\n" + "\n".join(f"[{note}]" for note in notes)
        return ToolResult(text)
