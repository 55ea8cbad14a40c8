"""Tools that only write into the progress file: a todo list and a scratchpad.

``manage_todo_list`` takes the whole list each time and answers with it as a Markdown
checklist, so the progress file shows the list as it stood after every change and the latest
one is the last such result in the transcript (nothing else holds it, so a resumed run sees
exactly what the file shows). ``think`` records a thought; it changes nothing. Both are
idempotent.
"""

from __future__ import annotations

from typing import Any

from ..chat import ToolSpec
from .builtin import _object_schema, error_result, signature, validate_arguments
from .tool import Standalone, ToolContext, ToolResult

_MARKS = {"not-started": "[ ]", "in-progress": "[ ]", "completed": "[x]"}


def checklist(todos: list[dict[str, Any]]) -> str:
    """The todo list as Markdown task items (in-progress ones marked so)."""
    lines = []
    for item in todos:
        status = item.get("status", "not-started")
        title = " ".join(str(item["title"]).split())
        extra = " *(in progress)*" if status == "in-progress" else ""
        lines.append(f"- {_MARKS[status]} {title}{extra}")
    return "\n".join(lines)


class ManageTodoList(Standalone):
    """``manage_todo_list {todos}``: replace the todo list; the result is the checklist."""

    idempotent = True
    #: Changes no file: no snapshot after its calls (docs/spec.md 12).
    read_only = True
    spec = ToolSpec(
        name="manage_todo_list",
        description=(
            "Keep a todo list for this task: send the complete list every time (titles and "
            "status not-started, in-progress or completed); it is shown as a checklist."
        ),
        parameters=_object_schema(
            {
                "todos": {
                    "type": "array",
                    "maxItems": 200,
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": {"type": "string", "minLength": 1, "maxLength": 500},
                            "status": {
                                "type": "string",
                                "enum": ["not-started", "in-progress", "completed"],
                            },
                        },
                        "required": ["title", "status"],
                    },
                }
            },
            ["todos"],
        ),
    )

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """The list as a checklist with a count of what is done."""
        problem = validate_arguments(self.spec.parameters, arguments)
        if problem is not None:
            return error_result(f"{problem}. Expected: {signature(self.spec)}.")
        todos = arguments["todos"]
        if not todos:
            return ToolResult("Todo list: (empty)")
        done = sum(1 for t in todos if t["status"] == "completed")
        return ToolResult(f"Todo list ({done} of {len(todos)} done):\n\n{checklist(todos)}")


class Think(Standalone):
    """``think {thought}``: a recorded scratchpad; nothing changes."""

    idempotent = True
    #: Changes no file: no snapshot after its calls (docs/spec.md 12).
    read_only = True
    spec = ToolSpec(
        name="think",
        description=(
            "Think through a problem step by step. The thought is recorded; nothing else happens."
        ),
        parameters=_object_schema(
            {"thought": {"type": "string", "minLength": 1, "description": "Your reasoning."}},
            ["thought"],
        ),
    )

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Acknowledge the thought (it is in the call's arguments in the progress file)."""
        problem = validate_arguments(self.spec.parameters, arguments)
        if problem is not None:
            return error_result(f"{problem}. Expected: {signature(self.spec)}.")
        return ToolResult("thought recorded")
