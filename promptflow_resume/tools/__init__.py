"""Tools the model may call: built-in file tools and the workflow's declared commands.

Every tool comes from the workflow file (the built-ins it names, the commands it declares),
never from a progress file, so a shared progress file cannot make ``flow`` run anything::

    tools = build_tools(workflow, Path.cwd())
    specs = [tools[name].spec for name in offered_tool_names(workflow, step)]
    result = call_tool(tools, "read_file", '{"path": "README.md"}', ToolContext(Path.cwd()))

A name in ``tools:`` resolves to a declared command of that name first, else to the built-ins
``workflow.toolnames.map_tool_name`` maps it to (``edit/editFiles`` → ``read_file``,
``write_file``); a name that resolves to nothing is skipped here (``flow check`` reports it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..base.registry import Registry
from ..workflow.records import CommandDecl, Step, Workflow
from ..workflow.skillset import LOAD_TOOL
from ..workflow.toolnames import BUILTIN_TOOLS, SUBAGENT_TOOL, map_tool_name
from .builtin import error_result
from .declared import CommandTool, command_tool
from .tool import Tool, ToolContext, ToolFactory, ToolResult

__all__ = [
    "BUILTIN_TOOLS",
    "TOOLS",
    "CommandTool",
    "Tool",
    "ToolContext",
    "ToolFactory",
    "ToolResult",
    "build_tools",
    "call_tool",
    "command_tool",
    "offered_tool_names",
    "resolve_tool_names",
]


def resolve_tool_names(names: Sequence[str], commands: Mapping[str, CommandDecl]) -> list[str]:
    """Tool names as the model sees them, in order, without duplicates; unknown ones dropped."""
    resolved: list[str] = []
    for name in names:
        targets = (name,) if name in commands else (map_tool_name(name) or ())
        for target in targets:
            if target not in resolved:
                resolved.append(target)
    return resolved


def build_tools(
    workflow: Workflow,
    workspace: Path,
    *,
    names: Sequence[str] | None = None,
    skills: bool = False,
) -> dict[str, Tool]:
    """The tools a run may use, by name; with ``names`` (a step's list) only those.

    Without ``names``: the tools of ``workflow.tools`` (what the loader resolved from the
    front matter's ``tools:``) followed by every other declared command, because command steps
    run those and resume must know whether each is idempotent, then what steps' own lists
    add. Which of them the model is *offered* is ``offered_tool_names``. A declared command
    wins over a built-in of the same name; only ``workflow.commands`` can produce a command
    tool. The subagent tool is not built here (its offer depends on the agents found).
    WorkflowError if a command's ``cwd`` leaves ``workspace``. With ``skills`` (a run that
    offers skills) ``load_skill`` is among them too, so resume can tell that a load in flight
    is safe to run again.
    """
    wanted = list(workflow.tools if names is None else names)
    if names is None:
        wanted += [name for name in workflow.commands if name not in wanted]
        # A step's own list may name more (a handoff chain's parts offer their agents' tools).
        wanted += [n for s in workflow.steps for n in s.tools or () if n not in wanted]
    tools: dict[str, Tool] = {}
    for name in resolve_tool_names(wanted, workflow.commands):
        decl = workflow.commands.get(name)
        if decl is None and name == SUBAGENT_TOOL:
            continue  # built per run from the agents found (subworkflows.SubworkflowRunner)
        tools[name] = (
            command_tool(decl, workspace)
            if decl is not None
            else _builtin(name, workflow, workspace)
        )
    if skills and LOAD_TOOL not in tools:
        tools[LOAD_TOOL] = _builtin(LOAD_TOOL, workflow, workspace)
    return tools


#: Built-in tool name → the class that implements it (a ``ToolFactory``). A tool's module is
#: imported when a workflow names the tool, so a run that uses none does not load it. Another
#: package adds its own with the same call (``TOOLS.register("mine", "my_package.tools:Mine")``);
#: ``workflow.toolnames.BUILTIN_TOOLS`` lists the same names for the loader, which a test
#: keeps equal.
TOOLS: Registry[ToolFactory] = Registry("tool")
TOOLS.register("read_file", "promptflow_resume.tools.builtin:ReadFile")
TOOLS.register("write_file", "promptflow_resume.tools.builtin:WriteFile")
TOOLS.register("list_files", "promptflow_resume.tools.builtin:ListFiles")
TOOLS.register("search_files", "promptflow_resume.tools.searchfiles:SearchFiles")
TOOLS.register("codebase_search", "promptflow_resume.tools.codebase:CodebaseSearch")
TOOLS.register("create_file", "promptflow_resume.tools.edit:CreateFile")
TOOLS.register("replace_string_in_file", "promptflow_resume.tools.edit:ReplaceString")
TOOLS.register("insert_text", "promptflow_resume.tools.edit:InsertText")
TOOLS.register("delete_file", "promptflow_resume.tools.edit:DeleteFile")
TOOLS.register("run_in_terminal", "promptflow_resume.tools.terminal:RunInTerminal")
TOOLS.register("get_changed_files", "promptflow_resume.tools.changes:GetChangedFiles")
TOOLS.register("fetch_webpage", "promptflow_resume.tools.fetch:FetchWebpage")
TOOLS.register("manage_todo_list", "promptflow_resume.tools.notes:ManageTodoList")
TOOLS.register("think", "promptflow_resume.tools.notes:Think")
TOOLS.register("runTests", "promptflow_resume.tools.terminal:RunTests")
TOOLS.register("testFailure", "promptflow_resume.tools.terminal:FailingTests")
TOOLS.register("load_skill", "promptflow_resume.tools.skills:LoadSkill")


def _builtin(name: str, workflow: Workflow, workspace: Path) -> Tool:
    """A fresh built-in tool for a run of ``workflow`` in ``workspace``."""
    return TOOLS.load(name)(workflow, workspace)


def offered_tool_names(workflow: Workflow, step: Step | None = None) -> tuple[str, ...]:
    """The tools the model is offered in ``step``: its own ``tools`` list, else the workflow's.

    A declared command that no list names is not offered (a command step may still run it).
    """
    names = step.tools if step is not None and step.tools is not None else workflow.tools
    return tuple(resolve_tool_names(names, workflow.commands))


def call_tool(
    tools: Mapping[str, Tool], name: str, arguments: str | Mapping[str, Any], ctx: ToolContext
) -> ToolResult:
    """Run the tool ``name`` with the model's arguments (JSON text or a mapping).

    An unknown tool or arguments that are not a JSON object come back as error results the
    model can act on, like every other mistake it can make.
    """
    tool = tools.get(name)
    if tool is None:
        offered = ", ".join(sorted(tools)) or "none"
        return error_result(f"there is no tool named `{name}`; the tools here are: {offered}")
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            return error_result(f"the arguments are not valid JSON ({exc}); send a JSON object")
    else:
        parsed = dict(arguments)
    if not isinstance(parsed, dict):
        return error_result('the arguments must be a JSON object, e.g. {"path": "README.md"}')
    return tool.run(parsed, ctx)
