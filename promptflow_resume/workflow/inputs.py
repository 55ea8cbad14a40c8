"""Input values: from ``--input name=value``, an ``--inputs`` file, a terminal, or defaults.

Every input the workflow declares or uses gets a typed value, in this order of precedence:
a given value, the declared ``default``, an answer typed on a terminal (required inputs
only), the ``${input:name:placeholder}`` text (when it fits the type), and ``None`` for an
optional input. Whatever is still missing is reported in one error::

    values = resolve_inputs(wf, {"audience": "the team"})
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..base import yamlio
from ..base.errors import FileNotFoundFlowError, InputError
from .diagnostics import did_you_mean
from .records import InputDecl, Workflow
from .values import coerce_value, type_name, value_text

#: How many times a terminal is asked again after an answer of the wrong type.
ASK_ATTEMPTS = 3

_HOW = (
    "Pass each with --input NAME=VALUE, or write them as `NAME: VALUE` lines in a YAML file "
    "and pass --inputs FILE."
)


def typed_value(decl: InputDecl, value: Any) -> Any:
    """``value`` converted to the input's type and checked against its choices."""
    typed = coerce_value(value, decl.type)
    if decl.choices is not None and typed not in decl.choices:
        options = ", ".join(value_text(c) for c in decl.choices)
        raise ValueError(f"one of: {options} (got {value_text(typed)!r})")
    return typed


def resolve_inputs(
    wf: Workflow,
    given: Mapping[str, Any],
    *,
    ask: Callable[[InputDecl], str] | None = None,
) -> dict[str, Any]:
    """Typed values for every input of ``wf``; one ``InputError`` lists all that are wrong."""
    unknown = [name for name in given if name not in wf.inputs]
    if unknown:
        takes = ", ".join(wf.inputs) or "no inputs"
        hints = "".join(did_you_mean(name, wf.inputs) for name in unknown)
        raise InputError(
            f"{wf.path} has no input {', '.join(f'`{n}`' for n in unknown)}{hints}; "
            f"it takes: {takes}.",
            hint="Check the name after --input (or the keys of the --inputs file).",
        )
    values: dict[str, Any] = {}
    problems: list[str] = []
    missing: list[InputDecl] = []
    for name, decl in wf.inputs.items():
        if name in given:
            try:
                values[name] = typed_value(decl, given[name])
            except ValueError as exc:
                problems.append(f"`{name}` must be {exc}")
            continue
        if decl.default is not None:
            values[name] = decl.default
            continue
        if decl.required and ask is not None:
            values[name] = _ask(decl, ask)
            continue
        fallback = _placeholder_value(decl)
        if fallback is not None:
            values[name] = fallback
        elif not decl.required:
            values[name] = None
        else:
            missing.append(decl)
    if problems or missing:
        parts: list[str] = []
        if problems:
            parts.append("invalid input values: " + "; ".join(problems) + ".")
        if missing:
            listed = ", ".join(_describe_missing(d) for d in missing)
            parts.append(f"missing input{'s' if len(missing) > 1 else ''}: {listed}.")
        raise InputError(" ".join(parts), path=str(wf.path), hint=_HOW)
    return values


def _placeholder_value(decl: InputDecl) -> Any:
    """The placeholder as a value, when it fits the input's type (else it is only a hint)."""
    if decl.placeholder is None or not decl.placeholder.strip():
        return None
    try:
        return typed_value(decl, decl.placeholder)
    except ValueError:
        return None


def _describe_missing(decl: InputDecl) -> str:
    details: list[str] = [decl.type] if decl.type != "string" else []
    if decl.description:
        details.append(decl.description)
    if decl.choices:
        details.append("one of " + "/".join(value_text(c) for c in decl.choices))
    return f"`{decl.name}`" + (f" ({'; '.join(details)})" if details else "")


def _ask(decl: InputDecl, ask: Callable[[InputDecl], str]) -> Any:
    shown = decl
    for _ in range(ASK_ATTEMPTS):
        answer = ask(shown).rstrip("\r\n")
        if not answer.strip():
            fallback = _placeholder_value(decl)
            if fallback is not None:
                return fallback
            shown = replace(decl, description=_with_note(decl, "a value is required"))
            continue
        try:
            return typed_value(decl, answer)
        except ValueError as exc:
            shown = replace(decl, description=_with_note(decl, f"must be {exc}"))
    raise InputError(
        f"no valid value for the input `{decl.name}` after {ASK_ATTEMPTS} tries.",
        hint=f"Pass it with --input {decl.name}=VALUE.",
    )


def _with_note(decl: InputDecl, note: str) -> str:
    return f"{note}. {decl.description}" if decl.description else note


def load_inputs_file(path: str | Path) -> dict[str, Any]:
    """Input values from a YAML (or JSON) file of ``name: value`` lines."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundFlowError(
            f"the inputs file {file} does not exist.",
            path=str(file),
            hint="Check the path given to --inputs.",
        )
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(
            "the inputs file is not UTF-8 text.", path=str(file), hint="Save it as UTF-8."
        ) from None
    except OSError as exc:  # a folder, no permission
        raise InputError(
            f"the inputs file cannot be read ({exc.strerror or exc}).",
            path=str(file),
            hint="Pass a readable YAML or JSON file to --inputs.",
        ) from None
    if file.suffix.lower() == ".json":
        try:
            data = json.loads(text) if text.strip() else {}
            too_deep = _deeper_than(data, yamlio.MAX_DEPTH)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"invalid JSON: {exc.msg}.", path=str(file), line=exc.lineno, column=exc.colno
            ) from None
        except RecursionError:  # nested past what the JSON reader can follow
            too_deep = True
        if too_deep:
            # The same limit as YAML files (yamlio): values this deep are not inputs.
            raise InputError(
                f"the JSON nests values more than {yamlio.MAX_DEPTH} levels deep.",
                path=str(file),
                hint="Flatten the values; inputs are strings, numbers, booleans and lists.",
            )
    else:
        data = yamlio.load(text, path=str(file)) if text.strip() else {}
    if data is None:
        data = {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise InputError(
            f"the inputs file must map input names to values, not a {type_name(data)}.",
            path=str(file),
            hint="Write one `name: value` line per input.",
        )
    return data


def _deeper_than(value: Any, limit: int) -> bool:
    """True when lists and mappings in ``value`` nest more than ``limit`` levels."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, (dict, list)):
            if depth > limit:
                return True
            stack.extend(
                (v, depth + 1) for v in (current.values() if isinstance(current, dict) else current)
            )
    return False
