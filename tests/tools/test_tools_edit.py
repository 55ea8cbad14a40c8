"""Edit tools on real files: results with unified diffs, refusals, and the end-state check
that resume relies on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.tools.edit import (
    ABSENT,
    CreateFile,
    DeleteFile,
    EditTool,
    InsertText,
    ReplaceString,
    file_state,
    unified_diff,
)
from promptflow_resume.tools.tool import ToolContext


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("x = 1\ny = 2\n", encoding="utf-8")
    return root


def run(tool: EditTool, ws: Path, **arguments: Any) -> tuple[str, bool]:
    result = tool.run(arguments, ToolContext(ws))
    return result.content, result.is_error


def test_replace_records_a_unified_diff(ws: Path) -> None:
    text, error = run(ReplaceString(), ws, path="app.py", old_string="y = 2", new_string="y = 3")
    assert not error
    assert (ws / "app.py").read_text() == "x = 1\ny = 3\n"
    assert text == (
        "replaced 1 occurrence in 'app.py' at line 2\n\n"
        "```diff\n--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n```"
    )


@pytest.mark.parametrize(
    ("old", "message"),
    [
        ("z = 9", "old_string was not found in 'app.py'"),
        (" = ", "old_string occurs 2 times in 'app.py'"),
    ],
)
def test_replace_needs_exactly_one_occurrence(ws: Path, old: str, message: str) -> None:
    text, error = run(ReplaceString(), ws, path="app.py", old_string=old, new_string="q")
    assert error and message in text
    assert (ws / "app.py").read_text() == "x = 1\ny = 2\n"


def test_replace_keeps_crlf_line_ends(ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    _, error = run(ReplaceString(), ws, path="win.txt", old_string="a\nb", new_string="a\nB")
    assert not error
    assert (ws / "win.txt").read_bytes() == b"a\r\nB\r\nc\r\n"


def test_create_insert_delete(ws: Path) -> None:
    text, error = run(CreateFile(), ws, path="pkg/new.py", content="print('hi')\n")
    assert not error and text.startswith("created 'pkg/new.py' (1 lines)")
    assert "--- /dev/null\n+++ b/pkg/new.py" in text
    text, error = run(CreateFile(), ws, path="app.py", content="other\n")
    assert error and "already exists" in text
    text, error = run(InsertText(), ws, path="app.py", line=2, text="import os")
    assert not error and (ws / "app.py").read_text() == "x = 1\nimport os\ny = 2\n"
    assert "+import os" in text
    _, error = run(InsertText(), ws, path="app.py", line=0, text="# end\n")
    assert (ws / "app.py").read_text().endswith("y = 2\n# end\n")
    text, error = run(DeleteFile(), ws, path="pkg/new.py")
    assert not error and not (ws / "pkg" / "new.py").exists()
    assert "+++ /dev/null" in text and "-print('hi')" in text


def test_edits_stay_inside_the_workspace(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s\n")
    os.symlink(tmp_path / "secret.txt", ws / "link.txt")
    for tool, args in (
        (ReplaceString(), {"path": "../secret.txt", "old_string": "s", "new_string": "t"}),
        (ReplaceString(), {"path": "link.txt", "old_string": "s", "new_string": "t"}),
        (DeleteFile(), {"path": "link.txt"}),
        (CreateFile(), {"path": ".git/config", "content": "x"}),
    ):
        text, error = run(tool, ws, **args)
        assert error, text
    assert (tmp_path / "secret.txt").read_text() == "s\n"


def test_a_diff_fence_is_longer_than_any_backticks_inside() -> None:
    block = unified_diff("a.md", "```\ncode\n```\n", "````\ncode\n````\n")
    assert block.startswith("`````diff\n") and block.endswith("\n`````")


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        # new_string contains old_string: after the edit old_string still occurs once, so
        # only the recorded hashes can tell that it was applied.
        (ReplaceString(), {"path": "app.py", "old_string": "y = 2", "new_string": "y = 2\nz = 3"}),
        (InsertText(), {"path": "app.py", "line": 1, "text": "# head"}),
        (CreateFile(), {"path": "new.txt", "content": "fresh\n"}),
        (DeleteFile(), {"path": "app.py"}),
    ],
)
def test_the_end_state_tells_applied_from_not_applied(
    ws: Path, tool: EditTool, arguments: dict[str, Any]
) -> None:
    ctx = ToolContext(ws)
    expect = tool.expectation(arguments, ctx)
    assert expect is not None and expect["before"] != expect["after"]
    assert tool.in_flight_state(expect, ws) == "not_applied"
    assert not tool.run(arguments, ctx).is_error
    assert tool.in_flight_state(expect, ws) == "applied"
    # Resume shows the diff of an edit it finds applied, when the text before is provable.
    shown = tool.applied_result(expect, arguments, ws).content
    assert "applied before the run stopped" in shown
    if not isinstance(tool, DeleteFile):
        assert "```diff" in shown
    # Someone changed the file since: neither state, a person decides.
    (ws / expect["path"]).write_text("something else\n")
    assert tool.in_flight_state(expect, ws) == "changed"


def test_no_expectation_when_the_call_changes_nothing(ws: Path) -> None:
    ctx = ToolContext(ws)
    missing = {"path": "app.py", "old_string": "nope", "new_string": "x"}
    assert ReplaceString().expectation(missing, ctx) is None
    same = {"path": "app.py", "content": "x = 1\ny = 2\n"}
    assert CreateFile().expectation(same, ctx) is None
    assert file_state(ws / "absent.txt") == ABSENT
