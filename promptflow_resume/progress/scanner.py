"""Positions and positioned errors over the text of one progress file, for its readers.

A reader walks the text by character offsets; only a warning or an error needs a line number,
so ``Scanner.line_of`` counts lines when asked and never before::

    sc = Scanner(text, "progress.md")
    line, after = sc.line_at(0)
    raise sc.fail(ProgressFormatError, after, "this line is wrong.")
"""

from __future__ import annotations

from ..base.errors import DigestError, ProgressFormatError

#: What every marker line of flow's starts with.
MARK = "<!-- flow:"
#: The hint of an error in the body: what the person can do about it.
FIX_BODY = (
    "Restore the file from version control, or undo the edit around that line; "
    "only the text of entries may be edited, keeping each flow:entry line and fence."
)


class Scanner:
    """Positions and errors over one text."""

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path

    def line_of(self, pos: int) -> int:
        """The 1-based line number of offset ``pos``."""
        return self.text.count("\n", 0, pos) + 1

    def line_at(self, pos: int) -> tuple[str, int]:
        """The line starting at ``pos`` and the position after its newline (or len)."""
        end = self.text.find("\n", pos)
        if end == -1:
            return self.text[pos:], len(self.text)
        return self.text[pos:end], end + 1

    def next_marker(self, pos: int) -> int:
        """Start of the next line at or after ``pos`` (a line start) that begins a marker."""
        if self.text.startswith(MARK, pos):
            return pos
        found = self.text.find("\n" + MARK, pos)
        return -1 if found == -1 else found + 1

    def fail(
        self,
        cls: type[ProgressFormatError] | type[DigestError],
        pos: int,
        message: str,
        hint: str = FIX_BODY,
    ) -> Exception:
        """An error of class ``cls`` naming the line at ``pos``, for the caller to raise."""
        return cls(message, path=self.path, line=self.line_of(pos), column=1, hint=hint)

    def truncated(self, what: str) -> ProgressFormatError:
        """The error of a file cut short, ``what`` saying where it ends."""
        return ProgressFormatError(
            f"the file is truncated: {what}.",
            path=self.path,
            line=self.line_of(len(self.text)),
            column=1,
            hint=(
                "Restore it from version control or a backup; a file cut short cannot be "
                "resumed safely."
            ),
        )


def skip_blank(sc: Scanner, pos: int) -> int:
    """The start of the first line at or after ``pos`` (a line start) that is not blank."""
    text = sc.text
    while pos < len(text):
        line, after = sc.line_at(pos)
        if line.strip():
            return pos
        pos = after
    return pos
