"""``codebase_search {query}``: the files most relevant to a question in plain words.

No embeddings and no model: the query is split into words (``camelCase`` and ``snake_case``
split too, stopwords dropped), and each file of the workspace (walked as by ``search_files``,
``.gitignore`` respected) is scored by BM25 over its words, with a bonus for words in its
path. The best files come back with their best-matching lines, so the model can read on with
``read_file``. Each file's words are kept in a cache checked against the file's size and
modification time, so repeated queries only read what changed. Idempotent.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from ..base.confine import confine
from ..chat import ToolSpec
from .builtin import _object_schema, error_result, signature, validate_arguments
from .filescan import TOO_LARGE, read_text, walk
from .tool import Standalone, ToolContext, ToolResult

MAX_FILES = 10
LINES_PER_FILE = 3
MAX_FILE_BYTES = 1024 * 1024
MAX_CACHED_FILES = 50_000
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_STOP = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "how", "i"}
    | {"in", "is", "it", "of", "on", "or", "the", "this", "that", "to", "what", "where"}
    | {"which", "who", "why", "with", "should", "can", "could", "would", "will", "find"}
    | {"show", "me", "my", "our", "code", "file", "files", "function", "functions"}
)
_K1, _B = 1.2, 0.75


def words(text: str) -> list[str]:
    """Lower-case words of ``text``, identifiers split (``loadProgressFile`` → load, progress,
    file)."""
    return [w.lower() for w in _WORD.findall(text)]


def query_terms(query: str) -> list[str]:
    """The words of a query that carry meaning, each once, in order."""
    return list(dict.fromkeys(w for w in words(query) if w not in _STOP and len(w) > 1))


_counts: dict[str, tuple[tuple[int, int, int], Counter[str], int]] = {}
_lock = threading.Lock()


def _file_counts(path: str) -> tuple[Counter[str], int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    key = (info.st_mtime_ns, info.st_size, info.st_ino)
    with _lock:
        hit = _counts.get(path)
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    try:
        text = read_text(path, max_bytes=MAX_FILE_BYTES)
    except OSError:
        return None
    if text is None or text is TOO_LARGE:
        return None
    found = words(text)
    counts = Counter(found)
    with _lock:
        if len(_counts) >= MAX_CACHED_FILES:
            _counts.clear()  # a crude bound: a workspace this large is re-read now and then
        _counts[path] = (key, counts, len(found))
    return counts, len(found)


class CodebaseSearch(Standalone):
    """``codebase_search {query, path?}``: files ranked for a natural-language query."""

    idempotent = True
    #: Changes no file: no snapshot after its calls (docs/spec.md 12).
    read_only = True
    spec = ToolSpec(
        name="codebase_search",
        description=(
            "Find the files most relevant to a question or description in plain words (e.g. "
            "'where is the retry delay computed'). Returns the best files with their best "
            "lines; use search_files for exact text and read_file to read on."
        ),
        parameters=_object_schema(
            {
                "query": {"type": "string", "minLength": 1, "description": "What to look for."},
                "path": {
                    "type": "string",
                    "description": "Folder to search. Default: the workspace root.",
                },
            },
            ["query"],
        ),
    )

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """The top files by BM25 score, each with its best lines."""
        problem = validate_arguments(self.spec.parameters, arguments)
        if problem is not None:
            return error_result(f"{problem}. Expected: {signature(self.spec)}.")
        terms = query_terms(arguments["query"])
        if not terms:
            return error_result("the query has no words to look for; describe what you need")
        root = Path(ctx.workspace)
        try:
            start = confine(root, arguments.get("path") or ".")
        except ValueError as exc:
            return error_result(str(exc))
        if not start.is_dir():
            return error_result(f"'{arguments.get('path')}' is not a folder in the workspace")
        docs: list[tuple[str, str, Counter[str], int]] = []
        for path, rel in walk(str(root), str(start)):
            counted = _file_counts(path)
            if counted is not None:
                docs.append((path, rel, counted[0], counted[1]))
        if not docs:
            return ToolResult("(no text files to search)")
        average = sum(d[3] for d in docs) / len(docs) or 1.0
        frequency = {t: sum(1 for d in docs if t in d[2]) for t in terms}
        scored: list[tuple[float, str, str]] = []
        wanted = set(terms)
        for path, rel, counts, length in docs:
            path_words = _path_words(rel)
            if wanted.isdisjoint(counts) and wanted.isdisjoint(path_words):
                continue
            score = 0.0
            for term in terms:
                tf = counts.get(term, 0)
                idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
                if tf:
                    score += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / average))
                if term in path_words:
                    score += 2 * idf
            if score > 0:
                scored.append((score, rel, path))
        if not scored:
            return ToolResult(f"(no file mentions any of: {', '.join(terms)})")
        scored.sort(key=lambda item: (-item[0], item[1]))
        parts = []
        for score, rel, path in scored[:MAX_FILES]:
            parts.append(f"{rel} (score {score:.1f})")
            for number, line in _best_lines(path, terms):
                parts.append(f"  {number}: {line[:200]}")
        more = len(scored) - MAX_FILES
        if more > 0:
            parts.append(f"[{more} more file(s) match less well]")
        return ToolResult("\n".join(parts))


_path_cache: dict[str, frozenset[str]] = {}


def _path_words(rel: str) -> frozenset[str]:
    found = _path_cache.get(rel)
    if found is None:
        if len(_path_cache) >= MAX_CACHED_FILES:
            _path_cache.clear()
        found = _path_cache[rel] = frozenset(words(rel))
    return found


def _best_lines(path: str, terms: list[str]) -> list[tuple[int, str]]:
    try:
        text = read_text(path, max_bytes=MAX_FILE_BYTES)
    except OSError:
        return []
    if text is None or text is TOO_LARGE:
        return []
    wanted = set(terms)
    ranked = []
    for number, line in enumerate(text.split("\n"), 1):
        hits = len(wanted & set(words(line)))
        if hits:
            ranked.append((-hits, number, line.strip()))
    ranked.sort()
    return sorted((n, line) for _, n, line in ranked[:LINES_PER_FILE])
