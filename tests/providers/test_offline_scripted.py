"""The ``scripted`` provider: replies chosen by the request, failures on call N, script files."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_PROVIDER, ProviderError, ProviderSetupError
from promptflow_resume.chat import Message, ToolCall
from promptflow_resume.providers import create_provider
from promptflow_resume.providers.provider import ProviderSettings, Reply, Request
from promptflow_resume.providers.scripted import ScriptedProvider, load_script

SCRIPT_YAML = """\
# replies for a two-step workflow
replies:
  - content: "I will read the notes."
    tool_calls:
      - name: read_file
        arguments: {path: notes.md}
      - {name: search, arguments: '{"q": "friday"}'}
    usage: {input_tokens: 120, output_tokens: 14}
  - "Ship on Friday."
  - content: "Done."
    model: big-model
failures:
  1: {transient: true, status: 503, retry_after: 0.01, message: "overloaded"}
"""


def conversation(*replies: Reply, note: bool = False) -> Request:
    """A request whose history holds ``replies`` as assistant messages with tool results."""
    messages = [Message("system", "Be brief."), Message("user", "Step 1")]
    for reply in replies:
        if note:
            messages.append(Message("user", "The run was resumed.", note=True))
        messages.append(Message("assistant", reply.content, reply.tool_calls))
        messages += [
            Message("tool", "ok", tool_call_id=c.id, name=c.name) for c in reply.tool_calls
        ]
    return Request(tuple(messages), model="small-model")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "run.script.yaml"
    path.write_text(SCRIPT_YAML, encoding="utf-8")
    return path


def from_file(path: Path) -> ScriptedProvider:
    provider = create_provider(ProviderSettings(name="scripted", recording=str(path)))
    assert isinstance(provider, ScriptedProvider)
    return provider


def test_replies_follow_the_conversation(script: Path) -> None:
    provider = from_file(script)
    first = provider.complete(conversation())
    assert first.content == "I will read the notes."
    assert first.tool_calls == (
        ToolCall("call_0_0", "read_file", '{"path": "notes.md"}'),
        ToolCall("call_0_1", "search", '{"q": "friday"}'),
    )
    assert first.usage.input_tokens == 120 and first.usage.output_tokens == 14
    assert first.finish_reason == "tool_calls" and first.model == "small-model"
    with pytest.raises(ProviderError):  # the scripted failure for reply 1
        provider.complete(conversation(first))
    second = provider.complete(conversation(first))
    assert (second.content, second.tool_calls, second.finish_reason) == (
        "Ship on Friday.",
        (),
        "stop",
    )
    third = provider.complete(conversation(first, second))
    assert (third.content, third.model) == ("Done.", "big-model")
    # Built from settings (as `flow run` does), it counts calls but does not keep them.
    assert provider.call_count == 4 and provider.calls == []


def test_calls_are_kept_for_tests_and_library_users(script: Path) -> None:
    kept = create_provider(
        ProviderSettings(name="scripted", recording=str(script), extra={"keep_calls": True})
    )
    assert isinstance(kept, ScriptedProvider)
    request = conversation()
    kept.complete(request)
    assert kept.calls == [request]
    in_code = ScriptedProvider.from_replies(["a"], failures={0: {}})
    with pytest.raises(ProviderError):
        in_code.complete(request)
    in_code.complete(request)
    assert in_code.calls == [request, request]  # failed calls included


def test_two_providers_agree_as_two_processes_would(script: Path) -> None:
    one, two = from_file(script), from_file(script)
    first = one.complete(conversation())
    # The second "process" starts mid-run, from a history written by the first.
    history = conversation(first, Reply("Ship on Friday."))
    assert two.complete(history) == one.complete(history)
    assert two.complete(history).content == "Done."
    assert two.reply_index(history) == 2


def test_note_messages_do_not_count_as_turns(script: Path) -> None:
    provider = from_file(script)
    first = provider.complete(conversation())
    plain = conversation(first, Reply("Ship on Friday."))
    noted = conversation(first, Reply("Ship on Friday."), note=True)
    # Even an assistant-role note is flow's own, not a model turn.
    noted = Request((*noted.messages, Message("assistant", "aside", note=True)), model="m")
    assert provider.reply_index(plain) == provider.reply_index(noted) == 2


def test_reply_index_after_the_history_is_rewritten() -> None:
    provider = ScriptedProvider.from_replies(["a", "b", "c"])
    long = conversation(Reply("a"), Reply("b"))
    assert provider.reply_index(long) == 2
    # A shorter, different history (a rewound run) must not reuse the count for the longer one.
    assert provider.reply_index(conversation(Reply("x"))) == 1
    assert provider.reply_index(conversation()) == 0


def test_a_transient_failure_fires_once_per_process(script: Path) -> None:
    provider = from_file(script)
    first = provider.complete(conversation())
    request = conversation(first)
    with pytest.raises(ProviderError) as info:
        provider.complete(request)
    err = info.value
    assert err.transient and err.status_code == 503 and err.retry_after == 0.01
    assert err.reason == "provider_transient"
    assert "overloaded (scripted failure on model call #2)" in str(err)
    assert provider.complete(request).content == "Ship on Friday."
    assert provider.complete(request).content == "Ship on Friday."
    # A new process fails once more: the count lives in the provider object.
    with pytest.raises(ProviderError):
        from_file(script).complete(request)


def test_a_state_file_makes_fail_once_hold_across_processes(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(
        "replies: [a, b]\nfailures:\n  0: {transient: false, message: gone}\nstate: s.state.json\n",
        encoding="utf-8",
    )
    with pytest.raises(ProviderError) as info:
        from_file(script).complete(conversation())
    assert not info.value.transient and info.value.reason == "provider_error"
    assert (tmp_path / "s.state.json").exists()
    # The "resumed" process gets its reply.
    assert from_file(script).complete(conversation()).content == "a"


def test_failures_that_never_stop_and_ready_made_errors() -> None:
    always = ScriptedProvider.from_replies(
        ["a"], failures={0: {"times": "always", "transient": False, "reason": "auth"}}
    )
    for _ in range(3):
        with pytest.raises(ProviderError) as failed:
            always.complete(conversation())
        assert failed.value.reason == "auth"
    custom = ProviderError("rate limited", transient=True, retry_after=2.0, status_code=429)
    provider = ScriptedProvider.from_replies(["a"], failures={0: custom})
    with pytest.raises(ProviderError) as info:
        provider.complete(conversation())
    assert info.value is custom
    assert provider.complete(conversation()).content == "a"


def test_running_out_of_replies_is_a_permanent_error(script: Path) -> None:
    provider = ScriptedProvider.from_replies(["only one"])
    first = provider.complete(conversation())
    with pytest.raises(ProviderError) as info:
        provider.complete(conversation(first))
    err = info.value
    assert not err.transient and err.exit_code == EXIT_PROVIDER
    assert "the script has 1 replies and the run asks for reply 2" in str(err)
    assert "Add replies to the script's `replies:` list" in str(err)
    from_script = from_file(script)
    history = conversation(Reply("1"), Reply("2"), Reply("3"))
    with pytest.raises(ProviderError, match=rf"^{script}: the script has 3 replies"):
        from_script.complete(history)


def test_from_replies_accepts_text_reply_objects_and_mappings() -> None:
    given = Reply("looking", (ToolCall("my-id", "peek", "{}"),))
    provider = ScriptedProvider.from_replies(
        [given, {"content": "x", "tool_calls": [{"name": "peek"}]}, "done"]
    )
    assert provider.complete(conversation()).tool_calls[0].id == "my-id"
    second = provider.complete(conversation(given))
    assert second.tool_calls == (ToolCall("call_1_0", "peek", "{}"),)
    assert provider.complete(conversation(given, second)).content == "done"


def test_on_text_gets_the_whole_text_once() -> None:
    provider = ScriptedProvider.from_replies(["Hello there.", {"tool_calls": [{"name": "x"}]}])
    seen: list[str] = []
    first = provider.complete(conversation(), on_text=seen.append)
    provider.complete(conversation(first), on_text=seen.append)  # no text: no call
    assert seen == ["Hello there."]


def test_json_scripts_and_scripts_given_inline(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        '{"replies": ["a", "b"], "failures": {"1": {"transient": false}}}', encoding="utf-8"
    )
    script = load_script(path)
    assert list(script.failures) == [1] and not script.failures[1].transient
    inline = create_provider(
        ProviderSettings(name="scripted", extra={"script": {"replies": ["inline"]}})
    )
    assert inline.complete(conversation()).content == "inline"
    via_extra = create_provider(ProviderSettings(name="scripted", extra={"script": str(path)}))
    assert via_extra.complete(conversation()).content == "a"


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("replies:\n  - conten: hi\n", ":2:5: $.replies[0].conten:", "did you mean 'content'?"),
        (
            "replies:\n  - content: hi\n    usage: {input_tokens: lots}\n",
            ":3:27: $.replies[0].usage.input_tokens:",
            'expected a whole number of 0 or more, found "lots"',
        ),
        (
            "replies:\n  - tool_calls:\n      - arguments: {}\n",
            ":3:9: $.replies[0].tool_calls[0].name:",
            "expected text, found null",
        ),
        ("replies: hi\n", ":1:10: $.replies:", "expected `replies:` with a list of replies"),
        (
            "replies: [a]\nfailures:\n  first: {}\n",
            ":3:3: $.failures.first:",
            "keys must be reply indexes",
        ),
        (
            "replies: [a]\nfailures:\n  0: {times: 0}\n",
            ":3:14: $.failures.0.times:",
            "expected 1 or more, or `always`",
        ),
        ("replies: [a\n", ":2:1:", "invalid YAML"),
    ],
)
def test_script_errors_name_line_column_and_field(
    tmp_path: Path, text: str, where: str, words: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProviderSetupError) as info:
        from_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}{where}")
    assert words in message


def test_missing_script_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(ProviderSetupError, match="needs a script"):
        create_provider(ProviderSettings(name="scripted"))
    with pytest.raises(ProviderSetupError, match="does not exist"):
        from_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text('{"replies": [1,]}', encoding="utf-8")
    with pytest.raises(ProviderSetupError) as info:
        from_file(bad)
    assert str(info.value).startswith(f"{bad}:1:16: invalid JSON")


def test_the_documented_example_script_loads(tmp_path: Path) -> None:
    import textwrap

    from promptflow_resume.providers import scripted

    doc = scripted.__doc__ or ""
    example = textwrap.dedent(doc.split("::\n", 1)[1].split("\nWhich reply", 1)[0])
    path = tmp_path / "example.yaml"
    path.write_text(example, encoding="utf-8")
    script = load_script(path)
    assert len(script.replies) == 3 and script.replies[0].tool_calls[0][1] == "read_file"
    assert script.failures[3].times is None and script.failures[3].reason == "auth"
    assert script.state == tmp_path / "script.state.json"
