"""Model-chosen shell commands (``run_in_terminal``) and the test tools (``runTests``,
``testFailure``).

``run_in_terminal`` runs the shell command the model wrote, with ``sh -c`` in the workspace
root, only with consent (``tools.consent``); a refusal is a result the model reads. It is never
idempotent: one in flight when a run stopped is left to a person (``needs_review``). It runs
like a declared command (``tools.commands.run_process``): own session, stdin at ``/dev/null``,
timeout then the whole process group stopped, output capped with the whole output in a
sidecar, and an environment of ``PATH``, ``HOME``, ``LANG``, ``LC_ALL``, ``TERM`` and
``TMPDIR`` only, so keys and tokens are not handed to a command the workflow never saw.

``runTests`` runs the workflow's declared test command (the command named ``test``,
``tests`` or ``run_tests`` under ``commands:``); ``testFailure`` runs it too and returns its
output only when a test fails. Without a declared test command both say so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..chat import ToolSpec
from ..workflow.records import CommandDecl, Workflow
from .builtin import _object_schema, error_result, signature, validate_arguments
from .declared import CommandTool, format_result, run_process
from .tool import Standalone, ToolContext, ToolResult

#: Default limits of a model-chosen command.
TERMINAL_TIMEOUT = 120.0
TERMINAL_MAX_OUTPUT = 65536
#: The only environment variables a model-chosen command sees.
TERMINAL_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR")
#: Declared command names taken as the workflow's test command, in this order.
TEST_COMMAND_NAMES = ("test", "tests", "run_tests")


class RunInTerminal(Standalone):
    """``run_in_terminal {command, explanation?}``: a shell command, with consent."""

    idempotent = False
    spec = ToolSpec(
        name="run_in_terminal",
        description=(
            "Run a shell command in the workspace root (sh -c) and return its exit code and "
            "output. The user must allow each command; a refused command is not run."
        ),
        parameters=_object_schema(
            {
                "command": {"type": "string", "minLength": 1, "description": "The command line."},
                "explanation": {
                    "type": "string",
                    "description": "One sentence on why, shown to the user when asked.",
                },
            },
            ["command"],
        ),
    )

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Ask for consent, then run the command once."""
        problem = validate_arguments(self.spec.parameters, arguments)
        if problem is not None:
            return error_result(f"{problem}. Expected: {signature(self.spec)}.")
        command: str = arguments["command"].strip()
        if "\x00" in command:
            return error_result("the command contains a NUL character")
        decision = ctx.consent.command(command) if ctx.consent is not None else None
        if decision is None or not decision.allowed:
            why = decision.how if decision is not None else "nobody can be asked"
            return ToolResult(
                f"the command was not run: the user did not allow it ({why}). Do without it, "
                "or ask the user to allow it (e.g. flow resume --allow-commands 'PATTERN').",
                is_error=True,
            )
        root = Path(ctx.workspace)
        env = {name: ctx.env.get(name, os.environ.get(name, "")) for name in TERMINAL_ENV}
        env = {k: v for k, v in env.items() if v}
        env.setdefault("PATH", os.defpath)
        try:
            outcome = run_process(
                ["sh", "-c", command], cwd=root, env=env, timeout=TERMINAL_TIMEOUT
            )
        except OSError as exc:
            return error_result(f"the shell could not start: {exc.strerror or exc}")
        return format_result(outcome, max_output=TERMINAL_MAX_OUTPUT)


def declared_test_command(workflow: Workflow) -> CommandDecl | None:
    """The workflow's declared test command, or None."""
    return next((workflow.commands[n] for n in TEST_COMMAND_NAMES if n in workflow.commands), None)


_NO_TESTS = (
    "no test command is declared in this workflow, so no tests can be run here; the workflow "
    "can declare one under `commands:` named `test`"
)


class RunTests:
    """``runTests {}``: run the workflow's declared test command."""

    spec = ToolSpec(
        name="runTests",
        description="Run the project's tests (the workflow's declared test command).",
        parameters=_object_schema({}, []),
    )

    def __init__(self, workflow: Workflow, workspace: Path) -> None:
        """Find the test command among ``workflow``'s declared commands."""
        decl = declared_test_command(workflow)
        self.command = CommandTool(decl, workspace) if decl is not None else None
        self.idempotent = decl.idempotent if decl is not None else True

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """The test command's result, or a note that none is declared."""
        if self.command is None:
            return ToolResult(_NO_TESTS, is_error=True)
        return self.command.run({}, ctx)


class FailingTests(RunTests):
    """``testFailure {}``: the test command's output when a test fails."""

    spec = ToolSpec(
        name="testFailure",
        description="Run the project's tests and show the failures, if any.",
        parameters=_object_schema({}, []),
    )

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """The failing run's output, or a line saying every test passes."""
        result = super().run(arguments, ctx)
        if self.command is not None and not result.is_error:
            return ToolResult("no test fails: the test command exited 0")
        return result
