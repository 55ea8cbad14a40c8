"""Built-in file tools against real folders: confinement, bounded output, errors as results."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from promptflow_resume.tools import TOOLS, builtin, searchfiles
from promptflow_resume.tools.builtin import glob_matcher
from promptflow_resume.tools.tool import ToolContext, ToolResult

#: The file tools of ``builtin.py`` and ``searchfiles.py``, as the tool registry names them.
BUILTINS = {
    name: TOOLS.load(name) for name in ("read_file", "write_file", "list_files", "search_files")
}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace folder with a sibling folder outside it holding a secret."""
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET outside\n")
    return root


def call(root: Path, tool: str, **arguments: object) -> ToolResult:
    return BUILTINS[tool]().run(dict(arguments), ToolContext(workspace=root))


def test_specs_are_valid_json_schema_and_all_idempotent() -> None:
    for name, factory in BUILTINS.items():
        tool = factory()
        assert tool.spec.name == name
        Draft202012Validator.check_schema(tool.spec.parameters)
        assert tool.idempotent is True


# --- confinement ------------------------------------------------------------------------


ESCAPES = ["../outside/secret.txt", "a/../../outside/secret.txt", "..", "/etc/passwd"]


@pytest.mark.parametrize("tool", ["read_file", "list_files", "search_files", "write_file"])
@pytest.mark.parametrize("path", ESCAPES)
def test_paths_that_leave_the_workspace_are_error_results(ws: Path, tool: str, path: str) -> None:
    args: dict[str, object] = {"path": path}
    if tool == "write_file":
        args["content"] = "x"
    if tool == "search_files":
        args["pattern"] = "SECRET"
    result = call(ws, tool, **args)
    assert result.is_error
    assert "outside the workspace" in result.content
    assert "TOP SECRET" not in result.content
    assert (ws.parent / "outside" / "secret.txt").read_text() == "TOP SECRET outside\n"


def test_a_symlink_out_of_the_workspace_is_refused(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "outside" / "secret.txt")
    (ws / "linkdir").symlink_to(ws.parent / "outside")
    for result in (
        call(ws, "read_file", path="link.txt"),
        call(ws, "read_file", path="linkdir/secret.txt"),
        call(ws, "list_files", path="linkdir"),
        call(ws, "write_file", path="linkdir/new.txt", content="x"),
        call(ws, "write_file", path="link.txt", content="overwritten"),
    ):
        assert result.is_error
        assert "symbolic link" in result.content
    assert sorted(os.listdir(ws.parent / "outside")) == ["secret.txt"]
    assert (ws.parent / "outside" / "secret.txt").read_text() == "TOP SECRET outside\n"


def test_a_dangling_symlink_pointing_outside_cannot_be_written_through(ws: Path) -> None:
    target = ws.parent / "outside" / "planted.txt"
    (ws / "trap.txt").symlink_to(target)
    result = call(ws, "write_file", path="trap.txt", content="x")
    assert result.is_error
    assert not target.exists()


def test_search_does_not_follow_links_out_of_the_workspace(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "outside" / "secret.txt")
    (ws / "linkdir").symlink_to(ws.parent / "outside")
    (ws / "inside.txt").write_text("not secret\n")
    result = call(ws, "search_files", pattern="SECRET")
    assert "TOP SECRET" not in result.content
    assert result.content.startswith("(no matches")


def test_absolute_paths_inside_the_workspace_and_symlinks_within_it_work(ws: Path) -> None:
    (ws / "a.txt").write_text("alpha\n")
    (ws / "alias.txt").symlink_to(ws / "a.txt")
    assert call(ws, "read_file", path=str(ws / "a.txt")).content == "alpha\n"
    assert call(ws, "read_file", path="alias.txt").content == "alpha\n"
    assert call(ws, "read_file", path="sub/../a.txt").content == "alpha\n"


def test_a_workspace_reached_through_a_link_accepts_its_real_absolute_paths(ws: Path) -> None:
    (ws / "a.txt").write_text("alpha\n")
    link = ws.parent / "ws-link"
    link.symlink_to(ws)
    real = str(ws.resolve() / "a.txt")
    assert BUILTINS["read_file"]().run({"path": real}, ToolContext(link)).content == "alpha\n"
    assert BUILTINS["read_file"]().run({"path": "a.txt"}, ToolContext(link)).content == "alpha\n"


