"""What starts a run and a step in the transcript: the shared context (the run's first,
system entry), a step's prompt (with a handoff part's system text), or a command step's call.

    record_context(workflow, run, options, points)              # once, for a new run
    points.append(opening_entries(workflow, run, step, options, points))
"""

from __future__ import annotations

import json

from ..progress.model import Entry, Run
from ..workflow import context_prompt, step_command_args, step_prompt
from ..workflow.records import Step, Workflow
from ..workflow.skillset import skills_block
from .checkpoints import Checkpoints
from .engineoptions import EngineOptions
from .handoffs import part_system
from .stepoutputs import step_outputs


def opening_entries(
    workflow: Workflow, run: Run, step: Step, options: EngineOptions, points: Checkpoints
) -> list[Entry]:
    """The entries that start a step: its prompt, or for a command step the call itself."""
    if step.kind == "command":
        values = step_command_args(
            workflow,
            step,
            inputs=run.inputs,
            step_outputs=step_outputs(workflow, run),
            editor=options.editor,
        )
        arguments = json.dumps(values, sort_keys=True, ensure_ascii=False)
        return [
            points.entry(
                "tool_call",
                arguments,
                step.id,
                call_id=f"{step.id}-command",
                tool=step.command,
            )
        ]
    outputs = step_outputs(workflow, run)
    text = step_prompt(
        workflow,
        step,
        inputs=run.inputs,
        step_outputs=outputs,
        editor=options.editor,
    )
    opening = [points.entry("user", text, step.id)]
    if step.system is not None:
        # A handoff chain's part: its agent's instructions are the system text from here
        # on, recorded with its prompt in one write (``handoffs.latest_system``).
        system = part_system(
            step,
            inputs=run.inputs,
            step_outputs=outputs,
            editor=options.editor,
            instructions=options.instructions,
        )
        opening.insert(0, points.entry("system", system, step.id))
    return opening


def record_context(
    workflow: Workflow, run: Run, options: EngineOptions, points: Checkpoints
) -> None:
    """Record the shared context as the first (system) entry of a new run."""
    if run.transcript:
        return
    text = context_prompt(workflow, inputs=run.inputs, editor=options.editor)
    for extra in (options.instructions, skills_block(options.skills)):
        if extra:
            text = f"{text.rstrip()}\n\n{extra}" if text.strip() else extra
    if text.strip():
        points.append([points.entry("system", text, None)])
