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


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for. ``arguments`` is the JSON text the model produced."""

    id: str
    name: str
    arguments: str


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
