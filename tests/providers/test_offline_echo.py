"""The ``echo`` provider (dry run) and the terminal rendering of a request."""

from __future__ import annotations

import pytest

from promptflow_resume.chat import Message, ToolCall, ToolSpec
from promptflow_resume.providers import REGISTRY, create_provider
from promptflow_resume.providers.echo import format_request
from promptflow_resume.providers.provider import ProviderSettings, Request

TOOLS = (
    ToolSpec("read_file", "Read a file in the workspace.\nPaths are relative.", {}),
    ToolSpec("run_tests", "", {}),
)
CALL = ToolCall("call_0_0", "read_file", '{"path": "notes.md"}')
MESSAGES = (
    Message("system", "You are careful."),
    Message(
        "user", "\n  Step 1: summarize the notes in notes.md for the release team today.\nMore."
    ),
    Message("assistant", "", (CALL,)),
    Message("tool", "line one\nline two", tool_call_id="call_0_0", name="read_file"),
    Message("user", "This run was resumed.", note=True),
)


@pytest.mark.parametrize(
    ("messages", "tools", "text"),
    [
        (
            MESSAGES[:2],
            TOOLS,
            '[echo] received the prompt "Step 1: summarize the notes in notes.md for the '
            'release…" (2 messages, 2 tools offered)',
        ),
        (
            MESSAGES,
            (),
            '[echo] received the result of read_file "line one" (5 messages, 0 tools offered)',
        ),
        (
            MESSAGES[:1],
            TOOLS[:1],
            '[echo] received a system message "You are careful." (1 message, 1 tool offered)',
        ),
        ((), (), "[echo] received no messages (0 messages, 0 tools offered)"),
    ],
)
def test_echo_reply_says_what_was_asked(
    messages: tuple[Message, ...], tools: tuple[ToolSpec, ...], text: str
) -> None:
    provider = create_provider(ProviderSettings(name="echo"))
    seen: list[str] = []
    reply = provider.complete(Request(messages, tools, "gpt-x"), on_text=seen.append)
    assert reply.content == text
    assert seen == [text]
    assert reply.tool_calls == ()
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cached_tokens) == (
        0,
        0,
        0,
    )
    # Deterministic: a second provider, a second call, the same reply.
    again = create_provider(ProviderSettings(name="echo")).complete(Request(messages, tools))
    assert again == reply


def test_format_request_shows_everything_that_would_be_sent() -> None:
    text = format_request(
        Request(MESSAGES, TOOLS, "gpt-x", {"temperature": 0.2, "max_tokens": 500})
    )
    lines = text.splitlines()
    assert lines[:5] == [
        "model: gpt-x",
        "params: temperature=0.2, max_tokens=500",
        "tools offered (2):",
        "  - read_file: Read a file in the workspace.",
        "  - run_tests: (no description)",
    ]
    assert lines[5].startswith("── 1. system ──")
    assert "── 3. assistant ──" in text
    assert '→ calls read_file({"path": "notes.md"}) [call_0_0]' in lines
    assert any(line.startswith("── 4. tool result of read_file [call_0_0] ──") for line in lines)
    assert "line one\nline two\n" in text
    assert any(line.startswith("── 5. user (note from flow) ──") for line in lines)
    assert "(empty)" in lines  # the assistant message had no text
    # The full prompt, not a summary.
    assert "\n  Step 1: summarize the notes in notes.md for the release team today.\nMore." in text


def test_format_request_without_model_or_tools() -> None:
    text = format_request(Request((Message("user", "hi"),)))
    assert text.splitlines()[:2] == ["model: (provider default)", "tools offered: none"]


def test_registry_builds_each_offline_provider_by_name() -> None:
    assert {"echo", "replay", "scripted"} <= set(REGISTRY)
    provider = create_provider(ProviderSettings(name="echo"))
    assert provider.name == "echo"
