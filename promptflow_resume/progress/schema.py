"""Checking front matter against ``schemas/progress.schema.json``, with positioned messages.

The schema file is the single source of truth; this module finds it, compiles it once (a
document the quick check of ``schemacheck`` passes is valid; ``jsonschema`` examines the rest),
and turns the first violation into one paragraph naming ``path:line:col``, the field path
(``$.steps.analyze.status``), what was expected and how to fix it::

    validate_front_matter(data, path="progress.md", source=front_matter_text, line_offset=1)
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ..base import yamlio
from ..base.errors import FileNotFoundFlowError, FlowError, ProgressSchemaError
from ..base.jsonvalues import excerpt, field_path
from ..base.schemacheck import compile_schema

SCHEMA_NAMES = ("progress", "workflow", "batch", "agent", "skill", "hooks", "events")


def schema_file(name: str = "progress") -> Path:
    """Where ``<name>.schema.json`` lives: packaged data if present, else the source tree."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (
        here / "schemas" / f"{name}.schema.json",
        here.parent / "schemas" / f"{name}.schema.json",
    ):
        if candidate.is_file():
            return candidate
    raise FileNotFoundFlowError(
        f"the {name} schema ({name}.schema.json) is not installed with flow.",
        hint="Reinstall promptflow-resume; the schemas ship with it.",
    )


def schema_text(name: str = "progress") -> str:
    """The text of ``<name>.schema.json`` as shipped (``flow schema NAME``)."""
    with open(schema_file(name), encoding="utf-8", newline="") as handle:
        return handle.read()


@functools.lru_cache(maxsize=4)
def load_schema(name: str = "progress") -> dict[str, Any]:
    """The parsed JSON schema ``name`` (cached)."""
    with open(schema_file(name), encoding="utf-8", newline="") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


@functools.lru_cache(maxsize=1)
def validator_class() -> Any:
    """Draft 2020-12 over JSON's data model: a ``number`` is finite (NaN and the infinities,
    which YAML and Python can spell but JSON cannot, are no number), as in ``schemacheck``."""
    from jsonschema import Draft202012Validator, validators

    base = Draft202012Validator.TYPE_CHECKER
    checker = base.redefine_many(
        {
            "number": lambda checker, value: base.is_type(value, "number") and value - value == 0.0,
            "integer": lambda checker, value: base.is_type(value, "integer") and value - value == 0,
        }
    )
    return validators.extend(Draft202012Validator, type_checker=checker)


@functools.lru_cache(maxsize=4)
def _validator(name: str = "progress") -> Any:
    return validator_class()(load_schema(name))


