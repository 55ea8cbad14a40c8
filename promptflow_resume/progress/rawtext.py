"""Whether message content can stand in a progress file as plain Markdown.

flow's own ``<!-- flow:entry … -->`` lines delimit transcript entries, so a message's headings,
lists, tables and code blocks are written as they are and render as Markdown. Only content that
would break the file is fenced instead:

- it cannot be read back exactly: empty, leading or trailing whitespace, a line with trailing
  whitespace (editors strip it), control characters, a line starting with our marker syntax, a
  first line that reads as one of our own fences (```` ```markdown ````, ```` ```json ```` …), or
  the text flow writes for an empty message;
- it would swallow what follows when rendered: an unclosed code fence, an unclosed HTML
  comment, ``<script>``/``<pre>`` block or processing instruction (CommonMark HTML blocks of
  types 1 to 5 end only at their closing text, not at a blank line).

The second question is answered by a real CommonMark parser (markdown-it-py), asked only when
the text holds a fence or a ``<`` at all, and only once per entry (the store caches blocks).
A third, ``outline_safe``, keeps the file's outline the run's: instructions whose headings
would stand at the level of the run's own sections (``#`` to ``###``: the title, the sections,
the entries) are fenced too, as an agent's body with ``# Workflow`` would be::

    structure_safe("## Task list\\n\\n1. one")      # True: written as Markdown
    structure_safe("```python\\nprint(1)")          # False: the fence would never close
"""

from __future__ import annotations

import functools
import re
from typing import Any

#: Info strings of the fences flow itself writes around an entry's content.
OWN_FENCE_INFOS = frozenset({"text", "json", "markdown", "flow-escaped"})
#: What an empty message is written as (a message whose text is exactly this is fenced).
EMPTY_MESSAGE = "_(no text)_"

_OWN_FENCE = re.compile(r"`{3,}([^`]*)")
_TRAILING_SPACE = re.compile(r"[^\S\n]$", re.MULTILINE)
_OUR_MARKER = re.compile(r"^<!-- flow:", re.MULTILINE)
# Only fences and HTML can open a block that runs past a blank line.
_MAY_SWALLOW = re.compile(r"```|~~~|<")
_PROBE = "<!-- flow:probe -->"


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    # Imported on first use: most messages never need it, and the import costs ~30 ms.
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def closes_cleanly(content: str) -> bool:
    """True when every block ``content`` opens ends before a blank line and a marker after it.

    The content is parsed followed by a probe marker, as it stands in the file; the probe must
    come out as its own top-level HTML block.
    """
    if _MAY_SWALLOW.search(content) is None:
        return True
    tokens = _parser().parse(f"{content}\n\n{_PROBE}\n")
    if not tokens:
        return False
    last = tokens[-1]
    return bool(last.type == "html_block" and last.level == 0 and last.content == _PROBE + "\n")


def reads_back(content: str) -> bool:
    """True when ``content`` written raw is read back unchanged by the progress parser."""
    if not content or content != content.strip() or content == EMPTY_MESSAGE:
        return False
    if _TRAILING_SPACE.search(content) or _OUR_MARKER.search(content):
        return False
    first = content.split("\n", 1)[0]
    own = _OWN_FENCE.fullmatch(first)
    return not (own and own.group(1).strip() in OWN_FENCE_INFOS)


#: The deepest heading level of the file's own outline (``### 12 · system``).
OUTLINE_DEPTH = 3
#: A line that may be such a heading (ATX ``#`` to ``###``, or a setext underline).
_MAY_HEAD = re.compile(r"^ {0,3}#{1,3}(?:[ \t]|$)|^ {0,3}(?:=+|-+)[ \t]*$", re.M)


def outline_safe(content: str) -> bool:
    """True when ``content`` has no heading at the level of the file's own sections (levels
    1 to 3, ATX or setext): written raw, it would not break the file's outline."""
    if _MAY_HEAD.search(content) is None:
        return True
    tokens = _parser().parse(content)
    return not any(t.type == "heading_open" and int(t.tag[1]) <= OUTLINE_DEPTH for t in tokens)


def structure_safe(content: str) -> bool:
    """True when ``content`` (free of control characters) can be written as plain Markdown."""
    return reads_back(content) and closes_cleanly(content)
