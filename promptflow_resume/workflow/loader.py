"""Loading a workflow file: text → front matter + body → checked, hashed ``Workflow``.

``load_workflow`` is for running (any error raises ``WorkflowError``); ``check_workflow`` is
for ``flow check`` (every problem comes back as a diagnostic, loading goes as far as it can)::

    wf = load_workflow("workflows/release-notes.prompt.md")
    [(s.id, s.kind, s.hash) for s in wf.steps]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from ..base.errors import FileNotFoundFlowError, InputError, SpecialFileError, WorkflowError
from ..base.paths import display_path
from ..base.safeopen import read_regular
from ..base.textnorm import normalize_newlines, normalize_text
from .agentdirs import AgentPlaces, locate_agent, searched_text
from .agentfile import TASK_INPUT, agent_name, is_agent_file
from .agentload import LoadedAgent, read_agent, task_input, task_step, use_agent
from .body import ID_PATTERN, ParsedBody, RawStep, parse_body, slugify
from .commands import check_argument, command_definition
from .config import (
    WorkflowSettings,
    build_config,
    custom_agent,
    mode_tools,
    model_choice,
    resolve_tool,
)
from .diagnostics import Collector, did_you_mean
from .frontmatter import read_front_matter, validate_front_matter
from .hashing import digest
from .model import (
    Diagnostic,
    IncompleteReply,
    InputDecl,
    Recovery,
    Step,
    StepKind,
    VariableUse,
    Workflow,
)
from .skillfile import SKILL_FILE
from .skillrun import skill_workflow
from .source import (
    MAX_WORKFLOW_BYTES,
    FrontMatterUnclosed,
    LineIndex,
    Source,
    YamlPositions,
    field_path,
    split_source,
)
from .toolnames import BUILTIN_TOOLS
from .variables import SELECTION_VARIABLES, scan

IMPLICIT_STEP_ID = "main"


def workflow_files(given: Path) -> list[Path]:
    """A folder stands for the prompt and agent files (``*.prompt.md``, ``*.agent.md``)
    directly in it, sorted; a file stands for itself."""
    if not given.is_dir():
        return [given]
    found = {*given.glob("*.prompt.md"), *given.glob("*.agent.md")}
    if is_agent_file(given.resolve() / "x.md"):
        found.update(given.glob("*.md"))  # .github/agents and .claude/agents: any Markdown
    return sorted(found)


def load_workflow(
    path: str | Path,
    *,
    single_prompt: bool = False,
    chain: tuple[Path, ...] = (),
    workspace: Path | None = None,
    agent_dirs: Sequence[Path] = (),
) -> Workflow:
    """Read and check a workflow file; the first error raises ``WorkflowError`` (exit 4).

    ``single_prompt`` keeps the whole body one step, as ``steps: false`` does. ``chain`` holds
    the (resolved) workflows that run this one as a sub-workflow, to refuse cycles.
    ``workspace`` (default: the working directory) and ``agent_dirs`` (``--agents``) are
    where a prompt file's ``agent: NAME`` is looked up."""
    if Path(path).name == SKILL_FILE:
        # A skill run directly (`flow run path/SKILL.md --task`) has its own format (1.11).
        return skill_workflow(Path(path))
    text, problem = _read(Path(path))
    if problem is not None:
        raise _as_error(problem, 1)
    return parse_workflow(
        text,
        path=path,
        single_prompt=single_prompt,
        chain=chain,
        workspace=workspace,
        agent_dirs=agent_dirs,
    )


def parse_workflow(
    text: str,
    *,
    path: str | Path,
    single_prompt: bool = False,
    chain: tuple[Path, ...] = (),
    workspace: Path | None = None,
    agent_dirs: Sequence[Path] = (),
) -> Workflow:
    """Check workflow ``text`` as if read from ``path``; errors raise ``WorkflowError``."""
    places = AgentPlaces(workspace, tuple(agent_dirs))
    workflow, col = _analyze(
        text, str(path), single_prompt=single_prompt, chain=chain, places=places
    )
    errors = [d for d in col.sorted() if d.severity == "error"]
    if errors or workflow is None:
        raise _as_error(errors[0], len(errors))
    return workflow


