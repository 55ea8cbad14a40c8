"""Reading a workflow file's text: normalisation, the front matter split, YAML positions.

A workflow's text is normalised once on the way in (BOM removed, CRLF and CR turned into LF),
so that every later position is a 1-based line and column of the file as the user sees it.
The front matter is the block between a first line ``---`` and the next ``---`` (or ``...``)
line; everything after it is the Markdown body::

    src = split_source(text, path="a.prompt.md")
    src.front_matter_text, src.body, src.body_line
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

#: Workflow files larger than this are refused: prompt files are kilobytes, and parsing a
#: huge Markdown file would take seconds before anything useful happens.
MAX_WORKFLOW_BYTES = 1024 * 1024

#: Front matter nested deeper than this is refused: nothing flow reads goes beyond a few
#: levels, and very deep values would exhaust the stack of whatever walks them later.
MAX_DEPTH = 32

FieldPath = tuple[str | int, ...]

#: Tags the safe YAML loader builds; any other tag is an error we can place in the file.
_SAFE_TAGS = frozenset(t for t in yaml.SafeLoader.yaml_constructors if t is not None) | {
    "tag:yaml.org,2002:merge"
}

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class Source:
    """A workflow file's normalised text, split into front matter and body."""

    path: str
    text: str
    #: The YAML between the ``---`` lines (None when the file has no front matter).
    front_matter_text: str | None
    #: 1-based file line of the first YAML line (the line after the opening ``---``).
    front_matter_line: int
    body: str
    #: 1-based file line where the body starts.
    body_line: int


class FrontMatterUnclosed(ValueError):
    """The file starts with ``---`` but no closing ``---`` line follows."""


def split_source(text: str, *, path: str) -> Source:
    """Split normalised ``text`` into front matter and body."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return Source(path, text, None, 1, text, 1)
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            yaml_text = "\n".join(lines[1:index]) + "\n"
            body = "\n".join(lines[index + 1 :])
            return Source(path, text, yaml_text, 2, body, index + 2)
    raise FrontMatterUnclosed(path)


@dataclass
class LineIndex:
    """Turns character offsets into 1-based (line, column) of a text, plus a line offset."""

    text: str
    first_line: int = 1
    _starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._starts = [0]
        self._starts.extend(i + 1 for i, ch in enumerate(self.text) if ch == "\n")

    def position(self, offset: int) -> tuple[int, int]:
        """The (line, column) of ``offset``, both 1-based, in file coordinates."""
        index = bisect.bisect_right(self._starts, offset) - 1
        return index + self.first_line, offset - self._starts[index] + 1


@dataclass
class YamlPositions:
    """Where each value (and each mapping key) of a composed YAML document sits in the file."""

    values: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)
    duplicates: list[tuple[FieldPath, int, int]] = field(default_factory=list)
    non_string_keys: list[tuple[FieldPath, int, int]] = field(default_factory=list)
    #: Values with a tag the safe loader cannot build (``!!python/object``, ``!custom``).
    unknown_tags: list[tuple[FieldPath, int, int, str]] = field(default_factory=list)
    recursive: list[tuple[FieldPath, int, int]] = field(default_factory=list)
    #: The deepest nesting seen (0 for a scalar document), and where it is.
    depth: int = 0
    deepest: tuple[int, int] = (1, 1)

    def value(self, path: FieldPath) -> tuple[int | None, int | None]:
        """Position of the value at ``path``, or of its nearest known parent."""
        return self._nearest(self.values, path)

    def key(self, path: FieldPath) -> tuple[int | None, int | None]:
        """Position of the key naming ``path`` (falls back to the value, then a parent)."""
        if path in self.keys:
            return self.keys[path]
        return self._nearest(self.values, path)

    @staticmethod
    def _nearest(
        table: dict[FieldPath, tuple[int, int]], path: FieldPath
    ) -> tuple[int | None, int | None]:
        while True:
            if path in table:
                return table[path]
            if not path:
                return None, None
            path = path[:-1]


def collect_positions(node: yaml.Node | None, *, first_line: int) -> YamlPositions:
    """Walk a composed YAML node graph and record the file position of every value and key."""
    found = YamlPositions()
    if node is None:
        return found

    def mark(n: yaml.Node) -> tuple[int, int]:
        return n.start_mark.line + first_line, n.start_mark.column + 1

    # Iterative walk: (node, path, ancestors) so that deep nesting cannot exhaust the stack
    # and a node that contains itself (a recursive alias) is reported instead of looping.
    stack: list[tuple[yaml.Node, FieldPath, frozenset[int]]] = [(node, (), frozenset())]
    while stack:
        current, path, ancestors = stack.pop()
        found.values.setdefault(path, mark(current))
        if len(path) > found.depth:
            found.depth, found.deepest = len(path), mark(current)
        if len(path) > MAX_DEPTH:
            continue
        if current.tag not in _SAFE_TAGS:
            found.unknown_tags.append((path, *mark(current), current.tag))
        if id(current) in ancestors:
            found.recursive.append((path, *mark(current)))
            continue
        inner = ancestors | {id(current)}
        if isinstance(current, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in current.value:
                if key_node.tag not in _SAFE_TAGS:
                    found.unknown_tags.append((path, *mark(key_node), key_node.tag))
                    continue
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(
                    (":int", ":bool", ":null", ":float")
                ):
                    found.non_string_keys.append((path, *mark(key_node)))
                    continue
                key = str(key_node.value)
                child = (*path, key)
                if key in seen:
                    found.duplicates.append((child, *mark(key_node)))
                seen.add(key)
                found.keys[child] = mark(key_node)
                stack.append((value_node, child, inner))
        elif isinstance(current, yaml.SequenceNode):
            for i, item in enumerate(current.value):
                stack.append((item, (*path, i), inner))
    return found


def field_path(path: FieldPath) -> str:
    """``$.commands.bump.argv[0]`` style text for a field path."""
    text = "$"
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            text += f".{part}"
        else:
            text += "[" + json.dumps(part, ensure_ascii=False) + "]"
    return text


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """(offset, line) for each line of ``text`` without its newline."""
    offset = 0
    for line in text.split("\n"):
        yield offset, line
        offset += len(line) + 1


def as_mapping(data: Any) -> dict[str, Any] | None:
    """``data`` when it is a mapping with string keys, else None."""
    if isinstance(data, dict) and all(isinstance(k, str) for k in data):
        return data
    return None
