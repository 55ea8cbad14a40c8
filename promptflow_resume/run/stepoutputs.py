"""The ``${step:ID}`` values a later prompt, command or sub-workflow reads: each completed
step's output as the run recorded it.

    step_outputs(workflow, run)   # {"plan": "the plan's final answer", "test": "stdout…"}
"""

from __future__ import annotations

from ..progress.model import Run
from ..tools.declared import command_output
from ..workflow.records import Workflow
from .conversation import skipped_output


def step_outputs(workflow: Workflow, run: Run) -> dict[str, str]:
    """``${step:id}`` values: a step's final answer, or for a command step its stdout."""
    outputs: dict[str, str] = {}
    for step_id, state in run.steps.items():
        if state.status == "skipped":
            # A note rather than "": the prompt that uses it says plainly what is missing.
            outputs[step_id] = skipped_output(step_id)
            continue
        entry = run.entry(state.output_entry) if state.output_entry else None
        if entry is not None:
            source = workflow.step(step_id)
            is_command = entry.role == "tool_result" and not (
                source is not None and source.kind == "workflow"
            )
            outputs[step_id] = command_output(entry.content) if is_command else entry.content
    return outputs
