"""A fast reader for the part of a progress file's front matter that a run summary needs.

Reading 10,000 front matters with the YAML loader takes about 4 s; the detector's cold scan
must stay under 2 s. Progress files are written by ``yamlio.dump`` in plain block style, so
this scanner reads that style line by line: block mappings, sequences of one-line scalars and
one-line flow collections of plain scalars (``usage: {turns: 4, …}``, ``keywords: [a, b]``),
with YAML's own implicit typing rules (the resolver table of PyYAML's safe loader). Keys the
summary does not need are skipped without being parsed, whatever they hold.

Anything outside that style (nested or multi-line flow collections, block scalars, anchors,
tags, multi-line scalars, escapes) raises ``Unsupported`` inside a kept key, and the caller
falls back to ``yamlio.load`` on the whole text. So the result is always what the YAML loader
would give for the kept keys (a property test checks this against ``yamlio.load``)::

    data = scan(text, {"status": True, "steps": {"*": {"status": True}}})
"""

from __future__ import annotations

import re
from typing import Any

import yaml

#: What to keep: ``True`` keeps a key's whole value; a mapping keeps only the named children
#: (``"*"`` matches any name); a missing name (or ``False``) skips the key.
Spec = dict[str, Any]

_STR = "tag:yaml.org,2002:str"
_RESOLVERS: dict[Any, list[tuple[str, re.Pattern[str]]]] = yaml.SafeLoader.yaml_implicit_resolvers
_KEY = re.compile(r"""([^\s'"#:\-?{}\[\],&*!|>%@`][^:#]*?|'[^']*'|"[^"\\]*")[ ]*:(?:[ ]+(.*))?$""")
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+][0-9]+)?")
_BOOLS = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}
# Plain scalars cannot start with these (YAML indicators).
_INDICATORS = frozenset("&*!|>%@`,#[]{}'\"")


# Progress files repeat the same lines ("    status: completed", "  provider: openai"): caching
# what a line or value means saves most of the work. Bounded, so odd files cannot grow them.
_CACHE_LIMIT = 8192
_scalar_cache: dict[str, Any] = {}


class Unsupported(Exception):
    """The text uses YAML this scanner does not read; use the YAML loader instead."""


def _tag(value: str) -> str:
    """The tag PyYAML's safe loader gives the plain scalar ``value``."""
    for tag, pattern in _RESOLVERS.get(value[0] if value else "", ()):
        if pattern.match(value):
            return tag
    for tag, pattern in _RESOLVERS.get(None, ()):
        if pattern.match(value):
            return tag
    return _STR


def scalar(text: str) -> Any:
    """The value of a one-line scalar as the safe loader reads it; Unsupported if unsure."""
    try:
        return _scalar_cache[text]
    except KeyError:
        pass
    value = _scalar(text)
    if len(_scalar_cache) < _CACHE_LIMIT and not isinstance(value, (list, dict)):
        _scalar_cache[text] = value
    return value


def _scalar(text: str) -> Any:
    value = text.rstrip(" ")
    if not value:
        return None
    first = value[0]
    if first == "'":
        inner = value[1:-1]
        if len(value) < 2 or value[-1] != "'" or "'" in inner.replace("''", ""):
            raise Unsupported("single-quoted scalar")
        return inner.replace("''", "'")
    if first == '"':
        inner = value[1:-1]
        if len(value) < 2 or value[-1] != '"' or '"' in inner or "\\" in inner:
            raise Unsupported("double-quoted scalar")
        return inner
    if value in ("[]", "{}"):
        return [] if first == "[" else {}
    if first in _INDICATORS or (first in "-?:" and (len(value) == 1 or value[1] == " ")):
        raise Unsupported("indicator")
    comment = value.find(" #")
    if comment >= 0:
        value = value[:comment].rstrip(" ")
    if ": " in value or value.endswith(":") or "\t" in value:
        raise Unsupported("mapping indicator in a scalar")
    tag = _tag(value)
    if tag == _STR:
        return value
    if tag.endswith(":null"):
        return None
    if tag.endswith(":bool"):
        return _BOOLS[value.lower()]
    if tag.endswith(":int") and _INT.fullmatch(value):
        return int(value)
    if tag.endswith(":float") and _FLOAT.fullmatch(value):
        return float(value)
    raise Unsupported(tag)  # timestamps, octal, sexagesimal, .inf ...: let YAML decide


# Characters that make a one-line flow collection more than plain scalars between commas.
_FLOW_SPECIAL = re.compile(r"[\[\]{}'\"#&*!|>%@`:?]")