def check_workflow(
    path: str | Path, *, workspace: Path | None = None, agent_dirs: Sequence[Path] = ()
) -> tuple[Workflow | None, list[Diagnostic]]:
    """Everything ``flow check`` reports: the workflow (when it could be built) and diagnostics.

    Never raises for problems in the file's content; a file that does not exist raises
    ``FileNotFoundFlowError``. A returned workflow may carry errors in ``diagnostics``.
    ``workspace`` and ``agent_dirs`` are as for ``load_workflow``.
    """
    text, problem = _read(Path(path))
    if problem is not None:
        return None, [problem]
    workflow, col = _analyze(text, str(path), places=AgentPlaces(workspace, tuple(agent_dirs)))
    return workflow, list(col.sorted())


def _read(path: Path) -> tuple[str, Diagnostic | None]:
    where = str(path)
    if not path.exists():
        raise FileNotFoundFlowError(
            f"the workflow file {where} does not exist.",
            path=where,
            hint="Check the path; workflow files are usually named NAME.prompt.md.",
        )
    if path.is_dir():
        return "", Diagnostic(
            "error", "is a folder, not a workflow file; name a *.prompt.md file.", where, code="io"
        )
    size = path.stat().st_size
    if size > MAX_WORKFLOW_BYTES:
        return "", Diagnostic(
            "error",
            f"the file is {size:,} bytes; workflow files are limited to "
            f"{MAX_WORKFLOW_BYTES:,} bytes. Move large material into files the workflow's "
            "tools read.",
            where,
            code="io",
        )
    try:
        # A link is followed (the path was named), but a pipe or a device is refused, and the
        # read stops past the limit whatever size the file claims (docs/spec.md 10.4).
        data = read_regular(path, MAX_WORKFLOW_BYTES, what="workflow file", follow=True) or b""
    except SpecialFileError as exc:
        return "", Diagnostic("error", exc.message, where, code="io")
    except OSError as exc:
        return "", Diagnostic(
            "error",
            f"cannot read the file: {exc.strerror or exc}; check its permissions.",
            where,
            code="io",
        )
    if len(data) > MAX_WORKFLOW_BYTES:
        return "", Diagnostic(
            "error",
            f"the file is over {MAX_WORKFLOW_BYTES:,} bytes; workflow files are limited to "
            "that. Move large material into files the workflow's tools read.",
            where,
            code="io",
        )
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8", "replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        return "", Diagnostic(
            "error",
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x}); save it as UTF-8.",
            where,
            line,
            column,
            code="io",
        )


def _progress_file_given(data: dict[str, Any], path: str, col: Collector) -> None:
    """A progress file where a workflow was expected: say which command takes it."""
    workflow = data.get("workflow")
    source = workflow.get("path") if isinstance(workflow, dict) else None
    again = (
        f" To start a new run, run its workflow ({source}, relative to this file)."
        if isinstance(source, str)
        else ""
    )
    col.error(
        "this is the progress file of a run (its front matter has `flow_progress:`), not a "
        f"workflow. Continue the run with `flow resume {path}`.{again}",
        line=1,
        column=1,
        code="progress-file",
    )


def _as_error(diagnostic: Diagnostic, count: int) -> WorkflowError:
    more = (
        f" ({count - 1} more problem{'s' if count > 2 else ''}; run `flow check "
        f"{diagnostic.path}` to see them all.)"
        if count > 1
        else ""
    )
    return WorkflowError(
        diagnostic.message.rstrip() + more,
        path=diagnostic.path,
        line=diagnostic.line,
        column=diagnostic.column,
        field=diagnostic.field,
    )


#: Agents looked up from the working directory, with no --agents folders.
_HERE = AgentPlaces()


@dataclass
class _Analysis:
    src: Source
    data: dict[str, Any]
    cfg: WorkflowSettings
    body: ParsedBody
    index: LineIndex
    #: Top-level front-matter keys that failed the schema.
    bad: set[str]
    #: The workflows running this one as a sub-workflow, this one last (resolved paths).
    chain: tuple[Path, ...] = ()
    #: Where ``agent: NAME`` is looked up (sub-workflows look in the same places).
    places: AgentPlaces = _HERE