@functools.lru_cache(maxsize=4)
def _quick_check(name: str = "progress") -> Callable[[Any], bool] | None:
    # The schema compiled to plain checks (schemacheck): it says "valid" without loading
    # jsonschema, which is asked about every document it rejects.
    return compile_schema(load_schema(name))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number" if value - value == 0.0 else "a non-finite number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _show(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4000:
        return excerpt(hex(value))  # str() of it would pass Python's 4,300-digit limit
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _known_keys(schema: dict[str, Any]) -> list[str]:
    return list((schema.get("properties") or {}).keys())


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _describe(error: Any) -> tuple[list[Any], str]:
    """The field path parts and the message for one jsonschema error."""
    parts = list(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    wanted = schema.get("description")
    instance = error.instance
    validator = error.validator
    if validator == "required":
        missing = [k for k in error.validator_value if k not in instance]
        key = missing[0] if missing else "?"
        what = f"the required key {key!r} is missing"
        if key == "flow_progress":
            what += "; this does not look like a flow progress file"
        return [*parts, key], what + "."
    if validator == "additionalProperties":
        known = _known_keys(schema)
        extra = [k for k in instance if k not in known]
        key = extra[0] if extra else "?"
        allowed = ", ".join(known) if known else "none"
        return [
            *parts,
            key,
        ], f"unknown key {key!r}{_suggest(str(key), known)}; allowed keys here: {allowed}."
    if validator == "enum":
        choices = [str(c) for c in error.validator_value]
        return parts, (
            f"expected {wanted or 'one of ' + ', '.join(choices)}; found {_show(instance)}"
            f"{_suggest(str(instance), choices)}."
        )
    if validator == "type":
        expected = error.validator_value
        expected_text = wanted or (
            " or ".join(expected) if isinstance(expected, list) else str(expected)
        )
        return parts, f"expected {expected_text}; found {_kind(instance)} ({_show(instance)})."
    if validator in ("pattern", "minimum", "const", "minLength", "maximum"):
        if validator == "minLength":
            return parts, "must not be empty."
        return parts, f"expected {wanted or error.message}; found {_show(instance)}."
    return parts, f"{error.message}."


def _node_at(root: yaml.Node | None, parts: list[Any]) -> tuple[yaml.Node | None, bool]:
    """The YAML node at ``parts`` (or the deepest existing ancestor, flagged False)."""
    node = root
    for part in parts:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if str(key_node.value) == str(part):
                    node = value_node
                    break
            else:
                return node, False
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return node, False
            node = node.value[part]
        else:
            return node, False
    return node, True


def _key_node(root: yaml.Node | None, parts: list[Any]) -> yaml.Node | None:
    """The key node of the last mapping key in ``parts`` (for unknown-key errors)."""
    parent, found = _node_at(root, parts[:-1])
    if not found or not isinstance(parent, yaml.MappingNode):
        return None
    for key_node, _ in parent.value:
        if str(key_node.value) == str(parts[-1]):
            found_key: yaml.Node = key_node
            return found_key
    return None


def validate_front_matter(
    data: Any,
    *,
    path: str | Path = "progress.md",
    source: str | None = None,
    line_offset: int = 0,
    context: str = "",
    schema: str = "progress",
) -> None:
    """Raise ``ProgressSchemaError`` for the first schema violation in ``data``.

    ``source`` is the YAML text ``data`` came from; when given, the error names the line and
    column of the offending value (``line_offset`` lines precede the text in the file).
    """
    check = _quick_check(schema)
    if check is not None and check(data):
        return
    errors = list(_validator(schema).iter_errors(data))
    if not errors:
        return
    described = [(_describe(e), e) for e in errors]
    root: yaml.Node | None = None
    if source is not None:
        try:
            root = yamlio.compose(source, path=path, line_offset=line_offset)
        except Exception:  # positions are a courtesy; the message stands without them
            root = None

    def position(parts: list[Any], validator: str) -> tuple[int | None, int | None]:
        if root is None:
            return None, None
        node: yaml.Node | None
        if validator == "additionalProperties":
            node = _key_node(root, parts)
        else:
            node, found = _node_at(root, parts)
            if not found and validator == "required":
                node, _ = _node_at(root, parts[:-1])
        if node is None:
            return None, None
        return node.start_mark.line + 1 + line_offset, node.start_mark.column + 1

    located = []
    for (parts, message), error in described:
        line, column = position(parts, error.validator)
        located.append((line if line is not None else 0, column or 0, parts, message, line, column))
    located.sort(key=lambda item: (item[0], item[1]))
    problems = [
        FlowError(context + message, path=path, line=line, column=column, field=field_path(parts))
        for _, _, parts, message, line, column in located
    ]
    first = problems[0]
    message = first.message
    more = len(problems) - 1
    if more:
        message += (
            f" ({more} more problem{'s' if more > 1 else ''}; `flow validate {path}` lists "
            "them all.)"
        )
    raise ProgressSchemaError(
        message,
        problems=problems,
        path=path,
        line=first.line,
        column=first.column,
        field=first.field,
        hint=(
            "Fix that value in the front matter (or restore the file from version control); "
            f"`flow schema {schema}` prints the full schema."
        ),
    )


def field_position(path: str | Path, parts: list[Any]) -> tuple[int | None, int | None]:
    """The 1-based line and column of the front matter field ``parts`` in the file ``path``
    (None, None when the file or the field cannot be found): for errors found after loading."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            text = handle.read(_POSITION_READ_LIMIT)
    except OSError:
        return None, None
    if not text.startswith("---\n"):
        return None, None
    end = text.find("\n---\n", 3)
    try:
        root = yamlio.compose(text[4 : end + 1 if end != -1 else None], line_offset=1)
    except FlowError:
        return None, None
    node, found = _node_at(root, parts)
    if node is None or not found:
        return None, None
    return node.start_mark.line + 2, node.start_mark.column + 1


#: ``field_position`` reads at most this much of a file (the front matter's own size limit).
_POSITION_READ_LIMIT = 8 * 1024 * 1024
