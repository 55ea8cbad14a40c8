"""The variables a workflow's body uses (``${input:…}``, ``${step:…}``, editor ones), each
checked where it stands, and the inputs the workflow takes from them (docs/spec.md 1.5)::

    uses, inputs = check_variables(text, body, index, steps, col, declared={}, has_block=False)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from .body import ParsedBody
from .diagnostics import Collector, did_you_mean
from .records import InputDecl, Step, VariableUse
from .source import LineIndex
from .variables import SELECTION_VARIABLES, scan


def check_variables(
    text: str,
    body: ParsedBody,
    index: LineIndex,
    steps: list[Step],
    col: Collector,
    *,
    declared: dict[str, InputDecl],
    has_block: bool,
) -> tuple[list[VariableUse], dict[str, InputDecl]]:
    """Every variable used in the body ``text`` (checked where it stands) and the inputs the
    workflow takes: those ``declared``, then those only used (warned about when the file
    ``has_block`` of ``inputs:`` that could have declared them)."""
    order = {step.id: i for i, step in enumerate(steps)}
    uses: list[VariableUse] = []
    placeholders: dict[str, tuple[str, int, int]] = {}
    for token in scan(text):
        line, column = index.position(token.start)
        owner_at = _owner_at(body, token.start)
        owner = steps[owner_at].id if owner_at is not None else None
        if token.kind == "input":
            if token.problem:
                # VS Code accepts such a file; it is left as text here rather than refused.
                col.warning(
                    f"`{token.text}` has no valid input name, so it is sent as written; write "
                    "${input:name} or ${input:name:placeholder} with a name of letters, digits, "
                    "_ and - to ask for a value.",
                    line=line,
                    column=column,
                    code="variable",
                )
                continue
            if token.placeholder is not None:
                first = placeholders.setdefault(token.name, (token.placeholder, line, column))
                if first[0] != token.placeholder:
                    col.warning(
                        f"`{token.text}` gives another placeholder than line {first[1]} "
                        f"(`{first[0]}`); the first one is used.",
                        line=line,
                        column=column,
                        code="variable",
                    )
        elif token.kind == "step":
            if not _step_ref_ok(token.name, owner_at, order, line, column, col):
                continue
        elif token.kind == "editor":
            if token.name in SELECTION_VARIABLES:
                col.warning(
                    f"`{token.text}` is the editor's selection: pass --selection TEXT or "
                    "--selection @FILE when running.",
                    line=line,
                    column=column,
                    code="editor-variable",
                )
        else:
            if token.problem:
                col.warning(
                    f"`{token.text}` is not a flow variable and is sent as written; "
                    f"{token.problem}",
                    line=line,
                    column=column,
                    code="variable",
                )
            continue
        uses.append(
            VariableUse(
                kind=cast(Any, token.kind),
                name=token.name,
                text=token.text,
                line=line,
                column=column,
                step=owner,
                placeholder=token.placeholder,
            )
        )
    inputs = _inputs(declared, has_block, uses, placeholders, col)
    return uses, inputs


def _owner_at(body: ParsedBody, start: int) -> int | None:
    """The index of the step whose text holds offset ``start``; None in the shared context."""
    owner_at = next((i for i, raw in enumerate(body.steps) if raw.start <= start < raw.end), None)
    return None if owner_at is not None and start < body.context_end else owner_at


def _step_ref_ok(
    name: str,
    owner_at: int | None,
    order: dict[str, int],
    line: int,
    column: int,
    col: Collector,
) -> bool:
    if owner_at is None:
        col.error(
            f"${{step:{name}}} is in the shared context, which every step sees before any "
            "step has run; use it inside a later step.",
            line=line,
            column=column,
            code="step-ref",
        )
        return False
    target = order.get(name)
    if target is None:
        col.error(
            f"${{step:{name}}} names no step{did_you_mean(name, order)}; step ids: "
            f"{', '.join(order)}.",
            line=line,
            column=column,
            code="step-ref",
        )
        return False
    if target >= owner_at:
        what = "itself" if target == owner_at else "a later step"
        col.error(
            f"${{step:{name}}} refers to {what}; a step can only use the output of steps "
            "before it.",
            line=line,
            column=column,
            code="step-ref",
        )
        return False
    return True


def _inputs(
    declared: dict[str, InputDecl],
    has_block: bool,
    uses: list[VariableUse],
    placeholders: dict[str, tuple[str, int, int]],
    col: Collector,
) -> dict[str, InputDecl]:
    inputs: dict[str, InputDecl] = {}
    for name, decl in declared.items():
        placeholder = decl.placeholder
        if placeholder is None and name in placeholders:
            placeholder = placeholders[name][0]
        inputs[name] = replace(decl, placeholder=placeholder)
    seen_undeclared: set[str] = set()
    for use in uses:
        if use.kind != "input" or use.name in declared or use.name in seen_undeclared:
            continue
        seen_undeclared.add(use.name)
        placeholder = placeholders.get(use.name, (None,))[0]
        inputs[use.name] = InputDecl(
            name=use.name, type="string", placeholder=placeholder, declared=False
        )
        if has_block:
            col.warning(
                f"the input `{use.name}` is used but not declared under `inputs:`"
                f"{did_you_mean(use.name, declared)}; it is taken as a required string.",
                line=use.line,
                column=use.column,
                code="undeclared-input",
            )
    used = {u.name for u in uses if u.kind == "input"}
    for name in declared:
        if name not in used:
            col.warning(
                f"the input `{name}` is declared but no ${{input:{name}}} uses it.",
                field=f"$.inputs.{name}",
                code="unused-input",
            )
    return inputs
