"""The one glob dialect: list_files/search_files globs, .gitignore lines, applyTo."""

from __future__ import annotations

import re

import pytest

from promptflow_resume.base.globs import glob_regex


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/a.py", False),  # * stays within one part
        ("**/*.py", "a.py", True),  # **/ may match no folder
        ("**/*.py", "src/deep/a.py", True),
        ("src/**", "src/a/b.txt", True),
        ("src/**", "lib/a.txt", False),
        ("?.md", "a.md", True),
        ("?.md", "ab.md", False),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "b.txt", False),
        ("*.{py,md}", "notes.md", True),
        ("*.{py,md}", "notes.txt", False),
        ("src/**/*.{ts,tsx}", "src/ui/app.tsx", True),
        ("\\*.txt", "*.txt", True),
        ("\\*.txt", "a.txt", False),
        ("a+b(1).txt", "a+b(1).txt", True),  # regex characters are literal
    ],
)
def test_glob_regex(glob: str, path: str, matches: bool) -> None:
    assert (re.fullmatch(glob_regex(glob), path) is not None) is matches


def test_braces_are_literal_for_gitignore_lines() -> None:
    assert re.fullmatch(glob_regex("{a,b}.txt", braces=False), "{a,b}.txt")
    assert not re.fullmatch(glob_regex("{a,b}.txt", braces=False), "a.txt")
