"""Live updates as server-sent events: the server watches the files, the page applies what it
is sent (``script.SCRIPT``).

A run's stream polls the progress file, its journal and its owner record every
``POLL_SECONDS`` (a change of size or time is a change); on a change it reads the run again
(``load_progress``, which never writes) and sends:

- ``head``: the run's header and steps (``show.html.run_header``), replacing the old one;
- ``entries``: the entries added since the page (or the last event) had them;
- ``actions``: the actions panel, as the run's state now allows (and a resume's output);
- ``reload``: when entries the page holds changed (a rewind, a hand edit): the page reloads.

The list's stream sends ``rows``, the table body, whenever the listing changes. Each event's
data is HTML rendered with every string escaped, like the pages themselves.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from ..base.textnorm import without_surrogates

_BREAK = re.compile(r"\r\n|\r|\n")
#: How often the files are looked at: new entries show within a second.
POLL_SECONDS = 0.25
#: A comment line this often keeps proxies and the browser from dropping a quiet stream.
KEEPALIVE_SECONDS = 15.0


def event(name: str, data: str) -> bytes:
    """One server-sent event, each line of ``data`` its own ``data:`` line. A stream's lines
    end at CR, LF or CRLF, so a lone CR in a message splits it too (it cannot start a field of
    its own); a lone surrogate (kept in a transcript) becomes U+FFFD."""
    lines = "".join(f"data: {line}\n" for line in _BREAK.split(data))
    return without_surrogates(f"event: {name}\n{lines}\n").encode("utf-8")


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def run_stamp(path: Path) -> tuple[object, ...]:
    """What changes when a run writes anything: its file, journal and owner record."""
    return tuple(_stat(path.with_name(path.name + suffix)) for suffix in ("", ".journal", ".owner"))


async def watch(
    stamp: Callable[[], object],
    render: Callable[[], Awaitable[list[bytes]]],
    disconnected: Callable[[], Awaitable[bool]],
    every: float = POLL_SECONDS,
) -> AsyncIterator[bytes]:
    """Events from ``render`` each time ``stamp`` changes (looked at each ``every``
    seconds), until the client goes away."""
    last: object = stamp()
    quiet = 0.0
    yield b"retry: 1000\n\n"
    while True:
        await asyncio.sleep(every)
        if await disconnected():
            return
        now = await asyncio.to_thread(stamp)
        if now == last:
            quiet += every
            if quiet >= KEEPALIVE_SECONDS:
                quiet = 0.0
                yield b": keep-alive\n\n"
            continue
        last, quiet = now, 0.0
        for chunk in await render():
            yield chunk