def flow(text: str) -> Any:
    """A one-line flow sequence or mapping of plain scalars (``[a, b]``, ``{k: 1, j: x}``), as
    the safe loader reads it; Unsupported for anything else (nesting, quotes, comments ...)."""
    value = text.rstrip(" ")
    opener, closer = value[:1], value[-1:]
    if (opener, closer) not in (("[", "]"), ("{", "}")) or len(value) < 2:
        raise Unsupported("not a one-line flow collection")
    inner = value[1:-1]
    if not inner.strip(" "):
        return [] if opener == "[" else {}
    pieces = [piece.strip(" ") for piece in inner.split(",")]
    if opener == "[":
        if any(not p or _FLOW_SPECIAL.search(p) for p in pieces):
            raise Unsupported("flow sequence item")
        return [scalar(p) for p in pieces]
    out: dict[str, Any] = {}
    for piece in pieces:
        key, sep, item = piece.partition(": ")
        key, item = key.rstrip(" "), item.lstrip(" ")
        if not sep or not key or not item or _FLOW_SPECIAL.search(key + item):
            raise Unsupported("flow mapping entry")
        if key in out:
            raise Unsupported("duplicate key")
        out[_key_text(key)] = scalar(item)
    return out


_KEY_TEXT = re.compile(r"[^\s'\"#:\-?{}\[\],&*!|>%@`][^:#]*|'[^']*'|\"[^\"\\]*\"")
_key_cache: dict[str, str] = {}


def _key_text(text: str) -> str:
    """The key a key text (before the ``:``) stands for; Unsupported unless a plain string."""
    try:
        return _key_cache[text]
    except KeyError:
        pass
    if not _KEY_TEXT.fullmatch(text):
        raise Unsupported("not a simple key")
    if text[0] in "'\"":
        key = text[1:-1]
    elif _tag(text) != _STR:
        raise Unsupported("key that is not a string")
    else:
        key = text
    if len(_key_cache) < _CACHE_LIMIT:
        _key_cache[text] = key
    return key


def key_line(body: str) -> tuple[str, str | None]:
    """``(key, inline value or None)`` of a ``key: value`` line; Unsupported for other lines."""
    colon = body.find(": ")
    if colon > 0 and body[0] not in "'\"":
        inline: str | None = body[colon + 2 :].lstrip(" ") or None
        return _key_text(body[:colon].rstrip(" ")), inline
    match = _KEY.match(body)  # quoted keys, "key:" at the end of the line
    if match is None:
        raise Unsupported("not a simple key line")
    return _key_text(match.group(1).rstrip(" ")), match.group(2) or None


def _closed(text: str) -> None:
    """Raise Unsupported if the inline value of a skipped key may go on on later lines.

    Quoted scalars and flow collections may span lines, even back at column 0; plain
    scalars and block scalars continue only on deeper lines, which skipping drops anyway.
    """
    first = text[:1]
    if first in ("'", '"'):
        _scalar(text)  # accepts only a complete one-line quoted scalar
    elif first in ("[", "{"):
        depth = 0
        for char in text:
            if char in "'\"#":
                raise Unsupported("quotes or comment in a flow collection")
            if char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
        if depth != 0:
            raise Unsupported("flow collection spanning lines")


# Splits a document before every line that starts a top-level key (not indented, not blank,
# not a comment, not a "-" item of a sequence flush with its key).
_TOP_LEVEL = re.compile(r"\n(?=[^ \n#\-])")


def _only_comments(text: str) -> bool:
    return all(not line.strip(" ") or line.lstrip(" ")[0] == "#" for line in text.split("\n"))


def _top_level(text: str, spec: Spec) -> str:
    """``text`` without the top-level keys ``spec`` skips.

    Skipped keys (attempt history, configuration, transcript digest) are cut out as whole
    blocks by a regular expression, without looking at their lines, so their size and
    content hardly matter. Deeper levels are left to the line scanner.
    """
    kept: list[str] = []
    for block in _TOP_LEVEL.split(text):
        end = block.find("\n")
        first = block if end < 0 else block[:end]
        if first[:1] in ("", " ", "#", "-"):
            # Only text before the first key can look like this; it must be comments.
            if not _only_comments(block):
                raise Unsupported("a front matter that does not start with a key")
            continue
        key, inline = key_line(first)
        if spec.get(key, spec.get("*", False)):
            kept.append(block)
        elif inline and inline[0] in "'\"[{":
            _closed(inline)
    return "\n".join(kept)


