"""Typed records from the (schema-checked) front matter: inputs, params, budget, retry, tools."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ..base.durations import parse_duration
from ..base.retrypolicy import RetryPolicy
from ..providers.models import ModelRef, fix_line, resolve_model
from .commands import build_commands
from .diagnostics import Collector, did_you_mean
from .header import PARAM_KEYS
from .records import Budget, CommandDecl, Compaction, InputDecl, InputType
from .source import YamlPositions, field_path
from .toolnames import (
    ASK_EXCLUDED,
    BUILTIN_TOOLS,
    PLAN_TOOLS,
    editor_only_line,
    extension_tools_line,
    is_extension_tool,
    map_tool_name,
)
from .values import coerce_value, value_text

ToolKind = Literal["command", "builtin", "alias", "editor", "unknown"]


@dataclass
class WorkflowSettings:
    """Everything a workflow's front matter says, as typed records (defaults where a part was
    bad); a run's resolved provider settings are ``progress.model.RunConfig``."""

    inputs: dict[str, InputDecl] = field(default_factory=dict)
    commands: dict[str, CommandDecl] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    tool_map: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: False when the front matter has no ``tools:`` key (then every command is offered).
    tools_listed: bool = False
    provider: str | None = None
    #: The first choice of ``model:`` as a model id (None: the command line decides).
    model: str | None = None
    #: Every model id of ``model:`` in order, ``model`` first (one for a single name, none
    #: without ``model:``): a model the provider refuses is replaced by the next.
    models: tuple[str, ...] = ()
    #: Each name of ``model:`` as flow understands it (provider, id), in order; a run that
    #: names no provider takes the first whose provider has credentials.
    model_refs: tuple[ModelRef, ...] = ()
    #: True when ``provider:`` names the provider (else it is the first model's).
    provider_named: bool = False
    params: dict[str, Any] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    compaction: Compaction = field(default_factory=Compaction)
    #: ``approve:``: tool-name patterns whose calls wait for a person's yes (docs/spec.md 4.17).
    approve: tuple[str, ...] = ()


def build_config(
    data: dict[str, Any], pos: YamlPositions, col: Collector, bad: set[str]
) -> WorkflowSettings:
    """The front matter as ``WorkflowSettings``; keys in ``bad`` failed the schema (skipped)."""

    def usable(key: str) -> bool:
        return key in data and key not in bad

    cfg = WorkflowSettings()
    if usable("inputs"):
        cfg.inputs = build_inputs(data["inputs"] or {}, pos, col)
    if usable("commands"):
        cfg.commands = build_commands(data["commands"] or {}, pos, col)
    if usable("provider"):
        cfg.provider = data["provider"]
        cfg.provider_named = True
    if usable("model"):
        _build_models(cfg, data["model"], pos, col)
    if usable("approve"):
        cfg.approve = tuple(data["approve"] or ())
    cfg.params = _build_params(data, pos, col, bad)
    if usable("budget"):
        cfg.budget = _build_budget(data["budget"] or {}, pos, col)
    if usable("retry"):
        cfg.retry = _build_retry(data["retry"] or {}, pos, col)
    cfg.compaction = _build_compaction(
        data.get("compaction") if usable("compaction") else None,
        data.get("context_window") if usable("context_window") else None,
        pos,
        col,
    )
    if "tools" in data and "tools" not in bad:
        cfg.tools_listed = True
        broken = data.get("commands") if isinstance(data.get("commands"), dict) else {}
        cfg.tool_map, cfg.tools = _resolve_tools(
            data["tools"], cfg.commands, set(broken or ()) - set(cfg.commands), pos, col
        )
    elif "tools" not in data:
        cfg.tools = tuple(cfg.commands)
    restrict_to_mode(cfg, data)
    if builtin_agent(data) == "plan" and cfg.tools_listed:
        _warn_held_back(cfg, pos, col)
    return cfg


def _warn_held_back(cfg: WorkflowSettings, pos: YamlPositions, col: Collector) -> None:
    offered = set(cfg.tools)
    held = [n for n, targets in cfg.tool_map.items() if not set(targets) <= offered]
    if held:
        line, column = pos.key(("tools",))
        listed = ", ".join(f"`{n}`" for n in held)
        col.warning(
            f"`agent: plan` offers only tools that read (and declared commands marked "
            f"idempotent), so {listed} {'is' if len(held) == 1 else 'are'} not offered.",
            line=line,
            column=column,
            field=field_path(("tools",)),
            code="plan-tools",
        )


