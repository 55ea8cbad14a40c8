"""The two path rules every command shares: where a read may lead, what a write may pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from promptflow_resume.base.confine import PathEscapeError, confine, no_link_on_the_way


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """root/ with a folder, a link to it, and a link out of the root."""
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    (tmp_path / "outside").mkdir()
    os.symlink("src", root / "inner")
    os.symlink("../outside", root / "out")
    return root


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("src/a.py", True),
        ("inner/a.py", True),  # a link that stays inside is fine for reading
        ("out/x", False),
        ("../outside/x", False),
        ("/etc/passwd", False),
        ("src/\x00", False),
    ],
)
def test_confine_follows_links_and_stays_inside(tree: Path, path: str, ok: bool) -> None:
    if ok:
        assert confine(tree, path).is_relative_to(tree.resolve())
    else:
        with pytest.raises(PathEscapeError):
            confine(tree, path)


@pytest.mark.parametrize(
    ("rel", "ok"),
    [
        ("src/a.py", True),
        ("inner", True),  # the link itself may be replaced or removed
        ("out", True),
        ("inner/a.py", False),  # below a link, even one that points inside
        ("out/.ssh", False),
        ("../outside/x", False),
        ("src/../out/x", False),
        ("./src/a.py", False),
        ("/abs", False),
        ("", False),
    ],
)
def test_no_write_beyond_a_link(tree: Path, rel: str, ok: bool) -> None:
    if ok:
        assert no_link_on_the_way(tree, rel) == tree / rel
    else:
        with pytest.raises(PathEscapeError):
            no_link_on_the_way(tree, rel)
