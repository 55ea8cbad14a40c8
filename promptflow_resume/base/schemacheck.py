"""A quick yes-or-no check of a document against a JSON schema, compiled once per schema.

Importing ``jsonschema`` costs tens of milliseconds and its validator walks the schema again
for every value (about a second for a front matter of 800 steps). flow's schemas use a few
keywords only, so ``compile_schema`` turns such a schema into nested checks that answer "is it
valid?" with plain ``isinstance`` tests; a schema using any other keyword compiles to None and
the caller uses ``jsonschema`` for every document::

    check = compile_schema(load_schema("progress"))
    if check is None or not check(document):
        ...  # jsonschema decides, and names the problem

Only "valid" is trusted from here: each check is at least as strict as the JSON Schema keyword
it stands for (an integer must be an ``int``, ``enum`` and ``const`` compare type and value), so
a document it rejects is one ``jsonschema`` then examines, and names the problem of. A number is
a JSON number, so it is finite: NaN and the infinities (which pass every ``minimum`` and
``maximum`` comparison) are no ``number`` here, nor for ``schema.validator`` (docs/spec.md 10.5).

Why not a library: ``bench/schema_bench.py`` measures fastjsonschema and jsonschema on the same
front matter. fastjsonschema spends about 70 ms per process compiling the progress schema and
checks 2.5 times slower; jsonschema alone checks about 18 times slower.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

#: The keywords a compiled check understands; annotations are ignored.
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "examples"})
_KEYWORDS = frozenset(
    {
        "$defs",
        "$ref",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "anyOf",
        "propertyNames",
    }
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    kind = type(value)
    # ``x - x == 0.0`` is false exactly for NaN and the infinities.
    return kind is int or (kind is float and value - value == 0.0) or _is_int(value)


_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": _is_int,
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_SCALARS = (str, int, float, bool, type(None))


class _Unsupported(Exception):
    """The schema uses something the compiled check does not understand."""


def compile_schema(schema: dict[str, Any]) -> Check | None:
    """A function telling whether a document is valid against ``schema``, or None when the
    schema uses a keyword (or a ``$ref``) it does not understand."""
    definitions = schema.get("$defs", {})
    compiled: dict[str, Check] = {}
    try:
        if not isinstance(definitions, dict):
            raise _Unsupported
        for name, node in definitions.items():
            compiled[name] = _compile(node, definitions, compiled)
        return _compile(schema, definitions, compiled)
    except _Unsupported:
        return None


def _compile(node: Any, definitions: dict[str, Any], compiled: dict[str, Check]) -> Check:
    if node is True or node == {}:
        return lambda value: True
    if node is False:
        return lambda value: False
    if not isinstance(node, dict) or not set(node) <= _KEYWORDS | _ANNOTATIONS:
        raise _Unsupported
    checks: list[Check] = []
    if "$ref" in node:
        checks.append(_reference(node["$ref"], definitions, compiled))
    if "type" in node:
        checks.append(_type(node["type"]))
    if "enum" in node or "const" in node:
        checks.append(_one_of_values(node["enum"] if "enum" in node else [node["const"]]))
    checks.extend(_string_checks(node))
    checks.extend(_number_checks(node))
    if "items" in node:
        item = _compile(node["items"], definitions, compiled)
        checks.append(lambda v: not isinstance(v, list) or all(map(item, v)))
    if "minItems" in node:
        fewest = node["minItems"]
        if not _is_int(fewest):
            raise _Unsupported
        checks.append(lambda v: not isinstance(v, list) or len(v) >= fewest)
    if "anyOf" in node:
        if not isinstance(node["anyOf"], list) or not node["anyOf"]:
            raise _Unsupported
        options = [_compile(option, definitions, compiled) for option in node["anyOf"]]
        checks.append(lambda v: any(option(v) for option in options))
    if "propertyNames" in node:
        name_check = _compile(node["propertyNames"], definitions, compiled)
        checks.append(lambda v: not isinstance(v, dict) or all(map(name_check, v)))
    if {"properties", "required", "additionalProperties"} & set(node):
        checks.append(_object(node, definitions, compiled))
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _reference(ref: Any, definitions: dict[str, Any], compiled: dict[str, Check]) -> Check:
    # Only "#/$defs/<name>"; looked up when used, so definitions may refer to each other.
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        raise _Unsupported
    name = ref[len("#/$defs/") :]
    if "/" in name or "~" in name or "%" in name or name not in definitions:
        raise _Unsupported
    return lambda value: compiled[name](value)


def _type(kinds: Any) -> Check:
    names = [kinds] if isinstance(kinds, str) else kinds
    if not isinstance(names, list) or not names or not all(n in _TYPES for n in names):
        raise _Unsupported
    tests = [_TYPES[n] for n in names]
    if len(tests) == 1:
        return tests[0]
    return lambda value: any(test(value) for test in tests)


def _one_of_values(values: Any) -> Check:
    if not isinstance(values, list) or not all(isinstance(v, _SCALARS) for v in values):
        raise _Unsupported
    # Type and value: True is not 1 here (nor 1.0 an integer), as in JSON.
    allowed = {(type(v), v) for v in values}
    return lambda value: isinstance(value, _SCALARS) and (type(value), value) in allowed


def _number_checks(node: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    for keyword, fits in (
        ("minimum", operator.ge),
        ("maximum", operator.le),
        ("exclusiveMinimum", operator.gt),
        ("exclusiveMaximum", operator.lt),
    ):
        if keyword in node:
            bound = node[keyword]
            if not _is_number(bound):
                raise _Unsupported
            checks.append(_bounded(fits, bound))
    return checks


def _bounded(fits: Callable[[Any, Any], bool], bound: float) -> Check:
    # int and float compare exactly in Python, whatever their size.
    return lambda v: not _is_number(v) or fits(v, bound)


def _string_checks(node: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    if "pattern" in node:
        if not isinstance(node["pattern"], str):
            raise _Unsupported
        search = re.compile(node["pattern"]).search
        checks.append(lambda v: not isinstance(v, str) or search(v) is not None)
    least, most = node.get("minLength", 0), node.get("maxLength")
    if "minLength" in node or "maxLength" in node:
        if not _is_int(least) or not (most is None or _is_int(most)):
            raise _Unsupported
        checks.append(
            lambda v: (
                not isinstance(v, str) or (least <= len(v) and (most is None or len(v) <= most))
            )
        )
    return checks


def _object(node: dict[str, Any], definitions: dict[str, Any], compiled: dict[str, Check]) -> Check:
    properties = node.get("properties", {})
    required = node.get("required", [])
    extra = node.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise _Unsupported
    known = {key: _compile(sub, definitions, compiled) for key, sub in properties.items()}
    other = _compile(extra, definitions, compiled)

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        if any(key not in value for key in required):
            return False
        for key, item in value.items():
            test = known.get(key) if isinstance(key, str) else None
            if not (test(item) if test is not None else other(item)):
                return False
        return True

    return check
