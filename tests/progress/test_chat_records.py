"""The chat records' hand-written constructors agree with their fields, and the records
behave as frozen dataclasses: equal by value, hashable, immutable, ``replace``-able."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from promptflow_resume.chat import Message, ToolCall


@pytest.mark.parametrize("record", [Message, ToolCall])
def test_the_constructor_takes_exactly_the_fields_in_order_with_their_defaults(
    record: type,
) -> None:
    parameters = list(inspect.signature(record).parameters.values())
    fields = dataclasses.fields(record)
    assert [p.name for p in parameters] == [f.name for f in fields]
    for parameter, field in zip(parameters, fields, strict=True):
        assert parameter.default == (
            inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
        ), field.name


def test_a_built_message_has_every_field_and_behaves_as_a_frozen_record() -> None:
    call = ToolCall("c1", "read_file", '{"path": "a.py"}')
    message = Message("assistant", "", tool_calls=(call,))
    assert dataclasses.asdict(message) == {
        "role": "assistant",
        "content": "",
        "tool_calls": ({"id": "c1", "name": "read_file", "arguments": '{"path": "a.py"}'},),
        "tool_call_id": None,
        "name": None,
        "is_error": False,
        "note": False,
        "replaces_replies": 0,
    }
    assert message == Message("assistant", "", (ToolCall("c1", "read_file", '{"path": "a.py"}'),))
    assert hash(message) == hash(Message("assistant", "", tool_calls=(call,)))
    assert message != Message("assistant", "x", tool_calls=(call,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "other"  # type: ignore[misc]
    edited = dataclasses.replace(message, content="new", note=True)
    assert (edited.content, edited.note, edited.tool_calls) == ("new", True, (call,))
    assert repr(call) == "ToolCall(id='c1', name='read_file', arguments='{\"path\": \"a.py\"}')"
