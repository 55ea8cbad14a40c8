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


@pytest.mark.parametrize(
    ("text", "ok"),
    [("r-1", True), ("a/b", False), ("..", False), (".", False), ("", False), ("/x", False)],
)
def test_a_name_from_a_file_is_one_plain_part(text: str, ok: bool) -> None:
    from promptflow_resume.base.confine import plain_name

    if ok:
        assert plain_name(text) == text
    else:
        with pytest.raises(PathEscapeError):
            plain_name(text)


@pytest.mark.parametrize("text", ["../x", "a/../b", ".git/config", "a/.GIT/hooks/x", "/etc/x"])
def test_a_path_from_a_git_tree_is_one_a_checkout_writes(text: str) -> None:
    from promptflow_resume.base.confine import tree_path

    with pytest.raises(PathEscapeError):
        tree_path(text)
    assert str(tree_path("a/.github/x")) == "a/.github/x"


def test_the_first_link_on_the_way_is_named(tree: Path) -> None:
    from promptflow_resume.base.confine import link_on_the_way

    assert link_on_the_way(tree, "out/a/b") == "out"
    assert link_on_the_way(tree, "src/a.py") is None
    assert link_on_the_way(tree, "out") is None  # the last part may be a link: it is the link