def test_fifos_are_refused_instead_of_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    assert "not a regular file" in call(ws, "read_file", path="pipe").content
    assert "not a regular file" in call(ws, "write_file", path="pipe", content="x").content
    assert "not a regular file" in call(ws, "search_files", pattern="x", path="pipe").content
    assert call(ws, "search_files", pattern="x").content.startswith("(no matches")


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("read_file", {}, "'path' is a required property"),
        ("read_file", {"path": 3}, "3 is not of type 'string'"),
        ("read_file", {"path": "a", "offset": 0}, "less than the minimum of 1"),
        ("read_file", {"path": "a", "lines": 5}, "Additional properties are not allowed"),
        ("write_file", {"path": "a"}, "'content' is a required property"),
        ("search_files", {"pattern": ""}, "should be non-empty"),
    ],
)
def test_bad_arguments_are_error_results_naming_the_problem(
    ws: Path, tool: str, arguments: dict[str, object], expected: str
) -> None:
    result = BUILTINS[tool]().run(arguments, ToolContext(workspace=ws))
    assert result.is_error
    assert expected in result.content
    assert f"Expected: {tool}(" in result.content


# --- read_file ---------------------------------------------------------------------------


def test_read_returns_the_file_exactly(ws: Path) -> None:
    text = "line one\r\nzwei — ünï\n\n## not a heading to us\n```\nno newline at end"
    (ws / "f.md").write_bytes(text.encode())
    result = call(ws, "read_file", path="f.md")
    assert result == ToolResult(text)


def test_read_with_offset_and_limit_says_how_to_read_on(ws: Path) -> None:
    (ws / "n.txt").write_text("".join(f"{i}\n" for i in range(1, 11)))
    result = call(ws, "read_file", path="n.txt", offset=3, limit=4)
    assert result.content == "3\n4\n5\n6\n[lines 3-6 of 10; read on with offset=7]"
    last = call(ws, "read_file", path="n.txt", offset=9)
    assert last.content == "9\n10\n[lines 9-10 of 10]"


def test_read_is_bounded_by_lines_and_characters(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtin, "MAX_READ_LINES", 5)
    (ws / "many.txt").write_text("x\n" * 50)
    assert call(ws, "read_file", path="many.txt", limit=1000).content.endswith(
        "[lines 1-5 of 50; read on with offset=6]"
    )
    monkeypatch.setattr(builtin, "MAX_READ_CHARS", 25)
    (ws / "wide.txt").write_text("0123456789\n" * 5)
    assert call(ws, "read_file", path="wide.txt").content == (
        "0123456789\n0123456789\n[lines 1-2 of 5; read on with offset=3]"
    )
    (ws / "minified.js").write_text("a" * 100)
    result = call(ws, "read_file", path="minified.js")
    assert result.content == "a" * 25 + "\n[line 1 is longer than 25 characters and was cut]"


