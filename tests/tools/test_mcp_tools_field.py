"""The hash of each MCP server's tool list is a field of the attempt (``mcp_tools``), not words
in a note: a resume notices a changed list from the field, even when the note is gone.

``flow`` runs as a real subprocess against the SDK server in ``tests/mcp_servers.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from promptflow_resume.progress import load_progress
from tests.support.flowproc import flow
from tests.tools.test_mcp_e2e import RUN, _env, _workspace


def _front(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8").split("---\n", 2)[1])
    return data


def test_a_changed_tool_list_is_noticed_from_the_field(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    (where / "state").mkdir()
    first = flow(*RUN, "--max-turns", "1", cwd=where, env=_env())
    path = where / "run" / "progress.md"
    run, _ = load_progress(path)
    assert run.status == "budget_exhausted", first.stderr
    recorded = run.attempts[0].mcp_tools
    assert list(recorded) == ["notes"] and recorded["notes"].startswith("sha256:")
    assert _front(path)["attempts"][0]["mcp_tools"] == recorded  # in the file, as a field
    note = f"mcp tools: notes={recorded['notes']}"
    assert run.attempts[0].notes[0] == note  # and shown to people as before

    # The note is words for people: without it, the field still tells the change.
    text = path.read_text(encoding="utf-8")
    head, sep, body = text.partition("\n---\n")
    path.write_text(head.replace(note, "looked at the notes server") + sep + body)
    (where / "state" / "more-tools").write_text("", encoding="utf-8")
    resumed = flow("resume", "run/progress.md", "--max-turns", "5", cwd=where, env=_env())
    assert resumed.returncode == 0, resumed.stderr
    assert "the tool list of MCP server(s) notes changed since the last attempt" in resumed.stderr
    run, _ = load_progress(path)
    assert run.attempts[1].mcp_tools["notes"] != recorded["notes"]
    assert run.attempts[1].notes[0] == f"mcp tools: notes={run.attempts[1].mcp_tools['notes']}"


def test_an_unchanged_tool_list_is_not_reported(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "read_notes", {})
    (where / "state").mkdir()
    flow(*RUN, "--max-turns", "1", cwd=where, env=_env())
    resumed = flow("resume", "run/progress.md", "--max-turns", "5", cwd=where, env=_env())
    assert resumed.returncode == 0, resumed.stderr
    assert "changed since the last attempt" not in resumed.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    assert run.attempts[0].mcp_tools == run.attempts[1].mcp_tools
