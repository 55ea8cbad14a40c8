"""Variables in prompt text: ``${input:x}``, ``${input:x:placeholder}``, ``${step:id}``, and
the editor variables of VS Code prompt files (``${file}``, ``${workspaceFolder}`` ...).

Only these forms are flow's; any other ``${...}`` (a shell variable in a code block, say) is
left exactly as written. Substitution is one pass: a value that itself contains ``${...}`` is
never expanded again::

    render_text("Hi ${input:who:you}", inputs={"who": "Ada"}, step_outputs={}, editor={})
    # 'Hi Ada'
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import InputError
from .values import value_text

VARIABLE = re.compile(r"\$\{([^{}\n]*)\}")
INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")

#: Editor variables flow knows, and how each gets a value outside an editor.
EDITOR_VARIABLES: dict[str, str] = {
    "workspaceFolder": "the workspace folder (the current directory)",
    "workspaceFolderBasename": "the workspace folder's name",
    "file": "pass --file PATH",
    "fileBasename": "pass --file PATH",
    "fileBasenameNoExtension": "pass --file PATH",
    "fileDirname": "pass --file PATH",
    "fileExtname": "pass --file PATH",
    "relativeFile": "pass --file PATH",
    "relativeFileDirname": "pass --file PATH",
    "selection": "pass --selection TEXT or --selection @FILE",
    "selectedText": "pass --selection TEXT or --selection @FILE",
}
#: Editor variables that always have a value in a terminal.
ALWAYS_RESOLVED: frozenset[str] = frozenset({"workspaceFolder", "workspaceFolderBasename"})
FILE_VARIABLES: frozenset[str] = frozenset(
    name for name, how in EDITOR_VARIABLES.items() if how == "pass --file PATH"
)
SELECTION_VARIABLES: frozenset[str] = frozenset({"selection", "selectedText"})


@dataclass(frozen=True)
class Token:
    """One ``${...}`` occurrence: its kind (input, step, editor, other), name and offsets."""

    kind: str
    name: str
    text: str
    start: int
    end: int
    placeholder: str | None = None
    #: For kind "other": why it was not recognised (e.g. a near miss of a flow variable).
    problem: str | None = None


def scan(text: str) -> Iterator[Token]:
    """Every ``${...}`` in ``text``, classified."""
    for match in VARIABLE.finditer(text):
        inner = match.group(1)
        start, end = match.span()
        head, colon, rest = inner.partition(":")
        if colon and head == "input":
            name, has_placeholder, placeholder = rest.partition(":")
            problem = None if INPUT_NAME.match(name.strip()) else "bad-input-name"
            yield Token(
                "input",
                name.strip(),
                match.group(0),
                start,
                end,
                placeholder if has_placeholder else None,
                problem,
            )
        elif colon and head == "step":
            yield Token("step", rest.strip(), match.group(0), start, end)
        elif inner in EDITOR_VARIABLES:
            yield Token("editor", inner, match.group(0), start, end)
        else:
            yield Token("other", inner, match.group(0), start, end, problem=_near_miss(inner))


def _near_miss(inner: str) -> str | None:
    """A hint when ``inner`` looks like a misspelt flow variable (not a shell variable)."""
    head = inner.partition(":")[0]
    if head.lower() in ("input", "step") and head not in ("input", "step"):
        return f"write `{head.lower()}:` in lower case"
    lowered = {name.lower(): name for name in EDITOR_VARIABLES}
    if inner.lower() in lowered:
        return f"did you mean `${{{lowered[inner.lower()]}}}`?"
    return None


def editor_variables(
    workspace: Path, file: Path | None = None, selection: str | None = None
) -> dict[str, str]:
    """Values of the editor variables that a terminal run can know."""
    root = Path(os.path.abspath(workspace))
    values = {"workspaceFolder": str(root), "workspaceFolderBasename": root.name}
    if file is not None:
        path = Path(os.path.abspath(root / file))
        try:
            relative = path.relative_to(root).as_posix()
        except ValueError:
            relative = path.as_posix()
        values.update(
            file=str(path),
            fileBasename=path.name,
            fileBasenameNoExtension=path.stem,
            fileDirname=str(path.parent),
            fileExtname=path.suffix,
            relativeFile=relative,
            relativeFileDirname=os.path.dirname(relative) or ".",
        )
    if selection is not None:
        values.update(selection=selection, selectedText=selection)
    return values


def render_text(
    text: str,
    *,
    inputs: Mapping[str, Any],
    step_outputs: Mapping[str, str],
    editor: Mapping[str, str],
) -> str:
    """``text`` with flow's variables replaced; other ``${...}`` stay as written.

    A variable without a value is an ``InputError`` naming every one that is missing and how to
    give it (the checker has already refused references to later or unknown steps).
    """
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        token = next(scan(match.group(0)))
        if token.kind == "input" and token.problem is None:
            if token.name in inputs:
                return value_text(inputs[token.name])
            missing.append(f"{token.text} (pass --input {token.name}=VALUE)")
        elif token.kind == "step":
            if token.name in step_outputs:
                return step_outputs[token.name]
            missing.append(f"{token.text} (the step `{token.name}` has no output yet)")
        elif token.kind == "editor":
            if token.name in editor:
                return editor[token.name]
            missing.append(f"{token.text} ({EDITOR_VARIABLES[token.name]})")
        return match.group(0)

    rendered = VARIABLE.sub(replace, text)
    if missing:
        unique = list(dict.fromkeys(missing))
        raise InputError(
            f"no value for {', '.join(unique)}.",
            hint="Give the values and run again.",
        )
    return rendered