def _analyze(
    text: str,
    path: str,
    *,
    single_prompt: bool = False,
    chain: tuple[Path, ...] = (),
    places: AgentPlaces = _HERE,
) -> tuple[Workflow | None, Collector]:
    col = Collector(path)
    text = normalize_newlines(text)
    try:
        src = split_source(text, path=path)
    except FrontMatterUnclosed:
        col.error(
            "the file starts with `---` (front matter) but no closing `---` line follows; "
            "add a line `---` after the last front-matter key.",
            line=1,
            column=1,
            code="front-matter",
        )
        return None, col
    nul = text.find("\x00")
    if nul >= 0:
        line, column = LineIndex(text).position(nul)
        col.error(
            "the file contains a NUL character, so it is not a text file; delete it.",
            line=line,
            column=column,
            code="io",
        )
        return None, col
    read = read_front_matter(src, col)
    if read is None:
        return None, col
    data, positions = read
    if "flow_progress" in data:
        _progress_file_given(data, path, col)
        return None, col
    agent = read_agent(data, positions, col, Path(path)) if is_agent_file(Path(path)) else None
    if agent is not None:
        bad, cfg = agent.bad, agent.settings
    else:
        bad = validate_front_matter(data, positions, col) if data else set()
        cfg = build_config(data, positions, col, bad)
    used = _used_agent(data, positions, col, places, chain) if agent is None else None
    if used is not None:
        use_agent(cfg, used, data)
    if src.front_matter_text is not None:
        _warn_variables_in_front_matter(src, col)
    index = LineIndex(src.body, first_line=src.body_line)
    if agent is not None:
        # An agent's whole body is its instructions: headings in it are text, never steps.
        body = ParsedBody(context=src.body, steps=[], context_end=len(src.body))
    else:
        body = parse_body(
            src.body, index=index, col=col, single=single_prompt or data.get("steps") is False
        )
    analysis = _Analysis(src, data, cfg, body, index, bad, (*chain, Path(path).resolve()), places)
    steps = [task_step(agent, src.body_line)] if agent is not None else _build_steps(analysis, col)
    variables, inputs = _check_variables(analysis, steps, col)
    if agent is not None:
        inputs = {**inputs, TASK_INPUT: task_input(agent)}
    _check_commands_used(cfg, steps, col, data)
    _check_allow_lists(data, bad, positions, col)
    context = normalize_text(body.context)
    if used is not None:
        # The agent's instructions first, then the prompt file's own context.
        context = "\n\n".join(part for part in (used.context, context) if part)
    if agent is not None and not context:
        col.warning(
            "the agent has no instructions; write them below the front matter (the task is "
            "given when it runs).",
            line=src.body_line,
            column=1,
            code="empty",
        )
    elif len(steps) == 1 and steps[0].heading is None and not steps[0].body:
        col.error(
            "the workflow has no prompt text; write the task below the front matter.",
            line=src.body_line,
            column=1,
            code="empty",
        )
    hashed = _hash_steps(steps, context, cfg)
    workflow = Workflow(
        path=Path(path),
        name=agent_name(data, Path(path)) if agent is not None else _name(data, path),
        description=data.get("description") if isinstance(data.get("description"), str) else None,
        front_matter=data,
        context=context,
        steps=tuple(hashed),
        inputs=inputs,
        commands=cfg.commands,
        tools=cfg.tools,
        provider=cfg.provider,
        model=cfg.model,
        models=cfg.models,
        model_refs=cfg.model_refs,
        provider_named=cfg.provider_named,
        params=cfg.params,
        budget=cfg.budget,
        retry=cfg.retry,
        hash=_workflow_hash(context, hashed, inputs, cfg),
        diagnostics=col.sorted(),
        variables=tuple(variables),
        tool_map=cfg.tool_map,
        compaction=cfg.compaction,
        approve=cfg.approve,
        recovery=Recovery.MODEL if data.get("recovery") == "model" else Recovery.PERSON,
        incomplete_reply=_incomplete_reply(data.get("incomplete_reply")),
        kind="agent" if agent is not None else "prompt",
        agent=agent.spec if agent is not None else None,
        **_agent_servers(agent, used, Path(path)),
    )
    return workflow, col


