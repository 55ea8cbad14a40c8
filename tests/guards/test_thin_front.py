"""The library API stays a thin front and the run commands hold no policy of their own.

``api.py`` assembles: the steps of a start and a resume live in ``starting``/``resuming``,
the attempt both take in ``attempt``, what one call shares with the others in one
``RunOptions`` record. ``flow run``/``resume``/``status`` parse, call the library, print: they
import neither the engine nor the resume machinery nor the progress file's internals.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests import support

PACKAGE = support.REPO / "promptflow_resume"

#: What assembles a run: a function longer than this is doing a step's job.
LONGEST_FUNCTION = 60


def _functions(path: Path) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name: node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    return len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)


def test_api_is_short_and_its_calls_take_an_options_record_and_a_request() -> None:
    api = PACKAGE / "api.py"
    assert len(api.read_text(encoding="utf-8").splitlines()) <= 500
    functions = _functions(api)
    long = {
        name: node.end_lineno - node.lineno + 1
        for name, node in functions.items()
        if node.end_lineno is not None and node.end_lineno - node.lineno + 1 > LONGEST_FUNCTION
    }
    assert long == {}, f"functions over {LONGEST_FUNCTION} lines in api.py: {long}"
    # start: request + options; resume: path + options + request.
    assert _parameters(functions["start_run"]) <= 2
    assert _parameters(functions["resume_run"]) <= 3


def test_the_run_steps_are_named_functions_of_at_most_60_lines() -> None:
    for module in ("run/start.py", "run/resume.py", "run/attempt.py", "front.py"):
        for name, node in _functions(PACKAGE / module).items():
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            assert length <= LONGEST_FUNCTION, f"{module}: {name} has {length} lines"


def _imported(path: Path) -> set[str]:
    """The package modules a CLI module imports (relative imports from ``cli``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.level == 2:
                found.add(node.module)
            elif node.level == 0 and node.module.startswith("promptflow_resume."):
                found.add(node.module.removeprefix("promptflow_resume."))
    return found


def test_the_run_commands_import_no_engine_resume_machinery_or_progress_internals() -> None:
    imported = _imported(PACKAGE / "cli" / "commands_run.py")
    machinery = {
        "run.engine",
        "run.subworkflows",
        "run.reconcile",
        "run.recovery",
        "batch.checkpoint",
    }
    assert imported & machinery == set()
    # The progress file's records may be named; how it is parsed, rendered or stored not.
    internals = {m for m in imported if m.startswith("progress") and m != "progress.model"}
    assert internals == set()
    # The rules they held are the library's.
    assert {"api", "front"} <= imported
