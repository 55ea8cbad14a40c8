"""The provider-neutral chat records every part passes around: messages, tool calls, tool specs.

Providers turn them into their own wire format; tools describe themselves with a ``ToolSpec``;
the conversation is rebuilt from the transcript as ``Message`` records::

    Message("assistant", "", tool_calls=(ToolCall("c1", "read_file", '{"path": "a.py"}'),))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

MessageRole = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


#: Sets one attribute of a frozen record: how its ``__init__`` stores its fields.
_set_field = object.__setattr__


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for. ``arguments`` is the JSON text the model produced."""

    id: str
    name: str
    arguments: str

    def __init__(self, id: str, name: str, arguments: str) -> None:
        # The generated __init__ of a frozen record sets each field through
        # object.__setattr__; one store of the instance dict is twice as fast, and a resumed
        # run builds all its messages at once (tests/progress/test_chat_records.py checks that this
        # signature and the fields agree).
        _set_field(self, "__dict__", {"id": id, "name": name, "arguments": arguments})


@dataclass(frozen=True)
class Message:
    """One chat message in the provider-neutral shape."""

    role: MessageRole
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    #: For ``role == "tool"``: the call this message answers, and the tool's name.
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    #: A message flow adds about the run itself (e.g. "this run was resumed"). Providers send
    #: it like any other; ``replay`` ignores it when matching a request to the recording.
    note: bool = False
    #: For the summary that stands for compacted entries: how many assistant replies it
    #: replaces (the ``scripted`` provider counts them to pick its reply). Never sent.
    replaces_replies: int = 0

    def __init__(
        self,
        role: MessageRole,
        content: str,
        tool_calls: tuple[ToolCall, ...] = (),
        tool_call_id: str | None = None,
        name: str | None = None,
        is_error: bool = False,
        note: bool = False,
        replaces_replies: int = 0,
    ) -> None:
        # As ToolCall's: one store of the instance dict (a 10,000-turn run's first request
        # after a resume builds 20,000 messages).
        _set_field(
            self,
            "__dict__",
            {
                "role": role,
                "content": content,
                "tool_calls": tool_calls,
                "tool_call_id": tool_call_id,
                "name": name,
                "is_error": is_error,
                "note": note,
                "replaces_replies": replaces_replies,
            },
        )
