"""How much of one transcript entry ``flow show`` renders, in the terminal and in the page.

Rendering Markdown costs far more than reading it, and more than linearly in the size of one
message (rich splits a rendered paragraph line by line; a 16 MB message took minutes). So each
entry's text is cut to its first ``ENTRY_LIMIT`` characters, at a line end where there is one,
and the view says what was left out and where the whole text is; the file itself is never
changed. A run's cost to show then grows with its number of entries, not with the square of
its largest message::

    part = excerpt(entry.content)
    if part.left_out_chars:
        print(part.text, left_out_note(part, entry.id, "progress.md"))
"""

from __future__ import annotations

from dataclasses import dataclass

#: Characters of one entry's text that ``flow show`` renders (64 Ki, a few pages).
ENTRY_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Excerpt:
    """The part of a text that is shown, and how much of it is not."""

    text: str
    #: Characters left out (0: the text is whole).
    left_out_chars: int = 0
    #: Lines left out (a last line without a line end counts).
    left_out_lines: int = 0


def excerpt(text: str, limit: int = ENTRY_LIMIT) -> Excerpt:
    """The first ``limit`` characters of ``text``, cut after a line end when one is in the
    second half of them (a line is not cut in two unless it is that long)."""
    if len(text) <= limit:
        return Excerpt(text)
    cut = text.rfind("\n", limit // 2, limit)
    cut = limit if cut < 0 else cut + 1
    # Counted in place: the rest of a 200 MB message is not copied to be measured.
    lines = text.count("\n", cut) + (0 if text.endswith("\n") else 1)
    return Excerpt(text[:cut], len(text) - cut, lines)


def left_out_note(part: Excerpt, entry_id: int, source: str) -> str:
    """The line that ends a cut entry: what was left out and where to read it whole."""
    chars, lines = part.left_out_chars, part.left_out_lines
    return (
        f"… {chars:,} more character{'s' if chars != 1 else ''} ({lines:,} "
        f"line{'s' if lines != 1 else ''}) not shown: flow show renders the first "
        f"{ENTRY_LIMIT:,} characters of an entry; entry {entry_id} is whole in {source}"
    )
