"""MCP configuration files: VS Code's ``.vscode/mcp.json`` and the ``mcpServers`` layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_INPUT, EXIT_INVALID_FILE, InputError
from promptflow_resume.tools.mcp_config import find_config, load_config, strip_jsonc
from promptflow_resume.tools.mcp_reader import input_variable
from promptflow_resume.tools.mcp_records import McpConfigError

VSCODE = """{
  // Servers for this workspace
  "inputs": [
    {"type": "promptString", "id": "gh-token", "description": "GitHub token", "password": true}
  ],
  "servers": {
    "notes": {
      "type": "stdio",
      "command": "python",
      "args": ["notes.py", "${workspaceFolder}/state"],
      "env": {"NOTES_TOKEN": "${input:gh-token}", "MODE": "${env:NOTES_MODE}"},
      "cwd": "tools",
      "flow": {"timeout": 5, "idempotent": {"append_note": true}},
    },
    /* a remote one */
    "github": {
      "type": "http",
      "url": "http://127.0.0.1:9/mcp",
      "headers": {"Authorization": "Bearer ${input:gh-token}"},
    },
  },
}
"""


def _write(folder: Path, text: str, name: str = "mcp.json") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_vscode_layout_with_comments_inputs_and_variables(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    path = _write(tmp_path, VSCODE)
    env = {input_variable("gh-token"): "ghp_planted0123456789", "NOTES_MODE": "fast"}
    config = load_config(path, workspace=tmp_path, env=env)
    assert list(config.servers) == ["notes", "github"]
    notes = config.servers["notes"]
    assert notes.transport == "stdio"
    assert notes.command == "python"
    assert notes.args == ("notes.py", f"{tmp_path}/state")
    assert notes.env == {"NOTES_TOKEN": "ghp_planted0123456789", "MODE": "fast"}
    assert notes.cwd == tmp_path / "tools"
    assert notes.timeout == 5.0
    assert notes.idempotent == {"append_note": True}
    assert notes.line == 7 and notes.entry == "$.servers.notes"
    github = config.servers["github"]
    assert github.transport == "http"
    assert github.headers == {"Authorization": "Bearer ghp_planted0123456789"}
    # Input values are secrets: the redactor gets them.
    assert "ghp_planted0123456789" in config.secrets


def test_mcp_servers_layout_infers_the_transport(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        json.dumps(
            {
                "mcpServers": {
                    "local": {"command": "notes-server", "args": ["--stdio"]},
                    "remote": {"url": "https://example.invalid/mcp"},
                }
            }
        ),
    )
    config = load_config(path, workspace=tmp_path, env={})
    assert config.servers["local"].transport == "stdio"
    assert config.servers["local"].args == ("--stdio",)
    assert config.servers["remote"].transport == "http"


def test_an_input_is_asked_on_a_terminal_when_the_environment_has_none(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    path = _write(tmp_path, VSCODE)
    asked: list[tuple[str, str, bool]] = []

    def ask(input_id: str, description: str, password: bool) -> str:
        asked.append((input_id, description, password))
        return "typed-secret-value"

    config = load_config(path, workspace=tmp_path, env={}, ask=ask)
    # Asked once although two servers use it.
    assert asked == [("gh-token", "GitHub token", True)]
    assert config.servers["notes"].env["NOTES_TOKEN"] == "typed-secret-value"


def test_an_input_without_a_value_and_no_terminal_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    path = _write(tmp_path, VSCODE)
    with pytest.raises(InputError) as caught:
        load_config(path, workspace=tmp_path, env={})
    assert caught.value.exit_code == EXIT_INPUT
    assert "FLOW_MCP_INPUT_GH_TOKEN" in str(caught.value)
    assert str(path) in str(caught.value)


def test_env_file_values_are_read_and_env_wins(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "# secrets\nexport API_TOKEN='from-file-123456'\nMODE=file\n", encoding="utf-8"
    )
    path = _write(
        tmp_path,
        json.dumps(
            {
                "servers": {
                    "s": {
                        "command": "x",
                        "envFile": "${workspaceFolder}/.env",
                        "env": {"MODE": "env"},
                    }
                }
            }
        ),
    )
    config = load_config(path, workspace=tmp_path, env={})
    assert config.servers["s"].env == {"API_TOKEN": "from-file-123456", "MODE": "env"}
    assert "from-file-123456" in config.secrets


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('{"servers": {"a": {"args": []}}}', "$.servers.a.command", "needs a `command`"),
        ('{"servers": {"a": {"type": "ws"}}}', "$.servers.a.type", '"stdio", "http" and "sse"'),
        ('{"servers": {"a": {"type": "http"}}}', "$.servers.a.url", "needs a `url`"),
        ('{"servers": {"a": {"command": "x", "args": "y"}}}', "$.servers.a.args", "list"),
        ('{"servers": {"a": {"command": "x", "env": {"K": 1}}}}', "$.servers.a.env.K", "string"),
        ('{"servers": {"a": {"command": "${input:nope}"}}}', "$.servers.a.command", "nope"),
        ('{"servers": {"a": {"command": "${config:x}"}}}', "$.servers.a.command", "not a variable"),
        (
            '{"servers": {"a": {"command": "x", "flow": {"timeout": 0}}}}',
            "$.servers.a.flow.timeout",
            "above 0",
        ),
        (
            '{"servers": {"a": {"command": "x", "cwd": "missing"}}}',
            "$.servers.a.cwd",
            "does not exist",
        ),
        ('{"servers": []}', "$.servers", "object of servers"),
        ('{"tools": {}}', "$", "neither `servers`"),
        ("[1]", "$", "JSON object"),
    ],
)
def test_errors_name_the_file_line_and_field(
    tmp_path: Path, text: str, field: str, words: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(McpConfigError) as caught:
        load_config(path, workspace=tmp_path, env={})
    error = caught.value
    assert error.exit_code == EXIT_INVALID_FILE
    assert error.field == field
    assert error.path == str(path)
    assert words in error.message
    assert path.read_text(encoding="utf-8") == text  # never touched


def test_bad_json_is_positioned(tmp_path: Path) -> None:
    path = _write(tmp_path, '{\n  "servers": {\n    "a": {"command": "x"}}\n    oops\n}')
    with pytest.raises(McpConfigError) as caught:
        load_config(path, workspace=tmp_path, env={})
    assert caught.value.line == 4
    assert str(caught.value).startswith(f"{path}:4:")


def test_stripping_comments_keeps_positions_and_strings() -> None:
    text = '{"a": "http://x//y", /* c */ "b": [1, 2,], // end\n"c": "/*keep*/",}'
    stripped = strip_jsonc(text)
    assert len(stripped) == len(text)
    assert json.loads(stripped) == {"a": "http://x//y", "b": [1, 2], "c": "/*keep*/"}


def test_find_config_prefers_the_flag_and_falls_back_to_the_workspace(tmp_path: Path) -> None:
    assert find_config(tmp_path) is None
    (tmp_path / ".vscode").mkdir()
    own = _write(tmp_path / ".vscode", '{"servers": {}}')
    assert find_config(tmp_path) == own
    other = _write(tmp_path, '{"mcpServers": {}}', "other.json")
    assert find_config(tmp_path, other) == other
    with pytest.raises(McpConfigError, match="does not exist"):
        find_config(tmp_path, tmp_path / "missing.json")
