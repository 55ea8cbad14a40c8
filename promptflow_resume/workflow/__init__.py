"""Workflow files (``*.prompt.md``): load, check, fill in variables, hash.

A workflow is a VS Code / Copilot prompt file plus flow's extensions; ``docs/spec.md``
section 1 is the format. The engine calls::

    wf = load_workflow("workflows/release-notes.prompt.md")
    values = resolve_inputs(wf, {"audience": "the team"}, ask=None)
    editor = editor_variables(Path.cwd(), file=None)
    system = context_prompt(wf, inputs=values, editor=editor)
    for step in wf.steps:
        user = step_prompt(wf, step, inputs=values, step_outputs=outputs, editor=editor)
"""

from __future__ import annotations

from .commands import check_arguments, command_tool_spec, fill_argv
from .hashing import HASH_PREFIX, normalize_text, short_hash
from .inputs import load_inputs_file, resolve_inputs, typed_value
from .loader import IMPLICIT_STEP_ID, check_workflow, load_workflow, parse_workflow, step_template
from .model import (
    Budget,
    CommandDecl,
    Diagnostic,
    InputDecl,
    RetryPolicy,
    Step,
    VariableUse,
    Workflow,
)
from .prompts import (
    context_prompt,
    step_argv,
    step_command_args,
    step_prompt,
    step_tools,
    validate_editor,
)
from .values import parse_duration
from .variables import EDITOR_VARIABLES, editor_variables, render_text

__all__ = [
    "EDITOR_VARIABLES",
    "HASH_PREFIX",
    "IMPLICIT_STEP_ID",
    "Budget",
    "CommandDecl",
    "Diagnostic",
    "InputDecl",
    "RetryPolicy",
    "Step",
    "VariableUse",
    "Workflow",
    "check_arguments",
    "check_workflow",
    "command_tool_spec",
    "context_prompt",
    "editor_variables",
    "fill_argv",
    "load_inputs_file",
    "load_workflow",
    "normalize_text",
    "parse_duration",
    "parse_workflow",
    "render_text",
    "resolve_inputs",
    "short_hash",
    "step_argv",
    "step_command_args",
    "step_prompt",
    "step_template",
    "step_tools",
    "typed_value",
    "validate_editor",
]
