"""Custom agent files: VS Code / Copilot ``*.agent.md`` and Claude ``.claude/agents/*.md``.

An agent is a persona, not a task: its Markdown body is the run's system instructions and the
task arrives at run time (``flow run NAME.agent.md --task TEXT``) as the input ``task``, the
user message of the agent's one step. This module reads the keys only agents have, turns the
Claude dialect (``tools: Read, Grep``) into the Copilot one, and leaves the keys agents share
with prompt files (``model``, ``tools``, flow's own sections) to the workflow builders::

    is_agent_file(Path(".github/agents/reviewer.agent.md"))   # True
    spec = read_agent_keys(data, positions, col, claude=False)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .diagnostics import Collector
from .header import KNOWN_KEYS
from .hookfiles import agent_hooks
from .records import AgentSpec, Handoff
from .source import YamlPositions, field_path

#: The input that carries an agent's task.
TASK_INPUT = "task"
#: The suffix of a VS Code / Copilot custom agent file.
AGENT_SUFFIX = ".agent.md"

#: Keys of the VS Code / Copilot agent format that flow reads.
AGENT_KEYS: tuple[str, ...] = (
    "name",
    "description",
    "argument-hint",
    "tools",
    "model",
    "agents",
    "handoffs",
    "mcp-servers",
    "hooks",
    "target",
    "user-invocable",
    "user-invokable",
    "disable-model-invocation",
    "infer",
)
#: Keys of the agent formats that only an editor or another host acts on: known, kept, quiet.
HOST_KEYS: tuple[str, ...] = (
    "metadata",
    # Claude agent files
    "disallowedTools",
    "permissionMode",
    "mcpServers",
    "maxTurns",
    "skills",
    "memory",
    "color",
)
#: Prompt-file keys that mean nothing in an agent (it has no steps and is itself the agent).
_PROMPT_ONLY_KEYS = ("agent", "mode", "steps")
#: Every top-level key an agent file may have without a warning.
KNOWN_AGENT_KEYS: tuple[str, ...] = tuple(
    dict.fromkeys((*AGENT_KEYS, *HOST_KEYS, *(k for k in KNOWN_KEYS if k not in _PROMPT_ONLY_KEYS)))
)
#: Claude's own tool names (lower-cased) -> the Copilot names flow maps to built-ins.
CLAUDE_TOOLS: dict[str, str] = {
    "read": "read",
    "grep": "search/textSearch",
    "glob": "search/fileSearch",
    "ls": "search/listDirectory",
    "edit": "edit",
    "multiedit": "edit",
    "write": "edit",
    "bash": "execute",
    "webfetch": "web/fetch",
    "todowrite": "todo",
    "task": "agent",
    "agent": "agent",
}
#: Claude's model aliases; ``inherit`` means "the caller's model", which is no model here.
_CLAUDE_MODEL_INHERIT = "inherit"
#: Claude's model aliases -> the display names flow's model table maps (the newest of each).
CLAUDE_MODELS: dict[str, str] = {
    "sonnet": "Claude Sonnet 4.5",
    "opus": "Claude Opus 4.5",
    "haiku": "Claude Haiku 4.5",
}


def is_agent_file(path: Path) -> bool:
    """True for ``*.agent.md`` and for Markdown files in a ``.github/agents`` or
    ``.claude/agents`` folder (the places the hosts read agents from)."""
    name = path.name
    if name.endswith(AGENT_SUFFIX) and len(name) > len(AGENT_SUFFIX):
        return True
    parent = path.parent
    return (
        name.endswith(".md")
        and parent.name == "agents"
        and parent.parent.name in (".github", ".claude")
    )


def is_claude_agent(path: Path) -> bool:
    """True for an agent in a ``.claude/agents`` folder (Claude's dialect of the keys)."""
    return path.parent.name == "agents" and path.parent.parent.name == ".claude"


def agent_name(data: dict[str, Any], path: Path) -> str:
    """The ``name:`` key, else the file name without ``.agent.md`` (or ``.md``)."""
    name = data.get("name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    base = path.name
    for suffix in (AGENT_SUFFIX, ".md"):
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base


def claude_to_copilot(data: dict[str, Any], pos: YamlPositions, col: Collector) -> dict[str, Any]:
    """A Claude agent's keys in the Copilot dialect: ``tools`` and ``disallowedTools`` as
    comma-separated text become lists of Copilot names, ``model: inherit`` is no model and the
    aliases ``sonnet``, ``opus``, ``haiku`` name the newest model of each."""
    translated = dict(data)
    tools = data.get("tools")
    if isinstance(tools, str):
        translated["tools"] = [_claude_tool(t) for t in _split_names(tools)]
    denied = data.get("disallowedTools")
    if isinstance(denied, str | list):
        names = _split_names(denied) if isinstance(denied, str) else [str(n) for n in denied]
        if "tools" not in translated:
            # Claude: no `tools` means every tool; the denied ones are taken out of that.
            translated["tools"] = ["read", "search", "edit", "execute", "web", "todo"]
        out = {_claude_tool(n).lower() for n in names}
        translated["tools"] = [t for t in translated["tools"] if str(t).lower() not in out]
    model = data.get("model")
    if model == _CLAUDE_MODEL_INHERIT:
        del translated["model"]
    elif isinstance(model, str) and model.strip().lower() in CLAUDE_MODELS:
        translated["model"] = CLAUDE_MODELS[model.strip().lower()]
    return translated


def _split_names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _claude_tool(name: str) -> str:
    return CLAUDE_TOOLS.get(name.strip().lower(), name.strip())


def read_agent_keys(
    data: dict[str, Any], pos: YamlPositions, col: Collector, *, claude: bool = False
) -> AgentSpec:
    """The agent-only keys as an ``AgentSpec`` (the schema has checked their types)."""
    if "infer" in data:
        line, column = pos.key(("infer",))
        col.warning(
            "`infer` is deprecated in custom agents; write `user-invocable` (shown to people) "
            "and `disable-model-invocation` (kept from other agents) instead.",
            line=line,
            column=column,
            field=field_path(("infer",)),
            code="deprecated-key",
        )
    user_invocable = data.get("user-invocable", data.get("user-invokable", True))
    model_invocable = not data.get("disable-model-invocation", False)
    if "infer" in data and "disable-model-invocation" not in data:
        model_invocable = bool(data["infer"])
    agents = data.get("agents")
    allowed: tuple[str, ...] | None
    if agents is None or agents == "*":
        allowed = None
    else:
        allowed = tuple(str(a) for a in agents if isinstance(a, str))
    servers = data.get("mcp-servers")
    hooks = agent_hooks(data["hooks"], Path(col.path), pos, col) if "hooks" in data else ()
    return AgentSpec(
        argument_hint=_text(data.get("argument-hint")),
        handoffs=_handoffs(data.get("handoffs"), pos, col),
        agents=allowed,
        mcp_servers=dict(servers) if isinstance(servers, dict) else {},
        hooks=hooks,
        target=_text(data.get("target")),
        user_invocable=bool(user_invocable),
        model_invocable=model_invocable,
        dialect="claude" if claude else "copilot",
    )


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _handoffs(raw: Any, pos: YamlPositions, col: Collector) -> tuple[Handoff, ...]:
    if not isinstance(raw, list):
        return ()
    found: list[Handoff] = []
    labels: dict[str, int] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            continue
        label = str(item.get("label", "")).strip()
        if label in labels:
            line, column = pos.value(("handoffs", i, "label"))
            col.error(
                f"two handoffs are labelled `{label}` (the first is handoff {labels[label] + 1}); "
                "`--handoff LABEL` must name one, so give each its own label.",
                line=line,
                column=column,
                field=field_path(("handoffs", i, "label")),
                code="handoff",
            )
            continue
        labels[label] = i
        model = item.get("model")
        found.append(
            Handoff(
                label=label,
                agent=str(item.get("agent", "")).strip(),
                prompt=str(item.get("prompt") or ""),
                send=bool(item.get("send", False)),
                model=model.strip() if isinstance(model, str) and model.strip() else None,
                line=pos.value(("handoffs", i))[0],
            )
        )
    return tuple(found)
