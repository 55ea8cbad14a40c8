"""MCP tools against a real server written with the SDK (``tests/support/mcp_servers.py``), over
stdio and streamable HTTP: names, annotations, results, and servers that crash, hang or are
missing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.base.errors import EXIT_TOOL_SERVER, ToolServerError
from promptflow_resume.tools.mcp import McpServers
from promptflow_resume.tools.mcp_config import load_config
from promptflow_resume.tools.mcp_setup import changed_servers, tool_list_note
from promptflow_resume.tools.tool import ToolContext
from tests import support

SERVER = support.SUPPORT / "mcp_servers.py"


def notes_config(folder: Path, state: Path, **extra: Any) -> Path:
    """A ``mcp.json`` with the notes server over stdio (``extra`` merged into its entry)."""
    entry = {"command": sys.executable, "args": [str(SERVER), str(state)], **extra}
    path = folder / "mcp.json"
    path.write_text(json.dumps({"servers": {"notes": entry}}), encoding="utf-8")
    return path


def calls(state: Path) -> list[str]:
    log = state / "calls.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def open_servers(folder: Path, config: Path, wanted: list[str], **kw: Any) -> McpServers:
    cfg = load_config(config, workspace=folder, env={})
    return McpServers(cfg, wanted=wanted, log_dir=folder, **kw)


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpServers, Path]]:
    """One notes server for the tests that only call tools."""
    folder = tmp_path_factory.mktemp("mcp")
    state = folder / "state"
    servers = open_servers(folder, notes_config(folder, state), ["notes/*"])
    servers.offer()
    yield servers, state
    servers.close()


def run(servers: McpServers, name: str, **arguments: Any) -> Any:
    return servers.tools[name].run(arguments, ToolContext(Path.cwd()))


def test_tools_are_offered_by_their_names_with_annotations(
    notes: tuple[McpServers, Path],
) -> None:
    servers, _ = notes
    names = servers.offer()
    assert names[:3] == ("read_notes", "append_note", "set_note")
    tools = servers.tools
    # readOnlyHint and idempotentHint make a call safe to run again; no hint does not.
    assert tools["read_notes"].idempotent is True
    assert tools["set_note"].idempotent is True
    assert tools["append_note"].idempotent is False
    assert tools["append_note"].spec.parameters["required"] == ["text"]
    assert "Append one line" in tools["append_note"].spec.description


def test_results_text_structured_image_and_errors(notes: tuple[McpServers, Path]) -> None:
    servers, state = notes
    added = run(servers, "append_note", text="ship on Friday")
    assert (added.content, added.is_error) == ("appended: ship on Friday", False)
    assert "ship on Friday" in run(servers, "read_notes").content
    stats = run(servers, "stats")
    assert json.loads(stats.content)["notes"] >= 1
    picture = run(servers, "picture")
    assert picture.data is not None and picture.data.startswith(b"\x89PNG")
    assert "image/png" in picture.content and "sidecar" in picture.content
    failed = run(servers, "boom")
    assert failed.is_error and "boom" in failed.content
    # Arguments the server rejects: an error result the model can correct, no exception.
    wrong = run(servers, "append_note", wrong=1)
    assert wrong.is_error
    assert calls(state).count("append_note ship on Friday") == 1


def test_noise_in_the_protocol_stream_does_not_break_the_call(
    notes: tuple[McpServers, Path],
) -> None:
    servers, _ = notes
    result = run(servers, "garble")
    assert (result.content, result.is_error) == ("answered after the noise", False)
    assert run(servers, "read_notes").is_error is False


def test_names_resolve_like_prompt_files_write_them(tmp_path: Path) -> None:
    state = tmp_path / "state"
    wanted = ["notes/read_notes", "set_note", "notes/stats", "notes/missing", "nobody/*"]
    # A name taken by a built-in or a declared command gets the server's name in front.
    with open_servers(
        tmp_path, notes_config(tmp_path, state), wanted, reserved={"stats"}
    ) as servers:
        offered = servers.offer()
        assert offered == ("read_notes", "set_note", "notes_stats")
        assert servers.resolved["notes/read_notes"] == ("read_notes",)
        assert servers.resolved["set_note"] == ("set_note",)
        assert servers.resolved["notes/stats"] == ("notes_stats",)
        assert servers.resolved["notes/missing"] == ()
        assert servers.resolved["nobody/*"] == ()


def test_config_overrides_the_annotations(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = notes_config(
        tmp_path, state, flow={"idempotent": {"append_note": True, "read_notes": False}}
    )
    with open_servers(tmp_path, config, ["notes"]) as servers:
        servers.offer()
        assert servers.tools["append_note"].idempotent is True
        assert servers.tools["read_notes"].idempotent is False


def test_a_server_that_dies_mid_call_raises_and_restarts_on_next_use(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with open_servers(tmp_path, notes_config(tmp_path, state), ["notes/*"]) as servers:
        servers.offer()
        with pytest.raises(ToolServerError) as caught:
            run(servers, "crash")
        error = caught.value
        assert error.exit_code == EXIT_TOOL_SERVER
        assert "`notes` failed during a call of `crash`" in error.message
        assert error.path == str(tmp_path / "mcp.json") and error.field == "$.servers.notes"
        # Not idempotent: tried once, never again behind the user's back.
        assert calls(state).count("crash ") == 1
        assert run(servers, "read_notes").is_error is False
        starts = (state / "starts").read_text().split()
        assert len(starts) == 2


def test_an_idempotent_call_is_retried_on_a_restarted_server(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = notes_config(tmp_path, state, flow={"idempotent": {"crash": True}})
    with open_servers(tmp_path, config, ["notes/*"]) as servers:
        servers.offer()
        with pytest.raises(ToolServerError):
            run(servers, "crash")
        # The first try and two retries, each on a fresh server.
        assert calls(state).count("crash ") == 3
        assert len((state / "starts").read_text().split()) == 3


def test_a_hung_call_times_out(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = notes_config(tmp_path, state, flow={"timeout": 1, "idempotent": {"hang": False}})
    with open_servers(tmp_path, config, ["notes/hang"]) as servers:
        servers.offer()
        with pytest.raises(ToolServerError, match="did not answer within 1 s"):
            run(servers, "hang")
        pid = int((state / "pid").read_text())
    _wait_gone(pid)


def test_a_server_that_cannot_start_is_a_positioned_error(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        '{\n  "servers": {\n    "ghost": {"command": "no-such-program-here"}\n  }\n}',
        encoding="utf-8",
    )
    servers = open_servers(tmp_path, config, ["ghost/*"])
    with pytest.raises(ToolServerError) as caught:
        servers.offer()
    servers.close()
    text = str(caught.value)
    assert text.startswith(f"{config}:3: $.servers.ghost:")
    assert "could not be started" in text and "no-such-program-here" in text


@pytest.mark.slow
def test_a_server_that_speaks_no_mcp_fails_to_start(tmp_path: Path) -> None:
    liar = tmp_path / "liar.py"
    liar.write_text(
        "import sys\nfor line in sys.stdin:\n    print('this is not json-rpc', flush=True)\n",
        encoding="utf-8",
    )
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "servers": {
                    "liar": {
                        "command": sys.executable,
                        "args": [str(liar)],
                        "flow": {"start_timeout": 2},
                    }
                }
            }
        ),
        encoding="utf-8",
    )
    servers = open_servers(tmp_path, config, ["liar/*"])
    with pytest.raises(ToolServerError, match="`liar` did not answer within 2 s of starting"):
        servers.offer()
    servers.close()


def test_stderr_goes_to_a_redacted_log(tmp_path: Path) -> None:
    state = tmp_path / "state"
    secret = "tok-planted-7f3a9c1e55"
    config = notes_config(tmp_path, state, env={"NOTES_TOKEN": secret})
    cfg = load_config(config, workspace=tmp_path, env={})
    assert secret in cfg.secrets  # a secret-looking name: its value is a secret
    servers = McpServers(
        cfg,
        wanted=["notes/leak"],
        log_dir=tmp_path,
        redact=lambda text: text.replace(secret, "[REDACTED]"),
    )
    with servers:
        servers.offer()
        assert secret in run(servers, "leak").content  # the engine redacts results
    log = (tmp_path / "mcp-notes.stderr.log").read_text(encoding="utf-8")
    assert "debug: token is [REDACTED]" in log
    assert secret not in log


def test_tool_list_hash_changes_with_the_tools(notes: tuple[McpServers, Path]) -> None:
    servers, _ = notes
    prints = servers.fingerprints()
    assert tool_list_note(prints).startswith("mcp tools: notes=sha256:")
    assert changed_servers(prints, prints) == []
    assert changed_servers(prints, {"notes": "sha256:other"}) == ["notes"]
    assert changed_servers(None, prints) == []


# --- streamable HTTP --------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} is still running")


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    state = tmp_path / "state"
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), str(state), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", state
    finally:
        proc.terminate()
        proc.wait(10)


def test_streamable_http_server(tmp_path: Path, http_server: tuple[str, Path]) -> None:
    url, state = http_server
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {"servers": {"web": {"type": "http", "url": url, "headers": {"X-Team": "docs"}}}}
        ),
        encoding="utf-8",
    )
    with open_servers(tmp_path, config, ["web/*"]) as servers:
        offered = servers.offer()
        assert "append_note" in offered
        assert servers.tools["read_notes"].idempotent is True
        assert run(servers, "append_note", text="over http").content == "appended: over http"
        assert "over http" in run(servers, "read_notes").content
        assert run(servers, "whoami").content == "team: docs"  # the configured header
    assert calls(state)[:2] == ["append_note over http", "read_notes "]


def test_embedded_resources_and_links_in_results() -> None:
    import base64

    from mcp import types

    from promptflow_resume.tools.mcp_listing import McpToolInfo
    from promptflow_resume.tools.mcp_results import format_result

    info = McpToolInfo(server="s", name="t", description="", input_schema={})
    result = types.CallToolResult(
        content=[
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.md", text="# A"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///b.bin", blob=base64.b64encode(b"\x00\x01").decode()
                ),
            ),
            types.ResourceLink(type="resource_link", uri="file:///c.txt", name="c"),
        ],
        structured_content={"ignored": True},
        is_error=True,
    )
    out = format_result(result, info)
    assert out.content.splitlines() == [
        "[resource file:///a.md]",
        "# A",
        "[resource file:///b.bin, application/octet-stream, 2 bytes: kept in a sidecar]",
        "[resource link file:///c.txt]",
        '{"ignored": true}',
    ]
    assert out.data == b"\x00\x01" and out.is_error