def _incomplete_reply(value: Any) -> IncompleteReply:
    """``incomplete_reply:`` as written (the schema refused anything else), else ``warn``."""
    known = {choice.value: choice for choice in IncompleteReply}
    return known.get(value, IncompleteReply.WARN) if isinstance(value, str) else known["warn"]


def _agent_servers(agent: LoadedAgent | None, used: Workflow | None, path: Path) -> dict[str, Any]:
    """The ``mcp_servers`` and ``agent_hooks`` fields: an agent's own servers and hooks, or
    those of the agent it uses."""
    found: dict[str, Any] = {}
    if agent is not None and agent.spec.mcp_servers:
        found.update(mcp_servers=agent.spec.mcp_servers, mcp_servers_file=path)
    elif used is not None and used.mcp_servers:
        found.update(mcp_servers=used.mcp_servers, mcp_servers_file=used.mcp_servers_file)
    if agent is not None and agent.spec.hooks:
        found.update(agent_hooks=agent.spec.hooks, agent_hooks_file=path)
    elif used is not None and used.agent_hooks:
        found.update(agent_hooks=used.agent_hooks, agent_hooks_file=used.agent_hooks_file)
    return found


def _used_agent(
    data: dict[str, Any],
    pos: YamlPositions,
    col: Collector,
    places: AgentPlaces,
    chain: tuple[Path, ...],
) -> Workflow | None:
    """The custom agent a prompt file names with ``agent: NAME``, loaded; None (with an error
    at the key) when no agent has that name or it cannot be loaded."""
    name = custom_agent(data)
    if name is None:
        return None
    line, column = pos.value(("agent",))
    found = locate_agent(name, places.root(), places.extra)
    if found is None:
        col.error(
            f"no custom agent is called `{name}` (the built-in ones are ask, edit, agent and "
            f"plan); {searched_text(places.root(), places.extra)}.",
            line=line,
            column=column,
            field=field_path(("agent",)),
            code="agent",
        )
        return None
    try:
        return load_workflow(
            found, chain=chain, workspace=places.workspace, agent_dirs=places.extra
        )
    except WorkflowError as exc:
        col.error(
            f"the agent `{name}` ({display_path(found)}) cannot be loaded: {exc}",
            line=line,
            column=column,
            field=field_path(("agent",)),
            code="agent",
        )
        return None