#: The agents every host has built in (``agent:`` / ``mode:``); any other name is a custom agent.
BUILTIN_AGENTS: tuple[str, ...] = ("agent", "ask", "edit", "plan")


def builtin_agent(data: dict[str, Any]) -> str | None:
    """``agent:`` (or the older ``mode:``) when it names a built-in agent, lower-cased."""
    for key in ("agent", "mode"):
        value = str(data.get(key, "")).strip().lower()
        if value in BUILTIN_AGENTS:
            return value
    return None


def custom_agent(data: dict[str, Any]) -> str | None:
    """``agent: NAME`` when NAME is a custom agent (not ask, edit, agent or plan)."""
    value = data.get("agent")
    if not isinstance(value, str) or not value.strip():
        return None
    return None if value.strip().lower() in BUILTIN_AGENTS else value.strip()


def restrict_to_mode(cfg: WorkflowSettings, data: dict[str, Any]) -> None:
    """``agent: ask`` takes away edits and model-written commands; ``agent: plan`` leaves only
    the read-only built-ins and the declared commands marked ``idempotent``."""
    cfg.tools = mode_tools(cfg.tools, cfg.commands, data)


def mode_tools(
    tools: tuple[str, ...], commands: dict[str, CommandDecl], data: dict[str, Any]
) -> tuple[str, ...]:
    """``tools`` as the file's built-in agent (``ask``, ``plan``) allows them."""
    mode = builtin_agent(data)
    if mode == "ask":
        return without_editing(tools, commands)
    if mode == "plan":
        return read_only(tools, commands)
    return tools


def _build_models(
    cfg: WorkflowSettings, raw: str | list[str], pos: YamlPositions, col: Collector
) -> None:
    """``model:`` (one name or an ordered list) as model ids in ``cfg.models`` and as
    ``cfg.model_refs``; the first model flow can send names the workflow's provider, unless
    ``provider:`` does. A name flow cannot send to the right provider is a warning with the
    line that fixes it (``model-unknown``)."""
    names = [raw] if isinstance(raw, str) else list(raw)
    where = (lambda i: ("model",)) if isinstance(raw, str) else (lambda i: ("model", i))
    ids: list[str] = []
    refs: list[ModelRef] = []
    #: (position in the list, name as written, the provider it names) of each model kept.
    kept: list[tuple[int, str, str | None]] = []
    for i, name in enumerate(names):
        # A Copilot display name ("GPT-4.1") becomes the model id and names its provider.
        ref = resolve_model(name)
        provider, mid = (ref.provider if ref.runnable else None), ref.model
        if mid in ids:
            line, column = pos.value(where(i))
            col.warning(
                f"`{name}` is listed before (as model {ids.index(mid) + 1}, `{mid}`); it is "
                "tried once.",
                line=line,
                column=column,
                field=field_path(where(i)),
                code="model-repeated",
            )
            continue
        ids.append(mid)
        refs.append(ref)
        kept.append((i, name, provider))
        problem = ref.problem()
        if problem is not None and not cfg.provider_named:
            line, column = pos.value(where(i))
            col.warning(
                f"{problem}; {fix_line(name)}.",
                line=line,
                column=column,
                field=field_path(where(i)),
                code="model-unknown",
            )
    if cfg.provider is None:
        cfg.provider = next((p for _, _, p in kept if p is not None), None)
    cfg.models = tuple(ids)
    cfg.model = ids[0] if ids else None
    cfg.model_refs = tuple(refs)
    own = any(p in (None, cfg.provider) for _, _, p in kept)
    if len(names) < 2 or not cfg.provider_named or not own:
        return  # with none of its own, the provider gets them all (providers.models)
    for i, name, provider in kept:
        if provider is not None and provider != cfg.provider:
            line, column = pos.value(where(i))
            col.warning(
                f"`{name}` is a model of the {provider} provider, but this workflow's models "
                f"go to {cfg.provider} (`provider:`); it is not tried (leave `provider:` out "
                "to try the list in order with the first provider you have a key for).",
                line=line,
                column=column,
                field=field_path(where(i)),
                code="model-provider",
            )


def model_choice(cfg: WorkflowSettings) -> str | list[str] | None:
    """What the hashes cover of ``model:``: the model id, or the ordered list when there is
    more than one (a one-entry list hashes like the name alone: it is the same choice)."""
    return list(cfg.models) if len(cfg.models) > 1 else cfg.model


def is_ask_mode(data: dict[str, Any]) -> bool:
    """True for ``mode: ask`` or ``agent: ask``: the model answers, it does not change files."""
    return builtin_agent(data) == "ask"


