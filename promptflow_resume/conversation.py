"""How a transcript becomes the next model request, and what it still owes the model.

The transcript is the single source of truth for the conversation: an edited entry is what the
model sees next. Tool calls are separate entries following their assistant entry; here they are
folded back into one assistant message with ``tool_calls``, the shape every provider wants::

    messages = to_messages(run.transcript)
    pending = unanswered_calls(run.transcript)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import overload

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
        if entry.role == "note" and entry.step == step_id:
            continue
        return entry if entry.role == "assistant" and entry.step == step_id else None
    return None


class Messages(Sequence[Message]):
    """A request's messages: the first ``count`` of a log's final messages, then a tail.

    The final messages are shared with the log, not copied: it only ever appends to that list
    (a rebuild starts a new one), so the first ``count`` stay as they were. Compares equal to
    any sequence of the same messages (a tuple, say).
    """

    __slots__ = ("_count", "_done", "_tail")

    def __init__(self, done: list[Message], count: int, tail: tuple[Message, ...]) -> None:
        self._done = done
        self._count = count
        self._tail = tail

    def __len__(self) -> int:
        return self._count + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        at = index + len(self) if index < 0 else index
        if not 0 <= at < len(self):
            raise IndexError("message index out of range")
        return self._done[at] if at < self._count else self._tail[at - self._count]

    def __iter__(self) -> Iterator[Message]:
        return itertools.chain(itertools.islice(self._done, self._count), self._tail)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Messages({tuple(self)!r})"


class MessageLog:
    """``to_messages`` kept up to date incrementally, so a turn costs the same at entry 20,000
    as at entry 20.

    Messages up to the last assistant entry are final (its tool calls follow it directly); only
    the tail after it is converted again on each call, and the final ones are shared with the
    returned ``Messages``, not copied. Any change other than an append (a new log is made per
    engine, and hand edits happen before) rebuilds from scratch.
    """

    def __init__(self) -> None:
        self._done: list[Message] = []
        self._count = 0
        self._last: Entry | None = None

    def messages(self, entries: Sequence[Entry]) -> Messages:
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
        return Messages(self._done, len(self._done), to_messages(entries[self._count :]))
