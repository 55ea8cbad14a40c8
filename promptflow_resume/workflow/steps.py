"""The steps of a workflow, built from its body's headings: ids, kinds, tools and commands.

The body parser (``body.parse_body``) finds the raw steps; this module turns them into
checked ``Step`` records, reporting every problem to the collector::

    steps = build_steps(raws, cfg, data, col, default_title="review", load_child=load)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ..base.errors import InputError
from ..base.textnorm import normalize_text
from .body import ID_PATTERN, RawStep, slugify
from .commands import check_argument
from .config import WorkflowSettings, mode_tools, resolve_tool
from .diagnostics import Collector, did_you_mean
from .records import Step, StepKind, Workflow
from .toolnames import BUILTIN_TOOLS

#: The id of the one step of a file without step headings.
IMPLICIT_STEP_ID = "main"


def build_steps(
    raws: list[RawStep],
    cfg: WorkflowSettings,
    data: dict[str, Any],
    col: Collector,
    *,
    default_title: str,
    load_child: Callable[[RawStep], Workflow | None],
) -> list[Step]:
    """The ``Step`` records of the body's raw steps, each checked (ids, numbers, kinds, tools,
    commands); ``load_child`` loads the sub-workflow a step runs. Hashes are left empty."""
    ids = _assign_ids(raws, col)
    steps: list[Step] = []
    last_number = 0
    for n, (raw, step_id) in enumerate(zip(raws, ids, strict=True), start=1):
        if raw.number is not None:
            if raw.number <= last_number:
                col.warning(
                    f"step number {raw.number} does not follow step {last_number}; steps run in "
                    "file order, so renumber them to avoid confusion.",
                    line=raw.line,
                    column=raw.column,
                    code="step-number",
                )
            last_number = raw.number
        directive = raw.directive
        kind = _step_kind(raw, col)
        tools: tuple[str, ...] | None = None
        if directive.tools is not None:
            if kind != "prompt":
                _directive_error(col, raw, "tools", f"a {kind} step calls no model, so no tools.")
            tools = _resolve_step_tools(directive.tools, cfg, col)
            tools = mode_tools(tools, cfg.commands, data)
        if directive.max_turns is not None and kind != "prompt":
            _directive_error(col, raw, "max_turns", f"a {kind} step calls no model, so no turns.")
        command: str | None = None
        args: dict[str, Any] = {}
        if kind == "command" and directive.run is not None:
            command, args = _check_run(raw, cfg, col)
        child: Workflow | None = None
        if directive.inputs is not None and kind != "workflow":
            _directive_error(
                col,
                raw,
                "inputs",
                "`inputs:` gives the values of a sub-workflow's inputs; "
                "it needs `workflow: FILE` on the same step.",
            )
        if kind == "workflow" and directive.workflow is not None:
            child = load_child(raw)
        body = normalize_text(raw.text)
        if kind == "prompt" and not body and not raw.implicit:
            col.warning(
                f"the step `{raw.heading}` has no text; the model gets only its title.",
                line=raw.line,
                column=raw.column,
                code="empty-step",
            )
        steps.append(
            Step(
                id=step_id,
                title=raw.title or default_title,
                index=n,
                kind=cast(StepKind, kind),
                body=body,
                hash="",
                line=raw.line,
                tools=tools,
                max_turns=directive.max_turns if kind == "prompt" else None,
                command=command,
                command_args=args,
                heading=None if raw.implicit else raw.heading,
                workflow=directive.workflow if kind == "workflow" else None,
                workflow_inputs=dict(directive.inputs or {}) if kind == "workflow" else {},
                child=child,
            )
        )
    return steps


def _assign_ids(raws: list[RawStep], col: Collector) -> list[str]:
    if len(raws) == 1 and raws[0].implicit:
        return [IMPLICIT_STEP_ID]
    ids: list[str] = []
    explicit: set[str] = set()
    for raw in raws:
        if raw.explicit_id is None:
            continue
        if not ID_PATTERN.match(raw.explicit_id):
            col.error(
                f"`{{#{raw.explicit_id}}}` is not a valid step id; use letters, digits, _ and - "
                "(at most 64), e.g. {#analyze}.",
                line=raw.line,
                column=raw.column,
                code="step-id",
            )
        elif raw.explicit_id in explicit:
            col.error(
                f"two steps have the id `{raw.explicit_id}`; step ids must be unique, since "
                "${step:ID} and the progress file name steps by id.",
                line=raw.line,
                column=raw.column,
                code="duplicate-step-id",
            )
        explicit.add(raw.explicit_id)
    taken: set[str] = set(explicit)
    for n, raw in enumerate(raws, start=1):
        if raw.explicit_id is not None:
            ids.append(raw.explicit_id)
            continue
        base = slugify(raw.title) or f"step-{n}"
        candidate = base
        suffix = 2
        while candidate in taken:
            candidate = f"{base}-{suffix}"
            suffix += 1
        if candidate != base:
            col.warning(
                f"another step already has the id `{base}`, so this one is `{candidate}`; "
                f"give it a title of its own or an explicit id: `{raw.heading} {{#my-id}}`.",
                line=raw.line,
                column=raw.column,
                code="duplicate-step-id",
            )
        taken.add(candidate)
        ids.append(candidate)
    return ids


def _step_kind(raw: RawStep, col: Collector) -> str:
    directive = raw.directive
    kind = directive.kind
    if directive.workflow is not None:
        if directive.run is not None:
            _directive_error(
                col, raw, "workflow", "a step either runs a command or a workflow, not both."
            )
        elif kind not in (None, "workflow"):
            _directive_error(col, raw, "workflow", f"a {kind} step cannot run a workflow.")
        return "workflow"
    if kind == "workflow":
        _directive_error(
            col, raw, "kind", "a workflow step needs `workflow: FILE` naming the workflow to run."
        )
        return "prompt"
    if directive.run is not None:
        if kind not in (None, "command"):
            _directive_error(col, raw, "run", f"a {kind} step cannot `run:` a command.")
        return "command"
    if kind == "command":
        _directive_error(
            col, raw, "kind", "a command step needs `run: NAME` naming a declared command."
        )
    return kind or "prompt"


def _directive_error(col: Collector, raw: RawStep, key: str, message: str) -> None:
    line, column = raw.directive.where.get(key, (raw.line, raw.column))
    col.error(message, line=line, column=column, code="directive")


def _resolve_step_tools(
    names: list[tuple[str, int, int]], cfg: WorkflowSettings, col: Collector
) -> tuple[str, ...]:
    resolved: list[str] = []
    for name, line, column in names:
        kind, targets = resolve_tool(name, cfg.commands)
        if kind == "unknown":  # an editor-only name is reported for the front matter only
            known = [*cfg.commands, *BUILTIN_TOOLS]
            col.error(
                f"the step names the tool `{name}`, which is neither a declared command nor a "
                f"built-in{did_you_mean(name, known)}; declare it under `commands:` or use one "
                f"of: {', '.join(known)}.",
                line=line,
                column=column,
                code="unknown-tool",
            )
        for target in targets:
            if target not in resolved:
                resolved.append(target)
    return tuple(resolved)


def _check_run(
    raw: RawStep, cfg: WorkflowSettings, col: Collector
) -> tuple[str | None, dict[str, Any]]:
    directive = raw.directive
    name = directive.run or ""
    args = dict(directive.run_args)
    line, column = directive.where.get("run", (raw.line, raw.column))
    cmd = cfg.commands.get(name)
    if cmd is None:
        declared = ", ".join(cfg.commands) or "none"
        col.error(
            f"`run: {name}` names no declared command{did_you_mean(name, cfg.commands)}; "
            f"declared commands: {declared}.",
            line=line,
            column=column,
            code="unknown-command",
        )
        return None, args
    properties: dict[str, Any] = cmd.parameters.get("properties", {})
    takes = ", ".join(properties) or "no arguments"
    for arg, value in args.items():
        if arg not in properties:
            col.error(
                f"command `{name}` takes no argument `{arg}`{did_you_mean(arg, properties)}; "
                f"it takes: {takes}.",
                line=line,
                column=column,
                code="command-args",
            )
        elif "${" not in value:  # a value with variables is only known at run time
            try:
                check_argument(arg, properties[arg], value)
            except InputError as exc:
                col.error(exc.message, line=line, column=column, code="command-args")
    for param, spec in properties.items():
        if param not in args and "default" not in spec:
            col.error(
                f"command `{name}` needs the argument `{param}`: write `run: {name} "
                f"{param}=VALUE`.",
                line=line,
                column=column,
                code="command-args",
            )
    return name, args


def check_commands_used(
    cfg: WorkflowSettings, steps: list[Step], col: Collector, data: dict[str, Any]
) -> None:
    """Warn about a command the file declares that no step runs and no `tools:` offers."""
    # Listed in `tools:` counts as used even when `agent: plan` holds it back (said there);
    # only the file's own commands are its to remove (an agent's come with the agent).
    used = set(cfg.tools) | set(cfg.tool_map)
    for step in steps:
        used.update(step.tools or ())
        if step.command:
            used.add(step.command)
    own = data.get("commands") if isinstance(data.get("commands"), dict) else {}
    for name in cfg.commands:
        if name in (own or {}) and name not in used:
            col.warning(
                f"the command `{name}` is declared but no step runs it and no `tools:` list "
                "offers it to the model; add it to `tools:` or remove it.",
                field=f"$.commands.{name}",
                code="unused-command",
            )