def read_only(tools: tuple[str, ...], commands: dict[str, CommandDecl]) -> tuple[str, ...]:
    """``tools`` a planner may use: the built-ins in ``PLAN_TOOLS`` and the declared commands
    marked ``idempotent`` (safe to run again, so taken as safe to run while planning)."""
    return tuple(t for t in tools if (commands[t].idempotent if t in commands else t in PLAN_TOOLS))


def without_editing(tools: tuple[str, ...], commands: dict[str, CommandDecl]) -> tuple[str, ...]:
    """``tools`` without the built-ins that change files or run model-chosen commands (a
    declared command was chosen by the author and stays)."""
    return tuple(t for t in tools if t in commands or t not in ASK_EXCLUDED)


def build_inputs(raw: dict[str, Any], pos: YamlPositions, col: Collector) -> dict[str, InputDecl]:
    """``InputDecl`` records from the ``inputs:`` mapping, defaults checked against types."""
    inputs: dict[str, InputDecl] = {}
    for name, spec in raw.items():
        spec = spec or {}
        path = ("inputs", name)
        type_ = cast(InputType, spec.get("type", "string"))
        choices = spec.get("choices")
        ok = True
        typed_choices: list[Any] = []
        for i, choice in enumerate(choices or ()):
            try:
                typed_choices.append(coerce_value(choice, type_))
            except ValueError as exc:
                ok = False
                _err(col, pos, (*path, "choices", i), f"each choice must be {exc}.", "input")
        default = spec.get("default")
        if default is not None:
            try:
                default = coerce_value(default, type_)
            except ValueError as exc:
                ok = False
                _err(col, pos, (*path, "default"), f"the default must be {exc}.", "input")
            else:
                if choices and default not in typed_choices:
                    ok = False
                    options = ", ".join(value_text(c) for c in typed_choices)
                    _err(
                        col,
                        pos,
                        (*path, "default"),
                        f"the default must be one of the choices: {options}.",
                        "input",
                    )
        if not ok:
            # Keep the input (without the bad parts) so its uses are not reported as undeclared.
            default, typed_choices, choices = None, [], None
        inputs[name] = InputDecl(
            name=name,
            type=type_,
            default=default,
            description=spec.get("description"),
            required=bool(spec.get("required", True)),
            placeholder=spec.get("placeholder"),
            choices=tuple(typed_choices) if choices else None,
        )
    return inputs


def _build_params(
    data: dict[str, Any], pos: YamlPositions, col: Collector, bad: set[str]
) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if "params" in data and "params" not in bad and data["params"]:
        params.update(data["params"])
    for key in PARAM_KEYS:
        if key in data and key not in bad:
            if key in params:
                _err(
                    col,
                    pos,
                    ("params", key),
                    f"`{key}` is given both at the top level and under params:; keep one.",
                    "params",
                    at_key=True,
                )
            params[key] = data[key]
    for key, value in params.items():
        # YAML reads .nan and .inf as floats; no provider accepts them.
        if isinstance(value, float) and not math.isfinite(value):
            where = (key,) if key in data else ("params", key)
            _err(col, pos, where, f"must be a finite number (got {value}).", "params")
    return params


def _build_budget(raw: dict[str, Any], pos: YamlPositions, col: Collector) -> Budget:
    seconds: float | None = None
    for key in ("max_seconds", "timeout"):
        if key in raw:
            if seconds is not None:
                _err(
                    col,
                    pos,
                    ("budget", key),
                    "give the wall-time limit once: max_seconds or timeout, not both.",
                    "budget",
                    at_key=True,
                )
                continue
            try:
                seconds = parse_duration(raw[key])
            except ValueError as exc:
                _err(col, pos, ("budget", key), f"must be {exc}.", "budget")
    return Budget(
        max_tokens=raw.get("max_tokens"),
        max_cost_usd=float(raw["max_cost_usd"]) if "max_cost_usd" in raw else None,
        max_turns=raw.get("max_turns"),
        max_seconds=seconds,
    )


def _build_compaction(
    raw: Any, window: int | None, pos: YamlPositions, col: Collector
) -> Compaction:
    base = Compaction()
    if raw is False:
        return Compaction(enabled=False, context_window=window)
    spec = raw if isinstance(raw, dict) else {}
    policy = Compaction(
        threshold=float(spec.get("threshold", base.threshold)),
        keep_recent=float(spec.get("keep_recent", base.keep_recent)),
        context_window=window,
    )
    if policy.keep_recent >= policy.threshold:
        _err(
            col,
            pos,
            ("compaction", "keep_recent"),
            f"keep_recent ({policy.keep_recent:g}) must be below threshold "
            f"({policy.threshold:g}): the turns kept verbatim must leave room to shrink.",
            "compaction",
        )
    return policy


