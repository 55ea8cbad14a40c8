"""Recording (``--record``) and the ``replay`` provider, through real files."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptflow_resume.base.errors import (
    EXIT_PROVIDER,
    ProviderError,
    ProviderSetupError,
    ReplayMismatchError,
)
from promptflow_resume.chat import Message, ToolSpec
from promptflow_resume.providers import create_provider
from promptflow_resume.providers.provider import Provider, ProviderSettings, Reply, Request
from promptflow_resume.providers.recorder import RecordingProvider
from promptflow_resume.providers.recording import read_recording
from promptflow_resume.providers.replay import ReplayProvider
from promptflow_resume.providers.scripted import ScriptedProvider

TOOLS = (
    ToolSpec("read_file", "Read a file in the workspace.", {"type": "object"}),
    ToolSpec("run_tests", "Run the test suite.", {"type": "object", "properties": {}}),
)
SCRIPT: list[str | dict[str, Any]] = [
    {
        "content": "Let me read the notes.",
        "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.md"}}],
        "usage": {"input_tokens": 120, "output_tokens": 14, "cached_tokens": 100},
    },
    {
        "content": "The notes say: ship Friday. ✓",
        "usage": {"input_tokens": 160, "output_tokens": 9},
    },
    {
        "content": "",
        "tool_calls": [
            {"name": "run_tests", "arguments": {}},
            {"name": "read_file", "arguments": {"path": "CHANGES.md"}},
        ],
        "usage": {"input_tokens": 200, "output_tokens": 20},
    },
    {"content": "All green.\n\n## Not a heading of ours\n---", "usage": {"output_tokens": 5}},
]


def tool_result(name: str, arguments: str) -> str:
    """What our pretend tools return: depends only on the call, like a real idempotent tool."""
    return f"result of {name} {arguments}\nsecond line\u2028with a line separator"


def drive(
    provider: Provider,
    steps: list[str],
    *,
    note_before_step: int | None = None,
    stop_after_calls: int | None = None,
    history: list[Message] | None = None,
    start_step: int = 0,
    results: Callable[[str, str], str] = tool_result,
) -> tuple[list[Message], list[Reply]]:
    """A minimal run loop: each step is a user turn, then replies and tool results until the
    model answers without tool calls. Returns the conversation and the replies received."""
    messages = list(history) if history is not None else [Message("system", "You are careful.")]
    replies: list[Reply] = []
    for i, step in enumerate(steps[start_step:], start=start_step):
        if note_before_step == i:
            messages.append(Message("user", "This run was resumed after a crash.", note=True))
        if not history or i > start_step:
            messages.append(Message("user", step))
        while True:
            if stop_after_calls is not None and len(replies) == stop_after_calls:
                return messages, replies
            reply = provider.complete(
                Request(tuple(messages), TOOLS, "model-x", {"temperature": 0.2})
            )
            replies.append(reply)
            messages.append(Message("assistant", reply.content, reply.tool_calls))
            for call in reply.tool_calls:
                messages.append(
                    Message(
                        "tool",
                        results(call.name, call.arguments),
                        tool_call_id=call.id,
                        name=call.name,
                    )
                )
            if not reply.tool_calls:
                break
    return messages, replies


STEPS = ["Step 1: read the notes and summarize them.", "Step 2: run the tests."]


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, list[Reply]]:
    """A recording of the two-step run, made through RecordingProvider around scripted."""
    path = tmp_path / "run.recording.jsonl"
    recorder = RecordingProvider(
        ScriptedProvider.from_replies(SCRIPT), path, created="2025-05-01T09:30:00Z"
    )
    _, replies = drive(recorder, STEPS)
    return path, replies


def replay(path: Path) -> Provider:
    return create_provider(ProviderSettings(name="replay", recording=str(path)))


def test_replay_gives_the_recorded_replies_including_usage(
    recorded: tuple[Path, list[Reply]],
) -> None:
    path, original = recorded
    messages, replayed = drive(replay(path), STEPS)
    assert replayed == original
    assert [r.usage.input_tokens for r in replayed] == [120, 160, 200, 0]
    assert replayed[0].tool_calls[0].arguments == '{"path": "notes.md"}'
    assert messages[-1].content.startswith("All green.")


def test_recording_file_layout(recorded: tuple[Path, list[Reply]]) -> None:
    path, _ = recorded
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""  # ends with a newline
    header = json.loads(lines[0])
    assert header == {
        "flow_recording": 1,
        "provider": "scripted",
        "model": "model-x",
        "created": "2025-05-01T09:30:00Z",
    }
    assert lines[0].startswith('{"flow_recording": 1')
    exchanges = [json.loads(line) for line in lines[1:-1]]
    assert len(exchanges) == 4
    assert [e["request"]["prefix"] for e in exchanges] == [0, 2, 4, 6]
    # Each message appears once in the file: later lines list only what is new.
    assert [len(e["request"]["messages"]) for e in exchanges] == [2, 2, 2, 3]
    assert exchanges[1]["request"]["messages"][1] == {
        "role": "tool",
        "content": tool_result("read_file", '{"path": "notes.md"}'),
        "tool_call_id": "call_0_0",
        "name": "read_file",
    }
    assert all(list(e) == ["request", "reply"] for e in exchanges)
    assert all(list(e["request"]) == sorted(e["request"]) for e in exchanges)
    os_mode = path.stat().st_mode & 0o777
    assert os_mode == 0o600


def test_full_requests_reconstruct_from_prefixes(recorded: tuple[Path, list[Reply]]) -> None:
    path, _ = recorded
    rec = read_recording(path)
    requests = [req for req, _ in rec.requests()]
    assert [len(r["messages"]) for r in requests] == [2, 4, 6, 9]
    assert requests[3]["messages"][5]["content"] == STEPS[1]
    assert requests[2]["messages"][:4] == requests[1]["messages"]


def test_same_run_records_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1746091800")
    paths = [tmp_path / "a.recording.jsonl", tmp_path / "b.recording.jsonl"]
    for path in paths:
        drive(RecordingProvider(ScriptedProvider.from_replies(SCRIPT), path), STEPS)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert b'"created": "2025-05-01T09:30:00Z"' in paths[0].read_bytes()


def test_recording_again_into_the_same_file_changes_nothing(
    recorded: tuple[Path, list[Reply]],
) -> None:
    path, _ = recorded
    before = path.read_bytes()
    drive(RecordingProvider(ScriptedProvider.from_replies(SCRIPT), path), STEPS)
    assert path.read_bytes() == before


def test_fresh_recording_starts_over(recorded: tuple[Path, list[Reply]]) -> None:
    path, _ = recorded
    recorder = RecordingProvider(
        ScriptedProvider.from_replies(["Only this."]), path, fresh=True, created="x"
    )
    drive(recorder, ["Just one step."])
    assert len(read_recording(path)) == 1


def test_a_resumed_recording_equals_an_uninterrupted_one(
    tmp_path: Path, recorded: tuple[Path, list[Reply]]
) -> None:
    whole, _ = recorded
    split = tmp_path / "split.recording.jsonl"
    first = RecordingProvider(
        ScriptedProvider.from_replies(SCRIPT), split, created="2025-05-01T09:30:00Z"
    )
    history, _ = drive(first, STEPS, stop_after_calls=2)
    # A new process: new provider objects, new Message objects, a resume note in between.
    history = [Message(m.role, m.content, m.tool_calls, m.tool_call_id, m.name) for m in history]
    second = RecordingProvider(ScriptedProvider.from_replies(SCRIPT), split)
    drive(second, STEPS, history=history, start_step=1, note_before_step=1)
    assert split.read_bytes() == whole.read_bytes()


def test_note_messages_are_not_recorded_and_not_matched(
    recorded: tuple[Path, list[Reply]],
) -> None:
    path, original = recorded
    assert b"resumed" not in path.read_bytes()
    _, replayed = drive(replay(path), STEPS, note_before_step=1)
    assert replayed == original


def test_replay_is_stateless_across_processes(recorded: tuple[Path, list[Reply]]) -> None:
    path, original = recorded
    history, _ = drive(replay(path), STEPS, stop_after_calls=2)
    # A second provider (as after a crash) continues mid-run from the request alone.
    _, rest = drive(replay(path), STEPS, history=history, start_step=1)
    assert rest == original[2:]


def test_replay_streams_the_whole_text_once(recorded: tuple[Path, list[Reply]]) -> None:
    path, _ = recorded
    seen: list[str] = []
    provider = replay(path)
    provider.complete(
        Request(
            (Message("system", "You are careful."), Message("user", STEPS[0])),
            TOOLS,
            "model-x",
            {"temperature": 0.2},
        ),
        on_text=seen.append,
    )
    assert seen == ["Let me read the notes."]


def mismatch(path: Path, **changes: Callable[[str, str], str]) -> ReplayMismatchError:
    with pytest.raises(ReplayMismatchError) as info:
        drive(replay(path), STEPS, **changes)  # type: ignore[arg-type]
    return info.value


def test_mismatch_names_the_first_difference(recorded: tuple[Path, list[Reply]]) -> None:
    path, _ = recorded

    def changed(name: str, arguments: str) -> str:
        return tool_result(name, arguments).replace("second line", "2nd line")

    err = mismatch(path, results=changed)
    text = str(err)
    prefix = len(tool_result("read_file", '{"path": "notes.md"}').split("second")[0])
    assert text.startswith(f"{path}:3: ")  # the closest exchange: the second model call
    assert f"messages[3].content differs at character {prefix + 1}" in text
    assert 'recorded "…' in text and "second line" in text
    assert "sent" in text and "2nd line" in text
    assert "(it has 4 messages, 4 sent; the first 3 agree)" in text
    assert "Re-record the session with `flow run --record`" in text
    assert "\n" not in text  # one paragraph
    assert not err.transient and err.exit_code == EXIT_PROVIDER
    assert err.reason == "replay_mismatch"


def test_mismatch_on_a_step_prompt(recorded: tuple[Path, list[Reply]]) -> None:
    path, _ = recorded
    with pytest.raises(ReplayMismatchError) as info:
        drive(replay(path), [STEPS[0], "Step 2: run the tests twice."])
    text = str(info.value)
    assert f"{path}:4:" in text
    assert (
        'messages[5].content differs at character 22: recorded "Step 2: run the tests.", '
        'sent "Step 2: run the tests twice."'
    ) in text


def test_mismatch_when_the_run_goes_further_than_the_recording(tmp_path: Path) -> None:
    path = tmp_path / "short.recording.jsonl"
    drive(RecordingProvider(ScriptedProvider.from_replies(SCRIPT[:2]), path), STEPS[:1])
    with pytest.raises(ReplayMismatchError) as info:
        drive(replay(path), STEPS)
    text = str(info.value)
    assert (
        'messages[4] was sent (assistant "The notes say: ship Friday. ✓") but the recorded '
        "request ends after 4 messages"
    ) in text


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (
            Request(
                (Message("system", "You are careful."), Message("user", STEPS[0])),
                TOOLS,
                "model-x",
                {"temperature": 0.7},
            ),
            "params.temperature: recorded 0.2, sent 0.7",
        ),
        (
            Request(
                (Message("system", "You are careful."), Message("user", STEPS[0])),
                TOOLS,
                "model-y",
                {"temperature": 0.2},
            ),
            'model differs at character 7: recorded "model-x", sent "model-y"',
        ),
        (
            Request(
                (Message("system", "You are careful."), Message("user", STEPS[0])),
                TOOLS[:1],
                "model-x",
                {"temperature": 0.2},
            ),
            "tools has 2 items in the recording, 1 sent",
        ),
        (
            Request(
                (Message("system", "You are careful."), Message("user", STEPS[0])),
                (
                    TOOLS[0],
                    ToolSpec(
                        "run_tests", "Run the unit tests.", {"type": "object", "properties": {}}
                    ),
                ),
                "model-x",
                {"temperature": 0.2},
            ),
            'tools[1].description differs at character 9: recorded "Run the test suite."',
        ),
        (
            Request(
                (Message("system", "You are careful."),), TOOLS, "model-x", {"temperature": 0.2}
            ),
            'the recorded request has messages[1] (user "Step 1: read the notes and '
            'summarize them.") but only 1 message was sent',
        ),
    ],
)
def test_mismatch_in_model_params_tools_and_length(
    recorded: tuple[Path, list[Reply]], request_: Request, expected: str
) -> None:
    path, _ = recorded
    with pytest.raises(ReplayMismatchError) as info:
        replay(path).complete(request_)
    assert expected in str(info.value)


def test_redaction_keeps_secrets_out_and_still_matches(tmp_path: Path) -> None:
    secret = "sk-live-0123456789abcdef"

    def redact(text: str) -> str:
        return text.replace(secret, "[REDACTED]")

    path = tmp_path / "secret.recording.jsonl"
    steps = [f"Deploy with token {secret} please."]
    recorder = RecordingProvider(ScriptedProvider.from_replies([f"Used {secret}."]), path, redact)
    drive(recorder, steps)
    assert secret.encode() not in path.read_bytes()
    assert b"[REDACTED]" in path.read_bytes()
    provider = ReplayProvider(ProviderSettings(name="replay", recording=str(path)), redact=redact)
    _, replies = drive(provider, steps)
    assert replies[0].content == "Used [REDACTED]."
    # Through the registry, the hook travels in settings.extra.
    via_registry = create_provider(
        ProviderSettings(name="replay", recording=str(path), extra={"redact": redact})
    )
    assert drive(via_registry, steps)[1] == replies


def test_failed_calls_are_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "r.recording.jsonl"
    inner = ScriptedProvider.from_replies(["ok"], failures={0: {"transient": True}})
    recorder = RecordingProvider(inner, path)
    request = Request((Message("user", "hi"),))
    with pytest.raises(ProviderError):
        recorder.complete(request)
    assert not path.exists()
    assert recorder.complete(request).content == "ok"
    assert len(read_recording(path)) == 1
    assert recorder.name == "scripted"


# --- damaged and foreign files -------------------------------------------------------------


def write_lines(path: Path, *lines: str, end: str = "\n") -> Path:
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


HEADER = '{"flow_recording": 1, "model": "m", "created": "2025-01-01T00:00:00Z"}'
EXCHANGE = (
    '{"request": {"messages": [{"content": "hi", "role": "user"}], "model": null, '
    '"params": {}, "prefix": 0, "tools": []}, "reply": {"content": "hello", '
    '"usage": {"cached_tokens": 0, "input_tokens": 1, "output_tokens": 1}}}'
)


@pytest.mark.parametrize(
    ("lines", "location", "words"),
    [
        ((HEADER, EXCHANGE, "{not json"), ":3:2", "line 3 is not valid JSON"),
        (('{"some": "json"}',), ":1", "not a flow recording"),
        (('{"flow_recording": 2}',), ":1", "version 2 is not supported"),
        (
            (HEADER, EXCHANGE.replace('"prefix": 0', '"prefix": 5')),
            ":2",
            "$.request.prefix: line 2 is not a valid exchange: it keeps 5 messages but the "
            "previous request has 0",
        ),
        (
            (HEADER, EXCHANGE.replace('"role": "user"', '"role": "boss"')),
            ":2",
            "$.request.messages[0].role:",
        ),
        (
            (HEADER, EXCHANGE.replace('"input_tokens": 1', '"input_tokens": -1')),
            ":2",
            "$.reply.usage.input_tokens:",
        ),
    ],
)
def test_damaged_recordings_fail_at_their_line(
    tmp_path: Path, lines: tuple[str, ...], location: str, words: str
) -> None:
    path = write_lines(tmp_path / "bad.recording.jsonl", *lines)
    with pytest.raises(ProviderSetupError) as info:
        replay(path)
    text = str(info.value)
    assert text.startswith(f"{path}{location}: ")
    assert words in text
    assert info.value.exit_code == EXIT_PROVIDER


def test_missing_recording_and_missing_setting(tmp_path: Path) -> None:
    with pytest.raises(ProviderSetupError, match="does not exist"):
        replay(tmp_path / "nope.recording.jsonl")
    with pytest.raises(ProviderSetupError, match="needs a recording"):
        create_provider(ProviderSettings(name="replay"))
    empty = tmp_path / "empty.recording.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(ProviderSetupError, match="empty"):
        replay(empty)


def test_a_torn_last_line_is_ignored_then_cut_by_the_next_recorder(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.recording.jsonl", HEADER, EXCHANGE, EXCHANGE[:40], end="")
    rec = read_recording(path)
    assert len(rec) == 1 and rec.torn_line == 3
    provider = replay(path)
    assert provider.complete(Request((Message("user", "hi"),))).content == "hello"
    with pytest.raises(ReplayMismatchError, match="line 3 is incomplete"):
        provider.complete(Request((Message("user", "bye"),)))
    recorder = RecordingProvider(ScriptedProvider.from_replies(["see you"]), path)
    recorder.complete(Request((Message("user", "bye"),)))
    data = path.read_text(encoding="utf-8")
    assert EXCHANGE[:40] + "\n" not in data.split(EXCHANGE, 1)[1]
    assert len(read_recording(path)) == 2 and read_recording(path).torn_line is None


def test_a_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "h.recording.jsonl", HEADER, EXCHANGE, end="")
    assert len(read_recording(path)) == 1
    recorder = RecordingProvider(ScriptedProvider.from_replies(["see you"]), path)
    recorder.complete(Request((Message("user", "bye"),)))
    assert [r.content for _, r in read_recording(path).requests()] == ["hello", "see you"]


def test_a_hand_written_default_still_matches(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "d.recording.jsonl",
        HEADER,
        EXCHANGE.replace('"role": "user"', '"role": "user", "is_error": false, "tool_calls": []'),
    )
    assert replay(path).complete(Request((Message("user", "hi"),))).content == "hello"


def test_the_recorder_never_overwrites_a_file_that_is_not_a_recording(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    path.write_text("---\nflow_progress: 1\n---\n# My run\n", encoding="utf-8")
    before = path.read_bytes()
    for fresh in (False, True):
        with pytest.raises(ProviderSetupError, match="does not overwrite"):
            RecordingProvider(ScriptedProvider.from_replies(["x"]), path, fresh=fresh)
    assert path.read_bytes() == before


def test_a_torn_header_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "h.recording.jsonl"
    path.write_bytes(b'{"flow_recording": 1, "mo')
    RecordingProvider(ScriptedProvider.from_replies(["x"]), path, created="c").complete(
        Request((Message("user", "hi"),))
    )
    assert len(read_recording(path)) == 1


# --- property: any content round-trips ------------------------------------------------------

texts = st.text(
    alphabet=st.characters(codec="utf-8") | st.sampled_from('\n\r\u2028"\\`#-'),
    max_size=40,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    prompts=st.lists(texts, min_size=1, max_size=3), answers=st.lists(texts, min_size=3, max_size=3)
)
def test_any_text_records_and_replays(
    tmp_path_factory: pytest.TempPathFactory, prompts: list[str], answers: list[str]
) -> None:
    folder = tmp_path_factory.mktemp("prop")
    path = folder / "p.recording.jsonl"
    _, original = drive(
        RecordingProvider(ScriptedProvider.from_replies(answers), path, created="c"), prompts
    )
    first = path.read_bytes()
    first.decode("utf-8")  # valid UTF-8 text
    _, replayed = drive(replay(path), prompts)
    assert replayed == original
    again = folder / "q.recording.jsonl"
    drive(RecordingProvider(ScriptedProvider.from_replies(answers), again, created="c"), prompts)
    assert again.read_bytes() == first
    os.remove(path)
    os.remove(again)


def test_text_that_is_not_valid_unicode_still_records_and_replays(tmp_path: Path) -> None:
    # A lone surrogate cannot be written as UTF-8; that one line is written ASCII-escaped.
    odd = "broken \udc80 byte"
    path = tmp_path / "odd.recording.jsonl"
    _, original = drive(RecordingProvider(ScriptedProvider.from_replies([odd]), path), [odd])
    assert b"\\udc80" in path.read_bytes()
    path.read_bytes().decode("utf-8")
    _, replayed = drive(replay(path), [odd])
    assert replayed == original and replayed[0].content == odd
