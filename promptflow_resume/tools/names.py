"""Names of the built-in tools, and how prompt-file tool names map onto them.

VS Code / Copilot prompt files list tools such as ``edit/editFiles`` or ``search/codebase``.
Where a built-in does the same job the name is mapped to it; any other name is reported by
``flow check`` and not offered to the model.
"""

from __future__ import annotations

#: Built-in file tools, confined to the workspace root.
BUILTIN_TOOLS: tuple[str, ...] = ("read_file", "write_file", "list_files", "search_files")

#: Prompt-file tool name (lower-cased, as written or its last ``/`` part) -> built-in.
PROMPT_FILE_ALIASES: dict[str, tuple[str, ...]] = {
    "edit/editfiles": ("read_file", "write_file"),
    "editfiles": ("read_file", "write_file"),
    "edit": ("read_file", "write_file"),
    "createfile": ("write_file",),
    "edit/createfile": ("write_file",),
    "readfile": ("read_file",),
    "read/readfile": ("read_file",),
    "read": ("read_file",),
    "search/codebase": ("search_files", "read_file"),
    "codebase": ("search_files", "read_file"),
    "search": ("search_files", "list_files"),
    "search/filesearch": ("list_files",),
    "filesearch": ("list_files",),
    "search/textsearch": ("search_files",),
    "textsearch": ("search_files",),
    "search/listdirectory": ("list_files",),
    "listdirectory": ("list_files",),
}


def map_tool_name(name: str) -> tuple[str, ...] | None:
    """Built-ins a prompt-file tool name stands for, or None when nothing fits."""
    if name in BUILTIN_TOOLS:
        return (name,)
    key = name.strip().lower()
    if key in PROMPT_FILE_ALIASES:
        return PROMPT_FILE_ALIASES[key]
    tail = key.rsplit("/", 1)[-1]
    return PROMPT_FILE_ALIASES.get(tail)
