"""Text normalisation: one place for what a BOM, CRLF and invisible edits mean to flow.

Three levels, from the lightest:

- ``undo_checkout_newlines``: a progress file as a Windows checkout may have turned it (BOM
  dropped; CRLF back to LF when the file's first line ends in CRLF). Content is otherwise
  left alone: a lone CR inside an entry is the user's, and the format escapes it.
- ``normalize_newlines``: a workflow file as read (BOM dropped; CRLF and CR become LF), so
  every later position is a line and column as the user sees them.
- ``normalize_text``: prompt text as flow sends and hashes it (also NFC, no trailing spaces,
  no outer blank lines, blank-line runs shrunk to one)::

    >>> normalize_text("\\ufeffTitle  \\r\\n\\r\\n\\r\\n\\r\\nBody\\r\\n")
    'Title\\n\\nBody'
    >>> normalize_newlines("a\\r\\nb\\rc")
    'a\\nb\\nc'
    >>> undo_checkout_newlines("---\\r\\nflow_progress: 2\\r\\n")
    '---\\nflow_progress: 2\\n'
"""

from __future__ import annotations

import re
import unicodedata

BOM = "\ufeff"

_TRAILING_WS = re.compile(r"[ \t\f\v]+$", re.M)
_SURROGATES = re.compile("[\ud800-\udfff]")
_BLANK_RUNS = re.compile(r"\n{3,}")


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (text no UTF-8 file can hold) replaced by U+FFFD.

    A provider or a journal can hand flow such text; the transcript keeps it exactly, and
    every view written as UTF-8 (the front matter, an HTML page) shows U+FFFD instead.
    """
    return _SURROGATES.sub("\ufffd", text)


def strip_bom(text: str) -> str:
    """``text`` without a leading UTF-8 byte order mark."""
    return text[1:] if text.startswith(BOM) else text


def undo_checkout_newlines(text: str) -> str:
    """Drop a BOM and turn a CRLF file (a Windows checkout of a progress file) into LF."""
    text = strip_bom(text)
    if text.startswith("---\r\n"):
        text = text.replace("\r\n", "\n")
    return text


def normalize_newlines(text: str) -> str:
    """Drop a leading BOM and turn CRLF / CR line endings into LF."""
    return strip_bom(text).replace("\r\n", "\n").replace("\r", "\n")


def normalize_text(text: str) -> str:
    """Text as flow sends and hashes it: LF endings, no trailing spaces, no outer blank lines.

    Unicode is put in NFC form and runs of blank lines shrink to one, so invisible edits
    change neither the prompt nor its hash.
    """
    text = unicodedata.normalize("NFC", normalize_newlines(text))
    text = _TRAILING_WS.sub("", text)
    text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip("\n")
