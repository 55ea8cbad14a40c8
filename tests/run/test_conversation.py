"""Transcript → provider messages: the shape providers need, built incrementally."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from promptflow_resume.chat import Message, ToolCall
from promptflow_resume.progress.model import Entry
from promptflow_resume.run.conversation import (
    MessageLog,
    final_answer,
    to_messages,
    unanswered_calls,
)


def entries(*specs: tuple[str, str]) -> list[Entry]:
    return [
        Entry(
            id=i,
            role=role,
            content=content,
            step="s",
            call_id=f"c{i}" if "tool" in role else None,
            tool="t" if "tool" in role else None,
        )  # type: ignore[arg-type]
        for i, (role, content) in enumerate(specs, start=1)
    ]


def test_tool_calls_fold_into_their_assistant_message() -> None:
    log = entries(
        ("system", "be brief"),
        ("user", "go"),
        ("assistant", "calling"),
        ("tool_call", "{}"),
        ("tool_call", '{"a": 1}'),
    )
    log.append(Entry(id=6, role="tool_result", content="out", step="s", call_id="c4", tool="t"))
    assert to_messages(log) == (
        Message("system", "be brief"),
        Message("user", "go"),
        Message(
            "assistant",
            "calling",
            tool_calls=(ToolCall("c4", "t", "{}"), ToolCall("c5", "t", '{"a": 1}')),
        ),
        Message("tool", "out", tool_call_id="c4", name="t"),
    )
    assert [e.id for e in unanswered_calls(log)] == [5]


def test_notes_are_marked_for_replay() -> None:
    (message,) = to_messages(entries(("note", "resumed")))
    assert message.role == "user" and message.note


def test_final_answer_is_a_reply_without_tool_calls() -> None:
    assert final_answer(entries(("user", "go"), ("assistant", "done")), "s") is not None
    assert (
        final_answer(entries(("user", "go"), ("assistant", "x"), ("tool_call", "{}")), "s") is None
    )
    assert final_answer(entries(("user", "go")), "s") is None
    assert final_answer(entries(("user", "go"), ("assistant", "done")), "other") is None


ROLES = st.sampled_from(["system", "user", "assistant", "tool_call", "tool_result", "note"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(ROLES, st.booleans()), max_size=80))
def test_the_incremental_log_equals_a_full_conversion(script: list[tuple[str, bool]]) -> None:
    log = MessageLog()
    grown: list[Entry] = []
    for index, (role, look) in enumerate(script, start=1):
        grown.append(Entry(id=index, role=role, content=f"m{index}", call_id=f"c{index}", tool="t"))  # type: ignore[arg-type]
        if look:
            assert log.messages(grown) == to_messages(grown)
    assert log.messages(grown) == to_messages(grown)


@settings(max_examples=100, deadline=None)
@given(st.lists(ROLES, min_size=1, max_size=60), st.data())
def test_an_earlier_request_keeps_its_messages_as_the_log_grows(
    roles: list[str], data: st.DataObject
) -> None:
    # Requests share the log's final messages instead of copying them: each must still hold
    # exactly the messages of its own moment, and behave as the tuple of them.
    log = MessageLog()
    grown: list[Entry] = []
    taken = []
    for index, role in enumerate(roles, start=1):
        grown.append(Entry(id=index, role=role, content=f"m{index}", call_id=f"c{index}", tool="t"))  # type: ignore[arg-type]
        taken.append((log.messages(grown), to_messages(grown)))
    if data.draw(st.booleans()):
        # Not an append (a transcript read again, with an edit): the log starts over.
        grown = [replace(e, content="edited" if e.id == 1 else e.content) for e in grown]
        assert log.messages(grown) == to_messages(grown)
    for messages, expected in taken:
        assert messages == expected
        assert expected == messages
        assert tuple(messages) == expected
        assert len(messages) == len(expected)
        assert hash(messages) == hash(expected)
        assert messages[:] == expected[:]
        assert messages[1:-1] == expected[1:-1]
        if expected:
            at = data.draw(st.integers(-len(expected), len(expected) - 1))
            assert messages[at] == expected[at]
