"""One alias-bomb rule for every YAML file flow reads: the size a document expands to."""

from __future__ import annotations

import pytest

from promptflow_resume.base import yamlio


def test_many_harmless_aliases_are_read() -> None:
    # 300 references to one short list expand to about 1,200 values: a hand edit, not a bomb.
    text = "base: &b [1, 2, 3]\n" + "".join(f"k{i}: *b\n" for i in range(300))
    data = yamlio.load(text)
    assert data["k299"] == [1, 2, 3]


def test_an_alias_bomb_is_refused_where_it_explodes() -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    levels += [
        f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]"
        for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    with pytest.raises(yamlio.YamlError) as info:
        yamlio.load("\n".join(levels) + "\n", path="w.prompt.md", line_offset=1)
    assert "alias bomb" in info.value.message
    # `e:` (111,111 values) is line 5 of the text, line 6 of the file after its `---`; column 4
    # is its anchor.
    assert (info.value.line, info.value.column) == (6, 4)
