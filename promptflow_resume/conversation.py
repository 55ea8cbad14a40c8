"""How a transcript becomes the next model request, and what it still owes the model.

The transcript is the single source of truth for the conversation: an edited entry is what the
model sees next. Tool calls are separate entries following their assistant entry; here they are
folded back into one assistant message with ``tool_calls``, the shape every provider wants::

    messages = to_messages(run.transcript)
    pending = unanswered_calls(run.transcript)
"""

from __future__ import annotations

from collections.abc import Sequence

from .chat import Message, ToolCall
from .progress.model import Entry


def to_messages(entries: Sequence[Entry]) -> tuple[Message, ...]:
    """Provider messages for a transcript (system, user, assistant + tool calls, tool results)."""
    messages: list[Message] = []
    pending_calls: list[ToolCall] = []
    assistant: Entry | None = None

    def flush() -> None:
        nonlocal assistant, pending_calls
        if assistant is not None:
            messages.append(
                Message("assistant", assistant.content, tool_calls=tuple(pending_calls))
            )
        assistant, pending_calls = None, []

    for entry in entries:
        if entry.role == "tool_call" and assistant is not None:
            pending_calls.append(
                ToolCall(id=entry.call_id or "", name=entry.tool or "", arguments=entry.content)
            )
            continue
        flush()
        if entry.role == "assistant":
            assistant = entry
        elif entry.role == "system":
            messages.append(Message("system", entry.content))
        elif entry.role == "user":
            messages.append(Message("user", entry.content))
        elif entry.role == "note":
            messages.append(Message("user", entry.content, note=True))
        elif entry.role == "tool_result":
            messages.append(
                Message(
                    "tool",
                    entry.content,
                    tool_call_id=entry.call_id,
                    name=entry.tool,
                    is_error=entry.is_error,
                )
            )
        elif entry.role == "tool_call":
            # A tool call with no assistant entry before it (a hand edit removed it): give the
            # model an empty assistant turn carrying the call, so the history stays valid.
            assistant = Entry(id=0, role="assistant", content="")
            pending_calls.append(
                ToolCall(id=entry.call_id or "", name=entry.tool or "", arguments=entry.content)
            )
    flush()
    return tuple(messages)


def skipped_output(step_id: str) -> str:
    """What ``${step:ID}`` of a skipped step reads: a note, so a later prompt is not silently
    missing a part."""
    return f"(step {step_id} was skipped; it has no output)"


def unanswered_calls(entries: Sequence[Entry]) -> list[Entry]:
    """The ``tool_call`` entries of the last assistant reply that have no ``tool_result`` yet."""
    answered: set[str] = set()
    calls: list[Entry] = []
    for entry in reversed(entries):
        if entry.role == "tool_result" and entry.call_id:
            answered.add(entry.call_id)
        elif entry.role == "tool_call":
            calls.append(entry)
        elif entry.role in ("assistant", "user", "system"):
            break
    calls.reverse()
    return [c for c in calls if c.call_id not in answered]


def step_entries(entries: Sequence[Entry], step_id: str) -> list[Entry]:
    """The entries recorded for one step, in order."""
    return [e for e in entries if e.step == step_id]


def final_answer(entries: Sequence[Entry], step_id: str) -> Entry | None:
    """The step's last assistant entry, if the step's conversation ended on it (no tool calls).

    Only the tail is read: a step's entries are the last ones while it runs.
    """
    for entry in reversed(entries):
        if entry.role == "decision" or (entry.role == "note" and entry.step == step_id):
            continue  # flow's own entries: the step's conversation may still end on an answer
        return entry if entry.role == "assistant" and entry.step == step_id else None
    return None


class MessageLog:
    """``to_messages`` kept up to date incrementally, so a turn costs the same at entry 20,000
    as at entry 20.

    Messages up to the last assistant entry are final (its tool calls follow it directly); only
    the tail after it is converted again on each call. Any change other than an append (a new
    log is made per engine, and hand edits happen before) rebuilds from scratch.
    """

    def __init__(self) -> None:
        self._done: list[Message] = []
        self._count = 0
        self._last: Entry | None = None

    def messages(self, entries: Sequence[Entry]) -> tuple[Message, ...]:
        """The provider messages for ``entries`` (which must extend the previous call's)."""
        if self._count > len(entries) or (
            self._count and entries[self._count - 1] is not self._last
        ):
            self._done, self._count, self._last = [], 0, None
        split = None
        for index in range(len(entries) - 1, self._count - 1, -1):
            if entries[index].role == "assistant":
                split = index
                break
        if split is not None and split > self._count:
            self._done.extend(to_messages(entries[self._count : split]))
            self._count = split
            self._last = entries[split - 1]
        return (*self._done, *to_messages(entries[self._count :]))
