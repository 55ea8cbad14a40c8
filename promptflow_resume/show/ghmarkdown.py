"""Text from a run, made safe to put into GitHub Markdown (a pull request comment, a job summary).

Whoever wrote a progress file (a pull request) chose its run's name, reasons, errors, inputs,
tool names and the arguments of held calls. Put into a page as they are, they could render as
HTML (``<img>``, ``</details>``, ``<!--`` hiding the rest), as links or images from elsewhere, or
mention people (``@team``), and so dress up or hide a held call before a maintainer types
``/flow approve``. Two forms, one for each place a value goes:

- ``text(value)``: prose and table cells. One line; ``\\ < > & [ ] ` |`` backslash-escaped (no
  tag, entity, link, image or code span can start), ``@`` followed by a zero-width space (no
  mention), controls and bidirectional formatting shown as visible stand-ins.
- ``code(value)``: a code span, for names, ids, paths and arguments: nothing inside renders,
  the fence is longer than any run of backticks inside, ``|`` is escaped for table cells.

Both cut the value to a limit, saying so with ``…``::

    f"| {text(run.reason)} | {code(held.preview)} |"
"""

from __future__ import annotations

import re

from ..base.printing import visible

#: Characters of one value at most, unless the caller says otherwise.
LIMIT = 200
#: What starts HTML, an entity, a link or image, a code span, or a table cell in GFM.
_ACTIVE = re.compile(r"([\\<>&\[\]`|])")
#: Breaks GitHub's mention and team-mention autolinks without changing what people read.
_NO_MENTION = "@\u200b"


def _line(value: object, limit: int) -> str:
    flat = " ".join(visible(str(value)).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def text(value: object, limit: int = LIMIT) -> str:
    """``value`` as inert Markdown prose on one line (see the module's docstring)."""
    return _ACTIVE.sub(r"\\\1", _line(value, limit)).replace("@", _NO_MENTION)


def code(value: object, limit: int = LIMIT) -> str:
    """``value`` as one inert code span, usable in a table cell."""
    body = _line(value, limit)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    # A span that starts or ends with a backtick needs a space between it and the fence.
    pad = " " if body.startswith("`") or body.endswith("`") or not body else ""
    return f"{fence}{pad}{body.replace('|', chr(92) + '|')}{pad}{fence}"
