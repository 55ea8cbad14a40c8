"""Loading a workflow file: text → front matter + body → checked, hashed ``Workflow``.

``load_workflow`` is for running (any error raises ``WorkflowError``); ``check_workflow`` is
for ``flow check`` (every problem comes back as a diagnostic, loading goes as far as it can)::

    wf = load_workflow("workflows/release-notes.prompt.md")
    [(s.id, s.kind, s.hash) for s in wf.steps]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..base.errors import FileNotFoundFlowError, SpecialFileError, WorkflowError
from ..base.paths import display_path
from ..base.safeopen import read_regular
from ..base.textnorm import normalize_newlines, normalize_text
from .agentdirs import AgentPlaces, locate_agent, searched_text
from .agentfile import TASK_INPUT, agent_name, is_agent_file
from .agentload import LoadedAgent, read_agent, task_input, task_step, use_agent
from .body import ParsedBody, RawStep, parse_body
from .config import WorkflowSettings, build_config, custom_agent
from .diagnostics import Collector, did_you_mean
from .header import read_front_matter, validate_front_matter
from .records import (
    Diagnostic,
    IncompleteReply,
    InputDecl,
    Recovery,
    Step,
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
from .stephash import hash_steps, workflow_hash
from .steps import build_steps, check_commands_used
from .variables import scan
from .variableuses import check_variables


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


def _analyze(
    text: str,
    path: str,
    *,
    single_prompt: bool = False,
    chain: tuple[Path, ...] = (),
    places: AgentPlaces = _HERE,
) -> tuple[Workflow | None, Collector]:
    col = Collector(path)
    src = _split(normalize_newlines(text), path, col)
    read = read_front_matter(src, col) if src is not None else None
    if src is None or read is None:
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
    chain = (*chain, Path(path).resolve())
    steps = (
        [task_step(agent, src.body_line)]
        if agent is not None
        else build_steps(
            body.steps,
            cfg,
            data,
            col,
            default_title=_name(data, path),
            load_child=lambda raw: _load_child(raw, col, path=path, chain=chain, places=places),
        )
    )
    variables, inputs = check_variables(
        src.body,
        body,
        index,
        steps,
        col,
        declared=cfg.inputs,
        # With a broken `inputs:` block its names are unknown: do not call every use undeclared.
        has_block="inputs" in data and "inputs" not in bad,
    )
    if agent is not None:
        inputs = {**inputs, TASK_INPUT: task_input(agent)}
    check_commands_used(cfg, steps, col, data)
    _check_allow_lists(data, bad, positions, col)
    context = normalize_text(body.context)
    if used is not None:
        # The agent's instructions first, then the prompt file's own context.
        context = "\n\n".join(part for part in (used.context, context) if part)
    _check_not_empty(agent is not None, context, steps, src.body_line, col)
    hashed = hash_steps(steps, context, cfg)
    return _workflow(path, data, cfg, agent, used, context, hashed, inputs, variables, col), col


def _split(text: str, path: str, col: Collector) -> Source | None:
    """The file's front matter and body apart, or None after reporting why they cannot be."""
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
        return None
    nul = text.find("\x00")
    if nul >= 0:
        line, column = LineIndex(text).position(nul)
        col.error(
            "the file contains a NUL character, so it is not a text file; delete it.",
            line=line,
            column=column,
            code="io",
        )
        return None
    return src


def _check_not_empty(
    is_agent: bool, context: str, steps: list[Step], body_line: int, col: Collector
) -> None:
    """An agent without instructions is warned about; a prompt file without text is an error."""
    if is_agent and not context:
        col.warning(
            "the agent has no instructions; write them below the front matter (the task is "
            "given when it runs).",
            line=body_line,
            column=1,
            code="empty",
        )
    elif len(steps) == 1 and steps[0].heading is None and not steps[0].body:
        col.error(
            "the workflow has no prompt text; write the task below the front matter.",
            line=body_line,
            column=1,
            code="empty",
        )


def _workflow(
    path: str,
    data: dict[str, Any],
    cfg: WorkflowSettings,
    agent: LoadedAgent | None,
    used: Workflow | None,
    context: str,
    steps: list[Step],
    inputs: dict[str, InputDecl],
    variables: list[VariableUse],
    col: Collector,
) -> Workflow:
    """The ``Workflow`` record of a file read and checked, its hashed ``steps`` in it."""
    return Workflow(
        path=Path(path),
        name=agent_name(data, Path(path)) if agent is not None else _name(data, path),
        description=data.get("description") if isinstance(data.get("description"), str) else None,
        front_matter=data,
        context=context,
        steps=tuple(steps),
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
        hash=workflow_hash(context, steps, inputs, cfg),
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


# --- sub-workflows --------------------------------------------------------------------


def _load_child(
    raw: RawStep,
    col: Collector,
    *,
    path: str,
    chain: tuple[Path, ...],
    places: AgentPlaces,
) -> Workflow | None:
    """The sub-workflow a step runs, loaded and checked, or None after reporting why not.

    A workflow that is already in the chain of workflows running this one would run itself
    forever: the cycle is refused here, naming the chain, so `flow check` finds it too."""
    directive = raw.directive
    line, column = directive.where.get("workflow", (raw.line, raw.column))
    written = directive.workflow or ""
    target = Path(path).parent / written
    resolved = target.resolve()
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
            workspace=places.workspace,
            agent_dirs=places.extra,
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
