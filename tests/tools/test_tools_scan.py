"""Walking the workspace (.gitignore respected), the text cache, and the literal prefilter."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from promptflow_resume.tools.builtin import ListFiles
from promptflow_resume.tools.codebase import CodebaseSearch
from promptflow_resume.tools.edit import ReplaceString
from promptflow_resume.tools.filescan import read_text, required_literal, walk
from promptflow_resume.tools.ignore import IgnoreRules
from promptflow_resume.tools.searchfiles import SearchFiles
from promptflow_resume.tools.tool import ToolContext


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {
        ".gitignore": "build/\n*.log\n/top.txt\n!keep.log\n",
        "src/app.py": "needle = 1\n",
        "src/.gitignore": "gen_*.py\n",
        "src/gen_x.py": "needle = 2\n",
        "src/deep/top.txt": "needle in a nested top.txt\n",
        "top.txt": "needle at the top\n",
        "build/out.js": "needle\n",
        "debug.log": "needle\n",
        "keep.log": "needle kept\n",
        "node_modules/x.js": "needle\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    os.symlink(tmp_path / "src" / "app.py", tmp_path / "link.py")
    return tmp_path


def test_walk_respects_gitignore_files_at_every_level(repo: Path) -> None:
    found = [rel for _, rel in walk(str(repo), str(repo))]
    assert found == [".gitignore", "keep.log", "src/.gitignore", "src/app.py", "src/deep/top.txt"]
    # Searching a sub-folder still applies the root's rules and those on the way.
    assert [rel for _, rel in walk(str(repo), str(repo / "src"))] == [
        "src/.gitignore",
        "src/app.py",
        "src/deep/top.txt",
    ]


def test_search_and_list_skip_ignored_files(repo: Path) -> None:
    ctx = ToolContext(repo)
    text = SearchFiles().run({"pattern": "needle"}, ctx).content
    assert text.splitlines() == [
        "keep.log:1: needle kept",
        "src/app.py:1: needle = 1",
        "src/deep/top.txt:1: needle in a nested top.txt",
    ]
    listed = ListFiles().run({"pattern": "**/*.py"}, ctx).content
    assert listed == "src/app.py"


@pytest.mark.parametrize(
    ("rule", "path", "is_dir", "ignored"),
    [
        ("*.log", "a/b/c.log", False, True),
        ("/top.txt", "sub/top.txt", False, False),
        ("docs/*.md", "docs/a.md", False, True),
        ("docs/*.md", "docs/x/a.md", False, False),
        ("out/", "out", False, False),
        ("out/", "a/out", True, True),
        ("**/cache", "x/y/cache", True, True),
        # What git does too: what is below an ignored folder is ignored, an escaped trailing
        # space is part of the name.
        ("build/", "build/out.js", False, True),
        ("name\\ ", "name ", False, True),
    ],
)
def test_ignore_rules(tmp_path: Path, rule: str, path: str, is_dir: bool, ignored: bool) -> None:
    (tmp_path / ".gitignore").write_text(rule + "\n")
    assert IgnoreRules(tmp_path).ignored(path, is_dir=is_dir) is ignored


def test_the_text_cache_sees_every_edit(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    assert read_text(str(path), max_bytes=1000) == "x = 1\n"
    # Same size, same second: an edit through the edit tool is still seen.
    ReplaceString().run(
        {"path": "a.py", "old_string": "1", "new_string": "2"}, ToolContext(tmp_path)
    )
    assert read_text(str(path), max_bytes=1000) == "x = 2\n"
    text = SearchFiles().run({"pattern": "x = 2"}, ToolContext(tmp_path)).content
    assert text == "a.py:1: x = 2"


@pytest.mark.parametrize(
    "pattern",
    [
        r"def \w+_missing\(",
        "NEEDLE_CONSTANT",
        "ab*cdef",
        r"foo\.bar",
        "colou?r",
        r"x{2,3}yyy",
        "[abc]defg",
        r"(abc)*defg",
        r"(abc)+defg",
        r"\bword\b",
    ],
)
def test_the_required_literal_is_in_every_match(pattern: str) -> None:
    literal = required_literal(pattern)
    samples = [
        "def load_missing(",
        "NEEDLE_CONSTANT",
        "acdef abbbcdef",
        "foo.bar",
        "color colour",
        "xxyyy xxxyyy",
        "adefg cdefg",
        "defg abcabcdefg",
        "abcdefg",
        "a word here",
    ]
    regex = re.compile(pattern)
    for sample in samples:
        for match in regex.finditer(sample):
            assert literal is None or literal in match.group(0), (pattern, sample)
    assert required_literal("a|bcd") is None and required_literal("(?i)abcd") is None


def test_codebase_search_ranks_files_for_a_question(tmp_path: Path) -> None:
    files = {
        "providers/retry.py": "def backoff_delay(attempt):\n    # retry delay grows\n"
        "    return min(2 ** attempt, MAX_DELAY)\n",
        "providers/openai.py": "def call(request):\n    return client.post(request)\n",
        "docs/retry.md": "Retries wait with a delay.\n",
        "engine.py": "def run_loop(steps):\n    for step in steps:\n        step.run()\n",
        "build/retry_delay.py": "retry delay retry delay\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / ".gitignore").write_text("build/\n")
    ctx = ToolContext(tmp_path)
    text = CodebaseSearch().run({"query": "Where is the retry delay computed?"}, ctx).content
    ranked = [line.split(" (score")[0] for line in text.splitlines() if "(score" in line]
    assert ranked == ["providers/retry.py", "docs/retry.md"]
    assert "  2: # retry delay grows" in text
    assert "no file mentions any of: zebra" in CodebaseSearch().run({"query": "zebra"}, ctx).content
