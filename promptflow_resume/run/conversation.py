"""How a transcript becomes the next model request, and what it still owes the model.

The transcript is the single source of truth for the conversation: an edited entry is what the
model sees next. Tool calls are separate entries following their assistant entry; here they are
folded back into one assistant message with ``tool_calls``, the shape every provider wants::

    messages = to_messages(run.transcript)
    pending = unanswered_calls(run.transcript)
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from typing import overload

from ..base import collector
from ..chat import Message, ToolCall
from ..progress.model import Entry

_role = operator.attrgetter("role")
#: The roles ``RequestView`` keeps verbatim when they open the run or a step.
_PROMPT_ROLES = frozenset({"system", "user"})

#: How a compaction summary opens in a request, before the summary itself.
SUMMARY_LEAD = (
    "Summary of the earlier conversation (entries {first}-{last} of the run's transcript, "
    "compacted to fit the context window; the step prompts above are kept verbatim):"
)


def summary_message_text(entry: Entry) -> str:
    """The text a ``compaction`` entry is sent as: a lead naming what it covers, the summary."""
    first, last = entry.covers or (entry.id, entry.id)
    return f"{SUMMARY_LEAD.format(first=first, last=last)}\n\n{entry.content}"


class RequestView:
    """The entries a request is built from, kept up to date as the transcript grows.

    A ``compaction`` entry is appended to the transcript like any other, but in the view it
    takes the place of the entries it covers (``Entry.covers``), except the ones kept verbatim:
    the system entry and each step's prompt (its first user entry). It stands where the last
    entry it covers stood, so the model reads the step prompts, the summary, then the recent
    turns. A later compaction may cover an earlier one (then the new summary includes it).
    The view depends on the transcript alone, so a resumed or replayed run builds the same
    requests as the run that wrote it.
    """

    def __init__(self) -> None:
        #: Bumped whenever the view changed other than by an append.
        self.generation = 0
        self._reset()

    def _reset(self) -> None:
        self.entries: list[Entry] = []
        #: Assistant replies each compaction in the view stands for (id -> count).
        self.replies: dict[int, int] = {}
        self._kept: set[int] = set()
        self._steps: set[str | None] = set()
        self._seen = 0
        self._seen_last: Entry | None = None

    def messages(self) -> tuple[Message, ...]:
        """The provider messages of the view as it is now."""
        return _convert(self.entries, self.replies)

    def is_kept(self, entry: Entry) -> bool:
        """True for the entries a compaction never covers (system entry, step prompts)."""
        return entry.id in self._kept

    def update(self, entries: Sequence[Entry]) -> list[Entry]:
        """The view of ``entries`` (which extend the previous call's, else it is rebuilt)."""
        if self._seen > len(entries) or (
            self._seen and entries[self._seen - 1] is not self._seen_last
        ):
            self._reset()  # a hand edit or another transcript
            self.generation += 1
        added = entries[self._seen :]
        roles = list(map(_role, added))
        if "compaction" not in roles:
            # The common case, with only prompts looked at one by one: a resumed 10,000-turn
            # run passes its 30,000 entries through here before its first request.
            for entry in itertools.compress(added, map(_PROMPT_ROLES.__contains__, roles)):
                self._note_prompt(entry)
            self.entries.extend(added)
        else:
            for entry in added:
                if entry.role == "compaction" and entry.covers is not None:
                    self._apply(entry)
                    continue
                self._note_prompt(entry)
                self.entries.append(entry)
        self._seen = len(entries)
        self._seen_last = entries[-1] if entries else None
        return self.entries

    def _note_prompt(self, entry: Entry) -> None:
        """Keep the system entry and each step's first user entry verbatim."""
        if entry.role == "system" or (entry.role == "user" and entry.step not in self._steps):
            self._kept.add(entry.id)
        if entry.role == "user":
            self._steps.add(entry.step)

    def _apply(self, compaction: Entry) -> None:
        first, last = compaction.covers or (0, -1)
        kept: list[Entry] = []
        position = None
        replies = 0
        for entry in self.entries:
            key = entry.covers[1] if entry.role == "compaction" and entry.covers else entry.id
            if first <= key <= last and entry.id not in self._kept:
                position = len(kept)
                replies += self.replies.pop(entry.id, 0) + (entry.role == "assistant")
                continue
            kept.append(entry)
        if position is None:  # covers nothing the view still holds: it goes by its place
            position = sum(
                1
                for e in kept
                if (e.covers[1] if e.role == "compaction" and e.covers else e.id) <= last
            )
        kept.insert(position, compaction)
        self.entries = kept
        self.replies[compaction.id] = replies
        self.generation += 1


def request_view(entries: Sequence[Entry]) -> list[Entry]:
    """The entries a request is built from: compaction summaries in place of what they cover."""
    return RequestView().update(entries)


def to_messages(entries: Sequence[Entry]) -> tuple[Message, ...]:
    """Provider messages for a transcript (system, user, assistant + tool calls, tool results);
    compaction summaries stand in for the entries they cover."""
    if not any(e.role == "compaction" for e in entries):
        return _convert(entries)
    view = RequestView()
    return _convert(view.update(entries), view.replies)


def _convert(
    entries: Sequence[Entry], replies: dict[int, int] | None = None
) -> tuple[Message, ...]:
    """Provider messages for entries already in request order."""
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
        elif entry.role == "compaction":
            messages.append(
                Message(
                    "user",
                    summary_message_text(entry),
                    replaces_replies=(replies or {}).get(entry.id, 0),
                )
            )
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


#: Finish reasons that say a reply was cut off at its token limit: OpenAI's and the servers
#: that speak its API (``length``), Anthropic's (``max_tokens``).
CUT_OFF = frozenset({"length", "max_tokens"})


def incomplete_why(entry: Entry) -> str | None:
    """Why an assistant reply that ends a step is not a whole answer, in words that follow
    "the reply" (``was empty``, ``was cut off at the token limit``); None when it is whole."""
    if entry.role != "assistant":
        return None
    finish = entry.meta.finish if entry.meta is not None else None
    if finish in CUT_OFF:
        return "was cut off at the token limit (max_tokens)"
    if not entry.content.strip():
        return "was empty"
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
    engine, and hand edits happen before) rebuilds from scratch; so does a compaction, which
    changes the view the messages are built from (``RequestView``).
    """

    def __init__(self) -> None:
        self.view = RequestView()
        self._done: list[Message] = []
        self._count = 0
        self._last: Entry | None = None
        self._generation = 0

    def messages(self, entries: Sequence[Entry]) -> Messages:
        """The provider messages for ``entries`` (which must extend the previous call's)."""
        view = self.view.update(entries)
        if (
            self._generation != self.view.generation
            or self._count > len(view)
            or (self._count and view[self._count - 1] is not self._last)
        ):
            self._done, self._count, self._last = [], 0, None
            self._generation = self.view.generation
        split = None
        for index in range(len(view) - 1, self._count - 1, -1):
            if view[index].role == "assistant":
                split = index
                break
        replies = self.view.replies
        if split is not None and split > self._count:
            # The final messages live as long as the log: built at once after a resume, as
            # long-lived objects (collector.long_lived).
            with collector.long_lived() if split - self._count > 1000 else nullcontext():
                self._done.extend(_convert(view[self._count : split], replies))
            self._count = split
            self._last = view[split - 1]
        return Messages(self._done, len(self._done), _convert(view[self._count :], replies))
