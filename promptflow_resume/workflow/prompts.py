"""The text a run sends: the shared context (system message) and each step's user turn.

A prompt step's user turn is ``## <title>`` followed by the step's text; a file without step
headings sends its whole body as the one user turn. Variables are filled in last::

    system = context_prompt(wf, inputs=values, editor=editor)
    user = step_prompt(wf, wf.steps[0], inputs=values, step_outputs={}, editor=editor)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..base.errors import InputError
from .commands import check_arguments, fill_argv
from .records import Step, Workflow
from .stephash import step_template
from .variables import EDITOR_VARIABLES, render_text


def context_prompt(wf: Workflow, *, inputs: Mapping[str, Any], editor: Mapping[str, str]) -> str:
    """The shared context with variables filled in ("" when the workflow has none)."""
    return render_text(wf.context, inputs=inputs, step_outputs={}, editor=editor)


def step_prompt(
    wf: Workflow,
    step: Step,
    *,
    inputs: Mapping[str, Any],
    step_outputs: Mapping[str, str],
    editor: Mapping[str, str],
) -> str:
    """The user turn for ``step`` (for a human step: the question; a command step: "")."""
    return render_text(step_template(step), inputs=inputs, step_outputs=step_outputs, editor=editor)


def step_tools(wf: Workflow, step: Step) -> tuple[str, ...]:
    """Names of the tools the model may call in ``step`` (none for command and human steps)."""
    if step.kind != "prompt":
        return ()
    return step.tools if step.tools is not None else wf.tools


def step_command_args(
    wf: Workflow,
    step: Step,
    *,
    inputs: Mapping[str, Any],
    step_outputs: Mapping[str, str],
    editor: Mapping[str, str],
) -> dict[str, Any]:
    """A command step's ``run:`` arguments, variables filled in, typed and completed."""
    cmd = wf.commands.get(step.command or "")
    if cmd is None:
        raise InputError(f"step `{step.id}` runs no declared command.", path=str(wf.path))
    rendered = {
        name: render_text(str(value), inputs=inputs, step_outputs=step_outputs, editor=editor)
        for name, value in step.command_args.items()
    }
    return check_arguments(cmd, rendered)


def step_workflow_inputs(
    wf: Workflow,
    step: Step,
    *,
    inputs: Mapping[str, Any],
    step_outputs: Mapping[str, str],
    editor: Mapping[str, str],
) -> dict[str, Any]:
    """A workflow step's ``inputs:`` values, variables filled in, typed for its sub-workflow."""
    from .inputs import resolve_inputs

    if step.child is None:
        raise InputError(f"step `{step.id}` runs no loaded workflow.", path=str(wf.path))
    rendered = {
        name: render_text(str(value), inputs=inputs, step_outputs=step_outputs, editor=editor)
        for name, value in step.workflow_inputs.items()
    }
    return resolve_inputs(step.child, rendered, ask=None)


def step_argv(
    wf: Workflow,
    step: Step,
    *,
    inputs: Mapping[str, Any],
    step_outputs: Mapping[str, str],
    editor: Mapping[str, str],
) -> list[str]:
    """The argv a command step executes."""
    args = step_command_args(wf, step, inputs=inputs, step_outputs=step_outputs, editor=editor)
    return fill_argv(wf.commands[step.command or ""], args)


def validate_editor(wf: Workflow, editor: Mapping[str, str]) -> None:
    """Raise one ``InputError`` naming every editor variable the workflow uses without a value.

    Call before the first model request, so a missing ``--file`` is reported up front.
    """
    missing = sorted({v.name for v in wf.variables if v.kind == "editor"} - set(editor))
    if missing:
        listed = ", ".join(f"${{{name}}} ({EDITOR_VARIABLES[name]})" for name in missing)
        raise InputError(
            f"{wf.path} uses editor variables that have no value here: {listed}.",
            path=str(wf.path),
            hint="Give them on the command line and run again.",
        )
