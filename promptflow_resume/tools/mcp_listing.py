"""The ``mcp`` SDK (imported when a server starts), and the tools a server lists as
``McpToolInfo`` records, with their annotations::

    infos = await list_tools(session, "github")
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..base.errors import ToolServerError


@dataclass(frozen=True)
class McpToolInfo:
    """One tool as its server listed it."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False
    idempotent_hint: bool = False
    destructive: bool | None = None
    #: The tool runs only as an MCP task (``execution.taskSupport: "required"``): flow's SDK
    #: has no client for tasks, so such a tool is not offered (and ``flow check`` says so).
    task_required: bool = False

    def digest_source(self) -> dict[str, Any]:
        """What of the tool counts for the recorded tool-list hash."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "read_only": self.read_only,
            "idempotent": self.idempotent_hint,
            "destructive": self.destructive,
        }


def mcp_sdk() -> Any:
    """The ``mcp`` package, or a clear error naming the extra to install."""
    try:
        import mcp
    except ImportError:
        raise ToolServerError(
            "MCP servers need the `mcp` package, which is not installed.",
            hint="Install it with: pip install 'promptflow-resume[mcp]'.",
        ) from None
    return mcp


async def list_tools(session: Any, server: str) -> list[McpToolInfo]:
    """Every tool the server lists (all pages)."""
    infos: list[McpToolInfo] = []
    cursor: str | None = None
    mcp = mcp_sdk()
    for _ in range(1000):  # a server that pages forever is not followed forever
        params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
        listed = await session.list_tools(params=params)
        for tool in listed.tools:
            notes = tool.annotations
            infos.append(
                McpToolInfo(
                    server=server,
                    name=tool.name,
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema or {}),
                    read_only=bool(notes and notes.read_only_hint),
                    idempotent_hint=bool(notes and notes.idempotent_hint),
                    destructive=None if notes is None else notes.destructive_hint,
                    task_required=_task_support(tool) == "required",
                )
            )
        cursor = getattr(listed, "next_cursor", None)
        if not cursor:
            break
    return infos


def _task_support(tool: Any) -> str | None:
    """A listed tool's ``execution.taskSupport`` ("forbidden", "optional", "required")."""
    execution = getattr(tool, "execution", None)
    support = getattr(execution, "task_support", None)
    return str(support) if support is not None else None


def task_only_line(server: str, tools: Iterable[str]) -> str:
    """The line that says which tools of ``server`` are not offered because they need tasks."""
    listed = ", ".join(f"`{t}`" for t in tools)
    return (
        f"the MCP server `{server}` has tools that run only as MCP tasks, which flow does not "
        f"support: {listed}; they are not offered."
    )