def test_read_describes_binary_files_instead_of_returning_bytes(ws: Path) -> None:
    (ws / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    result = call(ws, "read_file", path="img.png")
    assert not result.is_error
    assert result.content == (
        "'img.png' is a binary file (PNG image, 1032 bytes); its content is not shown as text."
    )
    (ws / "blob.bin").write_bytes(b"\x01\x02\x00\x03")
    assert "unknown kind, 4 bytes" in call(ws, "read_file", path="blob.bin").content


def test_read_marks_text_that_is_not_utf8(ws: Path) -> None:
    (ws / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    result = call(ws, "read_file", path="latin1.txt")
    assert (
        result.content
        == "caf\ufffd\n[the file is not valid UTF-8; undecodable bytes are shown as \ufffd]"
    )


@pytest.mark.parametrize(
    ("setup", "arguments", "expected"),
    [
        (None, {"path": "missing.txt"}, "there is no file 'missing.txt'"),
        ("dir", {"path": "d"}, "'d' is a folder; list_files shows what it holds"),
        ("short", {"path": "s.txt", "offset": 5}, "offset 5 is past the end of 's.txt'"),
    ],
)
def test_read_errors(
    ws: Path, setup: str | None, arguments: dict[str, object], expected: str
) -> None:
    (ws / "d").mkdir()
    (ws / "s.txt").write_text("1\n2\n")
    result = BUILTINS["read_file"]().run(arguments, ToolContext(workspace=ws))
    assert result.is_error
    assert expected in result.content


@pytest.mark.parametrize(
    ("offered", "advice"),
    [
        (("read_file", "list_files"), "; list_files shows what exists"),
        (("read_file", "search_files"), "; search_files shows what exists"),
        (("read_file",), ""),
    ],
)
def test_a_missing_file_names_only_a_tool_the_model_has(
    ws: Path, offered: tuple[str, ...], advice: str
) -> None:
    context = ToolContext(workspace=ws, offered=offered)
    result = BUILTINS["read_file"]().run({"path": "missing.txt"}, context)
    assert result.is_error and result.content == f"error: there is no file 'missing.txt'{advice}"


def test_read_of_an_empty_file(ws: Path) -> None:
    (ws / "empty.txt").write_bytes(b"")
    assert call(ws, "read_file", path="empty.txt") == ToolResult("(the file 'empty.txt' is empty)")


# --- write_file --------------------------------------------------------------------------


def test_write_creates_folders_and_writes_exactly(ws: Path) -> None:
    content = "a\r\nb — ü\n"
    result = call(ws, "write_file", path="new/deep/f.txt", content=content)
    assert result == ToolResult("wrote 12 bytes to 'new/deep/f.txt' (new file)")
    assert (ws / "new/deep/f.txt").read_bytes() == content.encode()


def test_write_is_idempotent_and_leaves_an_unchanged_file_alone(ws: Path) -> None:
    call(ws, "write_file", path="f.txt", content="same")
    before = (ws / "f.txt").stat()
    again = call(ws, "write_file", path="f.txt", content="same")
    assert again == ToolResult("'f.txt' already has this content (4 bytes); unchanged")
    after = (ws / "f.txt").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_write_replaces_and_keeps_permissions(ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("old\n")
    script.chmod(0o750)
    result = call(ws, "write_file", path="run.sh", content="#!/bin/sh\necho new\n")
    assert result.content == "wrote 19 bytes to 'run.sh' (replaced 4 bytes)"
    assert script.read_text() == "#!/bin/sh\necho new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert sorted(os.listdir(ws)) == ["run.sh"]  # no temporary file left behind


@pytest.mark.parametrize("path", [".git/config", ".flow/runs/x/progress.md", "./.git/hooks/pre"])
def test_write_refuses_version_control_and_run_folders(ws: Path, path: str) -> None:
    (ws / ".flow").mkdir()
    result = call(ws, "write_file", path=path, content="x")
    assert result.is_error
    assert "which tools may not change" in result.content
    assert not (ws / path).exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write read-only files")
def test_write_respects_read_only_files(ws: Path) -> None:
    locked = ws / "locked.txt"
    locked.write_text("keep\n")
    locked.chmod(0o444)
    result = call(ws, "write_file", path="locked.txt", content="changed")
    assert result.is_error
    assert "read-only" in result.content
    assert locked.read_text() == "keep\n"


def test_write_refuses_text_that_is_not_unicode(ws: Path) -> None:
    result = call(ws, "write_file", path="f.txt", content="half a pair: \ud800")
    assert result.is_error
    assert "not valid Unicode" in result.content
    assert not (ws / "f.txt").exists()


def test_write_onto_a_folder_is_an_error(ws: Path) -> None:
    (ws / "d").mkdir()
    assert call(ws, "write_file", path="d", content="x").is_error
    assert call(ws, "write_file", path=".", content="x").is_error


# --- list_files --------------------------------------------------------------------------


@pytest.fixture
def tree(ws: Path) -> Path:
    for rel in [
        "README.md",
        "src/app.py",
        "src/util/helpers.py",
        "src/util/notes.txt",
        "docs/index.md",
        "node_modules/pkg/index.js",
        ".git/HEAD",
    ]:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(f"content of {rel}\n")
    (ws / "latest").symlink_to("src")
    return ws


def test_list_a_folder(tree: Path) -> None:
    assert call(tree, "list_files").content == "\n".join(
        [".git/", "README.md", "docs/", "latest -> src", "node_modules/", "src/"]
    )
    assert call(tree, "list_files", path="src/util").content == (
        "src/util/helpers.py\nsrc/util/notes.txt"
    )


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"pattern": "*.py"}, ["src/app.py", "src/util/helpers.py"]),
        ({"pattern": "**/*.md"}, ["README.md", "docs/index.md"]),
        (
            {"pattern": "src/**/*.{py,txt}"},
            ["src/app.py", "src/util/helpers.py", "src/util/notes.txt"],
        ),
        ({"pattern": "*/app.py"}, ["src/app.py"]),
        ({"path": "src", "pattern": "util/*"}, ["src/util/helpers.py", "src/util/notes.txt"]),
        ({"pattern": "*.js"}, []),
        ({"path": "node_modules", "pattern": "*.js"}, ["node_modules/pkg/index.js"]),
    ],
)
def test_list_with_a_glob(tree: Path, arguments: dict[str, object], expected: list[str]) -> None:
    result = BUILTINS["list_files"]().run(arguments, ToolContext(workspace=tree))
    assert not result.is_error
    if expected:
        assert result.content.splitlines() == expected
    else:
        assert result.content.startswith("(no files under")


