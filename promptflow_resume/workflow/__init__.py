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

from typing import TYPE_CHECKING

from ..base.lazyexports import lazy_exports

#: Public name -> the module of this package that defines it. Imported on first use, so a
#: module that needs only the records (``workflow.model``) does not load the Markdown parser.
_EXPORTS: dict[str, str] = {
    "check_arguments": "commands",
    "command_tool_spec": "commands",
    "fill_argv": "commands",
    "HASH_PREFIX": "hashing",
    "short_hash": "hashing",
    "load_inputs_file": "inputs",
    "resolve_inputs": "inputs",
    "typed_value": "inputs",
    "check_workflow": "loader",
    "load_workflow": "loader",
    "parse_workflow": "loader",
    "workflow_files": "loader",
    "Budget": "records",
    "CommandDecl": "records",
    "Diagnostic": "records",
    "InputDecl": "records",
    "Step": "records",
    "VariableUse": "records",
    "Workflow": "records",
    "context_prompt": "prompts",
    "step_argv": "prompts",
    "step_command_args": "prompts",
    "step_prompt": "prompts",
    "step_tools": "prompts",
    "step_workflow_inputs": "prompts",
    "validate_editor": "prompts",
    "step_template": "stephash",
    "IMPLICIT_STEP_ID": "steps",
    "EDITOR_VARIABLES": "variables",
    "editor_variables": "variables",
    "render_text": "variables",
}

if TYPE_CHECKING:
    from .commands import check_arguments, command_tool_spec, fill_argv
    from .hashing import HASH_PREFIX, short_hash
    from .inputs import load_inputs_file, resolve_inputs, typed_value
    from .loader import check_workflow, load_workflow, parse_workflow, workflow_files
    from .prompts import (
        context_prompt,
        step_argv,
        step_command_args,
        step_prompt,
        step_tools,
        step_workflow_inputs,
        validate_editor,
    )
    from .records import (
        Budget,
        CommandDecl,
        Diagnostic,
        InputDecl,
        Step,
        VariableUse,
        Workflow,
    )
    from .stephash import step_template
    from .steps import IMPLICIT_STEP_ID
    from .variables import EDITOR_VARIABLES, editor_variables, render_text


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "EDITOR_VARIABLES",
    "HASH_PREFIX",
    "IMPLICIT_STEP_ID",
    "Budget",
    "CommandDecl",
    "Diagnostic",
    "InputDecl",
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
    "parse_workflow",
    "render_text",
    "resolve_inputs",
    "short_hash",
    "step_argv",
    "step_command_args",
    "step_prompt",
    "step_template",
    "step_tools",
    "step_workflow_inputs",
    "typed_value",
    "validate_editor",
    "workflow_files",
]
