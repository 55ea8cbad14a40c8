"""Names of the built-in tools, and how prompt-file tool names map onto them.

VS Code / Copilot prompt files list tools by their Copilot names, alone (``editFiles``), with
their tool-set prefix (``edit/editFiles``) or as a whole set (``edit``). ``COPILOT_TOOLS`` is
the table from those names to flow's built-ins; ``EDITOR_ONLY`` lists the names that only
make sense inside the editor (its problems panel, its language server, its browser), which are
reported in one line rather than one warning per name::

    map_tool_name("edit/editFiles")   # ("read_file", "create_file", "replace_string_in_file", ...)
    map_tool_name("problems")         # ()   -- known, editor-only
    map_tool_name("notATool")         # None -- unknown

Every built-in name satisfies the function-name rules of the providers (letters, digits and
``_``, at most 64 characters), so the same name is sent to every provider.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Built-in tools, confined to the workspace root.
BUILTIN_TOOLS: tuple[str, ...] = (
    "read_file",
    "write_file",
    "list_files",
    "search_files",
    "codebase_search",
    "create_file",
    "replace_string_in_file",
    "insert_text",
    "delete_file",
    "run_in_terminal",
    "get_changed_files",
    "fetch_webpage",
    "manage_todo_list",
    "think",
    "runTests",
    "testFailure",
    "load_skill",
)

#: The tool that runs another custom agent as a subagent: a child run of its own
#: (docs/spec.md 4.14). Not in ``BUILTIN_TOOLS``: its offer depends on the agents found, so
#: the sub-run machinery builds it for a run, not the tool registry.
SUBAGENT_TOOL = "run_agent"

_READ = ("read_file",)
_EDIT = (
    "read_file",
    "create_file",
    "replace_string_in_file",
    "insert_text",
    "delete_file",
    "write_file",
)
_SEARCH = ("codebase_search", "search_files", "list_files", "read_file")
_COMMANDS = ("run_in_terminal",)

#: Copilot tool or tool-set name (lower-cased; with its set prefix where it has one) -> built-ins.
#: A name is looked up as written, then by its last ``/`` part.
COPILOT_TOOLS: dict[str, tuple[str, ...]] = {
    # edit
    "edit": _EDIT,
    "edit/editfiles": _EDIT,
    "editfiles": _EDIT,
    "edit/createfile": ("create_file",),
    "createfile": ("create_file",),
    "edit/createdirectory": ("create_file",),
    "createdirectory": ("create_file",),
    # read and search
    "read": _READ,
    "read/readfile": _READ,
    "search/readfile": _READ,
    "readfile": _READ,
    "search": _SEARCH,
    "search/codebase": _SEARCH,
    "codebase": _SEARCH,
    "search/textsearch": ("search_files",),
    "textsearch": ("search_files",),
    "search/filesearch": ("list_files",),
    "filesearch": ("list_files",),
    "search/listdirectory": ("list_files",),
    "listdirectory": ("list_files",),
    # commands
    "runcommands": _COMMANDS,
    "runcommands/runinterminal": _COMMANDS,
    "execute": _COMMANDS,
    "execute/runinterminal": _COMMANDS,
    "runinterminal": _COMMANDS,
    "terminalcommand": _COMMANDS,
    # the workspace's changes, the web, notes to self
    "changes": ("get_changed_files",),
    "search/changes": ("get_changed_files",),
    "web": ("fetch_webpage",),
    "web/fetch": ("fetch_webpage",),
    "fetch": ("fetch_webpage",),
    # subagents (Copilot's agent tool set; Claude's Task/Agent translates to it)
    "agent": (SUBAGENT_TOOL,),
    "runsubagent": (SUBAGENT_TOOL,),
    "agent/runsubagent": (SUBAGENT_TOOL,),
    "todos": ("manage_todo_list",),
    "todo": ("manage_todo_list",),
    "think": ("think",),
    # tests
    "runtests": ("runTests",),
    "execute/runtests": ("runTests",),
    "testfailure": ("testFailure",),
    "execute/testfailure": ("testFailure",),
}

#: Copilot tool names (lower-cased, without set prefix) that only exist inside the editor.
EDITOR_ONLY: frozenset[str] = frozenset(
    {
        "problems",
        "usages",
        "vscodeapi",
        "extensions",
        "installextension",
        "opensimplebrowser",
        "githubrepo",
        "runtasks",
        "runtask",
        "createandruntask",
        "getterminaloutput",
        "terminallastcommand",
        "terminalselection",
        "searchresults",
        "new",
        "newworkspace",
        "getprojectsetupinfo",
        "runvscodecommand",
        "vscode",
        "runcommand",
        "editnotebook",
        "newjupyternotebook",
        "runnotebooks",
        "runnotebookcell",
        "readnotebookcelloutput",
        "getnotebooksummary",
        "findtestfiles",
        "copilotcodingagent",
        "searchsubagent",
        "askquestions",
        "awaitterminal",
        "killterminal",
    }
)

#: Built-ins that change files.
EDITING_TOOLS: frozenset[str] = frozenset(
    {"write_file", "create_file", "replace_string_in_file", "insert_text", "delete_file"}
)
#: What a prompt file with ``agent: plan`` may be offered: built-ins that only read (the
#: workspace, its changes, the web) or keep notes; no edits, no commands the model writes.
PLAN_TOOLS: frozenset[str] = frozenset(
    {
        "read_file",
        "list_files",
        "search_files",
        "codebase_search",
        "get_changed_files",
        "fetch_webpage",
        "manage_todo_list",
        "think",
    }
)
#: What a prompt file in ``mode: ask`` is not offered: edits and model-chosen commands.
ASK_EXCLUDED: frozenset[str] = EDITING_TOOLS | {"run_in_terminal"}


def _key(name: str) -> tuple[str, str]:
    key = name.strip().lower()
    return key, key.rsplit("/", 1)[-1]


def map_tool_name(name: str) -> tuple[str, ...] | None:
    """Built-ins a prompt-file tool name stands for; ``()`` for an editor-only tool, None when
    the name is unknown."""
    if name in BUILTIN_TOOLS or name == SUBAGENT_TOOL:
        return (name,)
    key, tail = _key(name)
    if key in COPILOT_TOOLS:
        return COPILOT_TOOLS[key]
    if tail in COPILOT_TOOLS:
        return COPILOT_TOOLS[tail]
    if tail in EDITOR_ONLY:
        return ()
    return None


def is_editor_only(name: str) -> bool:
    """True for a Copilot tool name that exists only in the editor (no flow tool does its job)."""
    return map_tool_name(name) == ()


#: A VS Code extension's tool: ``publisher.extension/tool`` (``ms-python.python/…``).
_EXTENSION_TOOL = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*\.[A-Za-z0-9][A-Za-z0-9.-]*/.+")


def is_extension_tool(name: str) -> bool:
    """True for the name of a tool a VS Code extension contributes (``publisher.ext/tool``):
    it exists only in the editor, unless an MCP server happens to have that name."""
    return _EXTENSION_TOOL.fullmatch(name.strip()) is not None


def extension_tools_line(names: list[str] | tuple[str, ...]) -> str:
    """The one line that reports tools of VS Code extensions (``flow check`` and a run)."""
    listed = ", ".join(f"`{n}`" for n in names)
    return (
        f"tools of VS Code extensions, not offered outside VS Code (unless an MCP server of "
        f"that name is configured): {listed}."
    )


def mcp_tool_names(tool_map: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The names of a ``tools:`` map (``Workflow.tool_map``) that no built-in or declared
    command resolves and that are not editor-only: MCP tool names (``server/*``, ``tool``)."""
    return [n for n, targets in tool_map.items() if not targets and not is_editor_only(n)]


def editor_only_line(names: list[str] | tuple[str, ...]) -> str:
    """The one line that reports editor-only tools (for a run, or for ``flow check``)."""
    listed = ", ".join(f"`{n}`" for n in names)
    return f"editor-only tools not offered outside VS Code: {listed}."