def test_list_is_bounded(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtin, "MAX_LIST_ENTRIES", 2)
    lines = call(tree, "list_files").content.splitlines()
    assert lines[:2] == [".git/", "README.md"]
    assert lines[2] == "[2 entries shown, more not listed; narrow with path or pattern]"


def test_list_errors(tree: Path) -> None:
    assert "is a file" in call(tree, "list_files", path="README.md").content
    assert "there is no folder 'nope'" in call(tree, "list_files", path="nope").content


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("*.py", "a/b/c.py", True),
        ("*.py", "c.pyc", False),
        ("a/*.py", "a/b/c.py", False),
        ("a/**/*.py", "a/c.py", True),
        ("a/**/*.py", "a/b/c/d.py", True),
        ("**", "anything/at/all", True),
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "file10.txt", False),
        ("[!a]*.md", "b.md", True),
        ("[!a]*.md", "a.md", False),
        ("*.{js,ts}", "x/y.ts", True),
        ("./docs/*.md", "docs/i.md", True),
        (".gitignore", ".gitignore", True),
        ("a+b(1).txt", "a+b(1).txt", True),
    ],
)
def test_glob_matching(glob: str, path: str, matches: bool) -> None:
    assert glob_matcher(glob)(path) is matches


# --- search_files ------------------------------------------------------------------------


def test_search_reports_path_line_and_text(tree: Path) -> None:
    (tree / "src/app.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    result = call(tree, "search_files", pattern=r"os\.\w+")
    assert result == ToolResult("src/app.py:4:     return os.getcwd()")


def test_search_with_glob_and_path(tree: Path) -> None:
    result = call(tree, "search_files", pattern="content", glob="*.txt")
    assert result.content == "src/util/notes.txt:1: content of src/util/notes.txt"
    result = call(tree, "search_files", pattern="content", path="docs/index.md")
    assert result.content == "docs/index.md:1: content of docs/index.md"


def test_search_skips_vendor_folders_binary_files_and_large_files(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree / "data.bin").write_bytes(b"content\x00\x01")
    monkeypatch.setattr(searchfiles, "MAX_SEARCH_FILE_BYTES", 40)
    (tree / "big.txt").write_text("content of " * 10)
    result = call(tree, "search_files", pattern="content of")
    names = [line.split(":", 1)[0] for line in result.content.splitlines() if ":" in line]
    assert "node_modules/pkg/index.js" not in names
    assert ".git/HEAD" not in names
    assert "data.bin" not in names
    assert "big.txt" not in names
    assert "README.md" in names
    assert result.content.endswith("[1 file(s) larger than 40 bytes not searched]")


def test_an_invalid_regex_is_searched_literally(tree: Path) -> None:
    (tree / "code.py").write_text("x = f(a[1]\n")
    result = call(tree, "search_files", pattern="f(a[1]")
    lines = result.content.splitlines()
    assert lines[0] == "code.py:1: x = f(a[1]"
    assert lines[1].startswith("[not a valid regular expression (")
    assert lines[1].endswith("); searched for it literally]")


def test_search_line_anchors_work_on_crlf_files(ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"first end\r\nsecond\r\nend\r\n")
    assert call(ws, "search_files", pattern="end$").content == (
        "win.txt:1: first end\nwin.txt:3: end"
    )
    assert call(ws, "search_files", pattern="^second$").content == "win.txt:2: second"


def test_search_is_bounded(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(searchfiles, "MAX_SEARCH_MATCHES", 3)
    (ws / "many.txt").write_text("hit\n" * 10 + "hit " + "x" * 1000 + "\n")
    lines = call(ws, "search_files", pattern="hit").content.splitlines()
    assert lines[:3] == ["many.txt:1: hit", "many.txt:2: hit", "many.txt:3: hit"]
    assert lines[3].startswith("[first 3 matches shown, there are more")
    monkeypatch.setattr(searchfiles, "MAX_SEARCH_MATCHES", 100)
    long_line = call(ws, "search_files", pattern="x{10}").content
    assert long_line == "many.txt:11: hit " + "x" * (searchfiles.MAX_MATCH_LINE_CHARS - 4) + "…"


def test_search_without_matches_is_not_an_error(ws: Path) -> None:
    (ws / "a.txt").write_text("nothing\n")
    result = call(ws, "search_files", pattern="absent", glob="*.txt")
    assert result == ToolResult("(no matches under '.' in '*.txt' files)")


def test_a_missing_workspace_is_an_error_result(tmp_path: Path) -> None:
    result = call(tmp_path / "gone", "list_files")
    assert result.is_error
    assert "does not exist" in result.content