_prefix_cache: dict[int, tuple[Spec, tuple[str, ...]]] = {}


def _prefixes(spec: Spec | None) -> tuple[str, ...] | None:
    """``("name:", ...)`` for a spec that names its keys (no ``*``), else None."""
    if spec is None or "*" in spec:
        return None
    cached = _prefix_cache.get(id(spec))
    if cached is None or cached[0] is not spec:
        cached = _prefix_cache[id(spec)] = (spec, tuple(f"{key}:" for key in spec))
    return cached[1]


def _tricky(body: str) -> bool:
    """A line that may hold a quoted or spaced key, or open a quoted or flow value."""
    return (
        body[0] in "'\"?"
        or "'" in body
        or '"' in body
        or "[" in body
        or "{" in body
        or " :" in body
    )


class _Scanner:
    def __init__(self, text: str) -> None:
        # (indent, content) of every line that is not blank or a comment
        self.lines = [
            (len(raw) - len(body), body)
            for raw in text.split("\n")
            if (body := raw.lstrip(" ")) and body[0] != "#"
        ]
        self.count = len(self.lines)

    def mapping(self, pos: int, indent: int, spec: Spec | None) -> tuple[dict[str, Any], int]:
        """Parse a block mapping whose keys sit at ``indent``; ``spec`` None keeps everything."""
        lines, count = self.lines, self.count
        result: dict[str, Any] = {}
        star = spec.get("*", False) if spec is not None else True
        wanted = _prefixes(spec)
        while pos < count:
            ind, body = lines[pos]
            if ind != indent:
                if ind < indent:
                    break
                raise Unsupported("unexpected indentation")
            if wanted is not None and not body.startswith(wanted) and not _tricky(body):
                key, inline = "", None  # a key the spec skips: no need to read it
            else:
                key, inline = key_line(body)
            rule = True if spec is None else spec.get(key, star)
            pos += 1
            if not rule:
                if inline and inline[0] in "'\"[{":
                    _closed(inline)
                while pos < count:  # skip the key's block, whatever it holds
                    ind, body = lines[pos]
                    if ind < indent or (ind == indent and body[0] != "-"):
                        break
                    pos += 1
                continue
            if inline and inline[0] in "[{":
                value = flow(inline)
                if type(rule) is dict and isinstance(value, dict):
                    value = {k: v for k, v in value.items() if rule.get(k, rule.get("*"))}
                result[key] = value
                if pos < count and lines[pos][0] > indent:
                    raise Unsupported("multi-line flow collection")
                continue
            if inline and inline[0] != "#":
                result[key] = scalar(inline)
                if pos < count and lines[pos][0] > indent:
                    raise Unsupported("multi-line scalar")
                continue
            if pos >= count:
                result[key] = None
                continue
            next_ind, next_body = lines[pos]
            is_item = next_body[0] == "-" and (len(next_body) == 1 or next_body[1] == " ")
            if is_item and next_ind >= indent:
                result[key], pos = self.sequence(pos, next_ind)
            elif next_ind > indent:
                child = rule if type(rule) is dict else None
                result[key], pos = self.mapping(pos, next_ind, child)
            else:
                result[key] = None
        return result, pos

    def sequence(self, pos: int, indent: int) -> tuple[list[Any], int]:
        """Parse a block sequence of one-line scalars whose ``-`` sit at ``indent``."""
        lines, count = self.lines, self.count
        items: list[Any] = []
        while pos < count:
            ind, body = lines[pos]
            if ind != indent or body[0] != "-":
                if ind > indent:
                    raise Unsupported("nested or multi-line item")
                break
            item = body[1:].lstrip(" ")
            if len(body) > 1 and body[1] != " ":
                raise Unsupported("not a sequence item")
            if item.startswith("- "):
                raise Unsupported("nested sequence")  # (a "key: value" item fails in scalar)
            items.append(scalar(item))
            pos += 1
        return items, pos


def scan(text: str, spec: Spec) -> dict[str, Any]:
    """The kept keys of the block mapping ``text``; raises Unsupported outside our style."""
    if "\t" in text or "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\t" in text or "\r" in text:
            raise Unsupported("tabs or carriage returns")
    scanner = _Scanner(_top_level(text, spec))
    if not scanner.lines:
        return {}
    if scanner.lines[0][0] != 0:
        raise Unsupported("indented first line")
    result, pos = scanner.mapping(0, 0, spec)
    if pos != scanner.count:
        raise Unsupported("trailing content")
    return result
