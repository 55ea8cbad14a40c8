"""The front matter: YAML with positions, checked against ``schemas/workflow.schema.json``.

Structure is checked by the JSON Schema (one source of truth with the published schema);
each schema error becomes a diagnostic at the YAML position of the offending key or value,
with a message a person can act on. Meaning (durations, defaults that fit their type, names
that clash) is checked by the builders in this package.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any

from ..base import yamlio
from ..base.packagedata import read_text
from ..base.schemacheck import compile_schema
from .diagnostics import Collector, did_you_mean
from .source import (
    MAX_DEPTH,
    FieldPath,
    Source,
    YamlPositions,
    collect_positions,
    field_path,
)
from .values import type_name

#: Keys editors use that change nothing flow does (and no hash).
COSMETIC_KEYS: tuple[str, ...] = ("description", "name", "argument-hint", "agent", "mode")
#: Model parameters accepted at the top level and passed to the provider.
PARAM_KEYS: tuple[str, ...] = (
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "stop",
    "presence_penalty",
    "frequency_penalty",
)
KNOWN_KEYS: tuple[str, ...] = (
    *COSMETIC_KEYS,
    "model",
    "provider",
    "tools",
    *PARAM_KEYS,
    "params",
    "inputs",
    "commands",
    "budget",
    "retry",
    "context_window",
    "compaction",
    "allow-commands",
    "allow-fetch",
    "approve",
    "steps",
    "recovery",
    "incomplete_reply",
)


#: Characters YAML refuses (the YAML 1.1 printable set, as PyYAML checks it).
_NON_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)


#: The front-matter schema of each file kind (``schemas/<name>.schema.json``).
SCHEMAS: dict[str, str] = {"prompt": "workflow", "agent": "agent"}


@cache
def front_matter_schema(kind: str = "prompt") -> dict[str, Any]:
    """The front-matter JSON Schema of a file kind (``prompt`` or ``agent``) shipped with the
    package."""
    text = read_text(f"schemas/{SCHEMAS[kind]}.schema.json")
    schema: dict[str, Any] = json.loads(text)
    return schema


def workflow_schema() -> dict[str, Any]:
    """The workflow (prompt file) front-matter JSON Schema shipped with the package."""
    return front_matter_schema("prompt")


@cache
def _validator(kind: str) -> Any:
    # Imported here: jsonschema costs ~80 ms to import and only files with front matter need it.
    import jsonschema

    return jsonschema.Draft202012Validator(front_matter_schema(kind))


@cache
def _quick_check(kind: str) -> Callable[[Any], bool] | None:
    # The schema compiled to plain checks: a front matter they pass is valid without loading
    # jsonschema, which examines (and names the problems of) every other.
    return compile_schema(front_matter_schema(kind))


def read_front_matter(src: Source, col: Collector) -> tuple[dict[str, Any], YamlPositions] | None:
    """Parse the front matter into a mapping plus positions; None (with errors) if unusable."""
    if src.front_matter_text is None:
        return {}, YamlPositions()
    if _has_bad_character(src, col):
        return None
    parsed = _parse_yaml(src, col)
    if parsed is None:
        return None
    data, positions = parsed
    if data is None:
        return {}, positions
    if not isinstance(data, dict):
        col.error(
            f"the front matter must be a mapping of keys to values, not a {type_name(data)}; "
            "write `key: value` lines between the `---` lines.",
            line=src.front_matter_line,
            column=1,
            field="$",
            code="yaml",
        )
        return None
    return (data, positions) if _keys_usable(positions, col) else None


def _has_bad_character(src: Source, col: Collector) -> bool:
    """True (with an error at it) when the front matter holds a character YAML refuses."""
    text = src.front_matter_text or ""
    bad_char = _NON_PRINTABLE.search(text)
    if not bad_char:
        return False
    # PyYAML refuses these without a line number; name the position ourselves.
    before = text[: bad_char.start()]
    col.error(
        f"the front matter contains the character U+{ord(bad_char.group()):04X}, "
        "which YAML does not allow; delete it.",
        line=src.front_matter_line + before.count("\n"),
        column=bad_char.start() - (before.rfind("\n") + 1) + 1,
        code="yaml",
    )
    return True


def _parse_yaml(src: Source, col: Collector) -> tuple[Any, YamlPositions] | None:
    """The front matter's YAML value and positions; None (with an error) for YAML that cannot
    be read, uses a tag, or nests too deeply."""
    text = src.front_matter_text or ""
    offset = src.front_matter_line - 1
    try:
        node = yamlio.compose(text, path=src.path, line_offset=offset)
        positions = collect_positions(node, first_line=src.front_matter_line)
        if positions.unknown_tags:
            _, line, column, tag = positions.unknown_tags[0]
            col.error(
                f"the YAML tag `{tag}` is not allowed: flow reads plain YAML values only "
                "(no tags that build objects); remove the tag.",
                line=line,
                column=column,
                code="yaml",
            )
            return None
        data = yamlio.load(text, path=src.path, line_offset=offset) if node is not None else None
    except yamlio.YamlError as error:
        col.error(
            f"{error.message} {error.hint or ''}".strip(),
            line=error.line,
            column=error.column,
            code="yaml",
        )
        return None
    except RecursionError:
        col.error(
            "the front matter nests too deeply to read; flatten it.",
            line=src.front_matter_line,
            column=1,
            code="yaml",
        )
        return None
    if positions.depth > MAX_DEPTH:
        line, column = positions.deepest
        col.error(
            f"the front matter nests more than {MAX_DEPTH} levels deep; flatten it.",
            line=line,
            column=column,
            code="yaml",
        )
        return None
    return data, positions


def _keys_usable(positions: YamlPositions, col: Collector) -> bool:
    """Report values that refer to themselves, keys that are not strings and keys written
    twice; False when the mapping cannot be used (a duplicate key is only an error)."""
    usable = True
    for path, line, column in positions.recursive:
        col.error(
            "this value refers to itself through a YAML alias; write it out instead.",
            line=line,
            column=column,
            field=field_path(path),
            code="yaml",
        )
        usable = False
    for path, line, column in positions.non_string_keys:
        col.error(
            "keys must be strings; quote the key.",
            line=line,
            column=column,
            field=field_path(path),
            code="yaml",
        )
        usable = False
    for path, line, column in positions.duplicates:
        col.error(
            f"the key `{path[-1]}` appears twice in the same mapping; remove one of them.",
            line=line,
            column=column,
            field=field_path(path),
            code="duplicate-key",
        )
    return usable


def validate_front_matter(
    data: dict[str, Any],
    pos: YamlPositions,
    col: Collector,
    *,
    kind: str = "prompt",
    known: tuple[str, ...] = KNOWN_KEYS,
) -> set[str]:
    """Check ``data`` against the schema of its file kind; returns the top-level keys that have
    errors. A key not in ``known`` is a warning, never an error."""
    bad: set[str] = set()
    for key in data:
        if key not in known:
            line, column = pos.key((key,))
            col.warning(
                f"unknown front-matter key `{key}` is kept but not used by flow"
                f"{did_you_mean(key, known)}.",
                line=line,
                column=column,
                field=field_path((key,)),
                code="unknown-key",
            )
    check = _quick_check(kind)
    valid = check is not None and check(data)
    errors = (
        []
        if valid
        else sorted(_validator(kind).iter_errors(data), key=lambda e: [str(p) for p in e.path])
    )
    for error in errors[:50]:
        path: FieldPath = tuple(error.absolute_path)
        if path:
            bad.add(str(path[0]))
        for message, where, at_key in _describe(error, path):
            line, column = pos.key(where) if at_key else pos.value(where)
            col.error(message, line=line, column=column, field=field_path(where), code="schema")
    return bad


def _describe(error: Any, path: FieldPath) -> list[tuple[str, FieldPath, bool]]:
    """Readable messages for one schema error: (message, field path, point at the key?)."""
    kind = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    value = error.instance
    if "propertyNames" in error.absolute_schema_path and isinstance(value, str):
        # jsonschema reports a bad mapping key at the mapping; point at the key itself.
        rule = schema.get("description") or "letters, digits, _ and -"
        return [(f"`{value}` is not a valid name: use {rule}.", (*path, value), True)]
    if kind == "additionalProperties":
        known = list(schema.get("properties", {}))
        return [
            (
                f"unknown key `{extra}`{did_you_mean(extra, known)}; "
                f"allowed here: {', '.join(known)}.",
                (*path, extra),
                True,
            )
            for extra in value
            if extra not in schema.get("properties", {})
        ]
    if kind == "required":
        missing = [name for name in error.validator_value if name not in value]
        return [(f"`{name}` is required here.", path, True) for name in missing]
    if kind == "type":
        expected = error.validator_value
        names = expected if isinstance(expected, list) else [expected]
        shown = " or ".join(_article(_JSON_TYPES.get(str(n), str(n))) for n in names)
        got = type_name(value) + ("" if value is None else f" {_short(value)}")
        return [(f"must be {shown}, not {got}.", path, False)]
    if kind == "enum":
        options = ", ".join(str(v) for v in error.validator_value)
        return [(f"must be one of: {options} (got {_short(value)}).", path, False)]
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        symbol = {
            "minimum": ">=",
            "exclusiveMinimum": ">",
            "maximum": "<=",
            "exclusiveMaximum": "<",
        }[kind]
        return [(f"must be {symbol} {error.validator_value} (got {value}).", path, False)]
    if kind == "minItems":
        return [("must not be empty.", path, False)]
    if kind == "minLength":
        return [("must not be an empty string.", path, False)]
    if kind == "pattern":
        rule = schema.get("description") or f"match {error.validator_value}"
        return [(f"must be {rule} (got {_short(value)}).", path, False)]
    if kind in ("anyOf", "oneOf"):
        rule = schema.get("description")
        if rule:
            return [(f"must be {rule} (got {_short(value)}).", path, False)]
    return [(f"{error.message}.", path, False)]


_JSON_TYPES = {"object": "mapping", "array": "list"}


def _article(name: str) -> str:
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
