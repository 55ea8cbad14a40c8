"""The house's size rules: no function over 80 lines, no module over 600 (docs: README,
Development). A long function hides its steps and a long module its concepts; split either by
what it does, into units a newcomer finds by name."""

from __future__ import annotations

import ast

from tests.support import REPO

PACKAGE = REPO / "promptflow_resume"
#: The most lines a function or method may take, from ``def`` to its last line.
LONGEST_FUNCTION = 80
#: The most lines a module may take.
LONGEST_MODULE = 600


def _sources() -> list[tuple[str, str]]:
    return [
        (path.relative_to(REPO).as_posix(), path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def test_no_module_is_over_600_lines() -> None:
    long = [
        f"{name}: {text.count(chr(10))} lines"
        for name, text in _sources()
        if text.count("\n") > LONGEST_MODULE
    ]
    assert long == [], "split these modules by concept:\n" + "\n".join(long)


def test_no_function_is_over_80_lines() -> None:
    long = []
    for name, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST_FUNCTION:
                    long.append(f"{name}:{node.lineno}: {node.name} has {length} lines")
    assert long == [], "split these functions into named steps:\n" + "\n".join(long)
