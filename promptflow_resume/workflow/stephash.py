"""The content hashes of a loaded workflow and its steps (docs/spec.md 1.9).

A step's hash covers what it sends and runs (its template, the shared context, the provider,
model, parameters and tools it is given), so a resumed run knows which steps changed::

    steps = hash_steps(steps, context, cfg)
    workflow_hash(context, steps, inputs, cfg)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .commands import command_definition
from .config import WorkflowSettings, model_choice
from .hashing import digest
from .records import InputDecl, Step


def step_template(step: Step) -> str:
    """The text a step sends before variables are filled in (what its hash covers)."""
    if step.kind in ("command", "workflow"):
        return ""
    if step.heading is None:
        return step.body
    if step.kind == "human":
        return step.body or step.title
    return f"## {step.title}\n\n{step.body}" if step.body else f"## {step.title}"


def _tool_definitions(names: tuple[str, ...], cfg: WorkflowSettings) -> list[dict[str, Any]]:
    return [
        command_definition(cfg.commands[n]) if n in cfg.commands else {"builtin": n} for n in names
    ]


def hashed_provider(cfg: WorkflowSettings) -> str | None:
    """The provider the hashes cover: what the file says (``provider:``, or the provider a
    display name of ``model:`` stands for), not what an id's family suggests, so a file's
    hashes do not change when flow learns a family (a run of it resumes as unchanged)."""
    if cfg.provider_named:
        return cfg.provider
    said = (r.provider for r in cfg.model_refs if r.source in ("table", "config") and r.runnable)
    return next(said, None)


def hash_steps(steps: list[Step], context: str, cfg: WorkflowSettings) -> list[Step]:
    """The steps with their ``hash`` filled in: what each sends and runs, with the
    shared context and the settings that change a step's reply."""
    hashed: list[Step] = []
    for step in steps:
        tools = step.tools if step.tools is not None else cfg.tools
        payload: dict[str, Any] = {
            "kind": step.kind,
            "template": step_template(step),
            "context": context,
        }
        if step.kind == "prompt":
            payload.update(
                provider=hashed_provider(cfg),
                model=model_choice(cfg),
                params=cfg.params,
                tools=_tool_definitions(tools, cfg),
                max_turns=step.max_turns,
            )
        elif step.kind == "command":
            cmd = cfg.commands.get(step.command or "")
            payload.update(
                command=command_definition(cmd) if cmd else step.command,
                args=step.command_args,
            )
        elif step.kind == "workflow":
            # The child's own hash is part of this step's: a changed child is a changed step.
            payload.update(
                workflow=step.workflow,
                inputs=step.workflow_inputs,
                child=step.child.hash if step.child is not None else None,
            )
        hashed.append(replace(step, hash=digest(payload)))
    return hashed


def workflow_hash(
    context: str, steps: list[Step], inputs: dict[str, InputDecl], cfg: WorkflowSettings
) -> str:
    """The workflow's hash: its context, its steps' hashes, inputs, commands and settings."""
    return digest(
        {
            "context": context,
            "steps": [[s.id, s.hash] for s in steps],
            "inputs": {
                name: {
                    "type": d.type,
                    "default": d.default,
                    "required": d.required,
                    "placeholder": d.placeholder,
                    "choices": list(d.choices) if d.choices is not None else None,
                }
                for name, d in sorted(inputs.items())
            },
            "commands": {n: command_definition(c) for n, c in sorted(cfg.commands.items())},
            "tools": list(cfg.tools),
            "provider": hashed_provider(cfg),
            "model": model_choice(cfg),
            "params": cfg.params,
        }
    )