def _name(data: dict[str, Any], path: str) -> str:
    name = data.get("name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    base = Path(path).name
    for suffix in (".prompt.md", ".md"):
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base


def _warn_variables_in_front_matter(src: Source, col: Collector) -> None:
    lines = (src.front_matter_text or "").split("\n")
    for i, line in enumerate(lines):
        for token in scan(line):
            if token.kind in ("input", "step"):
                col.warning(
                    f"{token.text} is not substituted in the front matter; variables work in "
                    "the Markdown body and in a step's `run:` line.",
                    line=src.front_matter_line + i,
                    column=token.start + 1,
                    code="variable",
                )


# --- steps -------------------------------------------------------------------------------


def _build_steps(analysis: _Analysis, col: Collector) -> list[Step]:
    cfg = analysis.cfg
    raws = analysis.body.steps
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
            tools = mode_tools(tools, cfg.commands, analysis.data)
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
            child = _load_child(raw, analysis, col)
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
                title=raw.title or _name(analysis.data, analysis.src.path),
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


def _load_child(raw: RawStep, analysis: _Analysis, col: Collector) -> Workflow | None:
    """The sub-workflow a step runs, loaded and checked, or None after reporting why not.

    A workflow that is already in the chain of workflows running this one would run itself
    forever: the cycle is refused here, naming the chain, so `flow check` finds it too."""
    directive = raw.directive
    line, column = directive.where.get("workflow", (raw.line, raw.column))
    written = directive.workflow or ""
    target = Path(analysis.src.path).parent / written
    resolved = target.resolve()
    chain = analysis.chain
    if resolved in chain:
        names = [display_path(p) for p in (*chain[chain.index(resolved) :], resolved)]
        col.error(
            f"workflow cycle: {' → '.join(names)}; a workflow cannot run itself, directly or "
            "through the workflows it runs.",
            line=line,
            column=column,
            code="workflow-cycle",
        )
        return None
    if not target.is_file():
        col.error(
            f"the sub-workflow `{written}` does not exist (looked for "
            f"{display_path(resolved)}; the path is relative to this workflow's folder).",
            line=line,
            column=column,
            code="sub-workflow",
        )
        return None
    try:
        child = load_workflow(
            target,
            chain=chain,
            workspace=analysis.places.workspace,
            agent_dirs=analysis.places.extra,
        )
    except WorkflowError as exc:
        col.error(
            f"the sub-workflow `{written}` cannot be loaded: {exc}",
            line=line,
            column=column,
            code="workflow-cycle" if "workflow cycle:" in exc.message else "sub-workflow",
        )
        return None
    given = directive.inputs or {}
    at = directive.where.get("inputs", (line, column))
    takes = ", ".join(child.inputs) or "no inputs"
    for name in given:
        if name not in child.inputs:
            col.error(
                f"the sub-workflow `{written}` has no input `{name}`"
                f"{did_you_mean(name, child.inputs)}; it takes: {takes}.",
                line=at[0],
                column=at[1],
                code="sub-workflow-inputs",
            )
    for name, decl in child.inputs.items():
        if name not in given and decl.required and decl.default is None:
            col.error(
                f"the sub-workflow `{written}` needs the input `{name}`: write "
                f"`> inputs: {name}=VALUE` under the step heading (values may use "
                "${input:…} and ${step:…}).",
                line=at[0],
                column=at[1],
                code="sub-workflow-inputs",
            )
    return child


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


def _check_commands_used(
    cfg: WorkflowSettings, steps: list[Step], col: Collector, data: dict[str, Any]
) -> None:
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


def catch_all(pattern: str, key: str) -> bool:
    """True for an allow-list entry that allows (nearly) everything: ``*``, and for
    ``allow-fetch`` a whole top-level domain such as ``*.com``."""
    pattern = pattern.strip()
    if pattern == "*":
        return True
    return key == "allow-fetch" and pattern.startswith("*.") and "." not in pattern[2:].strip(".")


def _check_allow_lists(
    data: dict[str, Any], bad: set[str], positions: YamlPositions, col: Collector
) -> None:
    """Warn about catch-all patterns: such a list changes no hash, so a change that adds one
    is noticed only here and when a run resumes (docs/spec.md 10.7)."""
    for key, what in (("allow-commands", "every command"), ("allow-fetch", "every host")):
        values = data.get(key) if key not in bad else None
        for index, pattern in enumerate(values if isinstance(values, list) else []):
            if isinstance(pattern, str) and catch_all(pattern, key):
                line, column = positions.value((key, index))
                scope = what if pattern.strip() == "*" else f"every host under {pattern.strip()}"
                col.warning(
                    f"{key} `{pattern.strip()}` lets the model reach {scope} without asking; "
                    "name the programs or hosts the workflow needs (e.g. `pytest *`, "
                    "`docs.python.org`).",
                    line=line,
                    column=column,
                    field=f"$.{key}[{index}]",
                    code="catch-all-permission",
                )


# --- variables ---------------------------------------------------------------------------


def _check_variables(
    analysis: _Analysis, steps: list[Step], col: Collector
) -> tuple[list[VariableUse], dict[str, InputDecl]]:
    body = analysis.body
    index = analysis.index
    raws = body.steps
    order = {step.id: i for i, step in enumerate(steps)}
    uses: list[VariableUse] = []
    placeholders: dict[str, tuple[str, int, int]] = {}
    for token in scan(analysis.src.body):
        line, column = index.position(token.start)
        owner_at = next(
            (i for i, raw in enumerate(raws) if raw.start <= token.start < raw.end), None
        )
        if owner_at is not None and token.start < body.context_end:
            owner_at = None
        owner = steps[owner_at].id if owner_at is not None else None
        if token.kind == "input":
            if token.problem:
                # VS Code accepts such a file; it is left as text here rather than refused.
                col.warning(
                    f"`{token.text}` has no valid input name, so it is sent as written; write "
                    "${input:name} or ${input:name:placeholder} with a name of letters, digits, "
                    "_ and - to ask for a value.",
                    line=line,
                    column=column,
                    code="variable",
                )
                continue
            if token.placeholder is not None:
                first = placeholders.setdefault(token.name, (token.placeholder, line, column))
                if first[0] != token.placeholder:
                    col.warning(
                        f"`{token.text}` gives another placeholder than line {first[1]} "
                        f"(`{first[0]}`); the first one is used.",
                        line=line,
                        column=column,
                        code="variable",
                    )
        elif token.kind == "step":
            if not _step_ref_ok(token.name, owner_at, order, line, column, col):
                continue
        elif token.kind == "editor":
            if token.name in SELECTION_VARIABLES:
                col.warning(
                    f"`{token.text}` is the editor's selection: pass --selection TEXT or "
                    "--selection @FILE when running.",
                    line=line,
                    column=column,
                    code="editor-variable",
                )
        else:
            if token.problem:
                col.warning(
                    f"`{token.text}` is not a flow variable and is sent as written; "
                    f"{token.problem}",
                    line=line,
                    column=column,
                    code="variable",
                )
            continue
        uses.append(
            VariableUse(
                kind=cast(Any, token.kind),
                name=token.name,
                text=token.text,
                line=line,
                column=column,
                step=owner,
                placeholder=token.placeholder,
            )
        )
    inputs = _inputs(analysis, uses, placeholders, col)
    return uses, inputs


def _step_ref_ok(
    name: str,
    owner_at: int | None,
    order: dict[str, int],
    line: int,
    column: int,
    col: Collector,
) -> bool:
    if owner_at is None:
        col.error(
            f"${{step:{name}}} is in the shared context, which every step sees before any "
            "step has run; use it inside a later step.",
            line=line,
            column=column,
            code="step-ref",
        )
        return False
    target = order.get(name)
    if target is None:
        col.error(
            f"${{step:{name}}} names no step{did_you_mean(name, order)}; step ids: "
            f"{', '.join(order)}.",
            line=line,
            column=column,
            code="step-ref",
        )
        return False
    if target >= owner_at:
        what = "itself" if target == owner_at else "a later step"
        col.error(
            f"${{step:{name}}} refers to {what}; a step can only use the output of steps "
            "before it.",
            line=line,
            column=column,
            code="step-ref",
        )
        return False
    return True


def _inputs(
    analysis: _Analysis,
    uses: list[VariableUse],
    placeholders: dict[str, tuple[str, int, int]],
    col: Collector,
) -> dict[str, InputDecl]:
    declared = analysis.cfg.inputs
    # With a broken `inputs:` block its names are unknown: do not call every use undeclared.
    has_block = "inputs" in analysis.data and "inputs" not in analysis.bad
    inputs: dict[str, InputDecl] = {}
    for name, decl in declared.items():
        placeholder = decl.placeholder
        if placeholder is None and name in placeholders:
            placeholder = placeholders[name][0]
        inputs[name] = replace(decl, placeholder=placeholder)
    seen_undeclared: set[str] = set()
    for use in uses:
        if use.kind != "input" or use.name in declared or use.name in seen_undeclared:
            continue
        seen_undeclared.add(use.name)
        placeholder = placeholders.get(use.name, (None,))[0]
        inputs[use.name] = InputDecl(
            name=use.name, type="string", placeholder=placeholder, declared=False
        )
        if has_block:
            col.warning(
                f"the input `{use.name}` is used but not declared under `inputs:`"
                f"{did_you_mean(use.name, declared)}; it is taken as a required string.",
                line=use.line,
                column=use.column,
                code="undeclared-input",
            )
    used = {u.name for u in uses if u.kind == "input"}
    for name in declared:
        if name not in used:
            col.warning(
                f"the input `{name}` is declared but no ${{input:{name}}} uses it.",
                field=f"$.inputs.{name}",
                code="unused-input",
            )
    return inputs


# --- hashes ------------------------------------------------------------------------------


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


def _hash_steps(steps: list[Step], context: str, cfg: WorkflowSettings) -> list[Step]:
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


def _workflow_hash(
    context: str, steps: list[Step], inputs: dict[str, InputDecl], cfg: WorkflowSettings
) -> str:
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