def _build_retry(raw: dict[str, Any], pos: YamlPositions, col: Collector) -> RetryPolicy:
    base = RetryPolicy()
    delays: dict[str, float] = {}
    for key in ("initial_delay", "max_delay"):
        if key in raw:
            try:
                delays[key] = parse_duration(raw[key])
            except ValueError as exc:
                _err(col, pos, ("retry", key), f"must be {exc}.", "retry")
    policy = RetryPolicy(
        max_attempts=raw.get("max_attempts", base.max_attempts),
        initial_delay=delays.get("initial_delay", base.initial_delay),
        max_delay=delays.get("max_delay", base.max_delay),
        multiplier=float(raw.get("multiplier", base.multiplier)),
        jitter=float(raw.get("jitter", base.jitter)),
    )
    if policy.initial_delay > policy.max_delay:
        _err(
            col,
            pos,
            ("retry", "initial_delay"),
            f"initial_delay ({policy.initial_delay:g}s) is longer than max_delay "
            f"({policy.max_delay:g}s); raise max_delay or lower initial_delay.",
            "retry",
        )
    return policy


def resolve_tool(name: str, commands: dict[str, CommandDecl]) -> tuple[ToolKind, tuple[str, ...]]:
    """What a tool name stands for: a command, a built-in, built-ins by alias, or nothing."""
    if name in commands:
        return "command", (name,)
    if name in BUILTIN_TOOLS:
        return "builtin", (name,)
    mapped = map_tool_name(name)
    if mapped:
        return "alias", mapped
    if mapped == ():
        return "editor", ()
    return "unknown", ()


def _mcp_hint(name: str) -> str:
    # `github/*`, `context7/get-docs`, `microsoft.docs.mcp`: names of an MCP server's tools,
    # which flow offers once that server is configured.
    head = name.split("/", 1)[0]
    if "/" not in name and "." not in name:
        return ""
    return (
        f" unless an MCP server `{head}` is configured (.vscode/mcp.json, --mcp-config, or "
        "an agent's `mcp-servers:`)"
    )


def _resolve_tools(
    names: list[str],
    commands: dict[str, CommandDecl],
    broken: set[str],
    pos: YamlPositions,
    col: Collector,
) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    tool_map: dict[str, tuple[str, ...]] = {}
    resolved: list[str] = []
    editor_only: list[tuple[int, str]] = []
    extensions: list[tuple[int, str]] = []
    for i, name in enumerate(names):
        kind, targets = resolve_tool(name, commands)
        tool_map[name] = targets
        if kind == "editor":
            editor_only.append((i, name))
        if kind == "unknown" and is_extension_tool(name):
            extensions.append((i, name))
            continue
        # A command whose declaration has errors was reported there; do not report it twice.
        if kind == "unknown" and name not in broken:
            line, column = pos.value(("tools", i))
            hint = did_you_mean(name, [*commands, *BUILTIN_TOOLS])
            col.warning(
                f"tool `{name}` is neither a declared command nor a built-in tool{hint}, so it "
                f"is not offered to the model{_mcp_hint(name) if not hint else ''}.",
                line=line,
                column=column,
                field=field_path(("tools", i)),
                code="unknown-tool",
            )
        for target in targets:
            if target not in resolved:
                resolved.append(target)
    if editor_only:
        # One line for all of them: they are expected in Copilot files, not mistakes.
        line, column = pos.value(("tools", editor_only[0][0]))
        col.warning(
            editor_only_line([name for _, name in editor_only]),
            line=line,
            column=column,
            field=field_path(("tools",)),
            code="editor-only",
        )
    if extensions:
        # One line for all of them too: a VS Code agent lists a dozen (issue 43).
        line, column = pos.value(("tools", extensions[0][0]))
        col.warning(
            extension_tools_line([name for _, name in extensions]),
            line=line,
            column=column,
            field=field_path(("tools",)),
            code="extension-tools",
        )
    return tool_map, tuple(resolved)


def _err(
    col: Collector,
    pos: YamlPositions,
    path: tuple[str | int, ...],
    message: str,
    code: str,
    *,
    at_key: bool = False,
) -> None:
    line, column = pos.key(path) if at_key else pos.value(path)
    col.error(message, line=line, column=column, field=field_path(path), code=code)
