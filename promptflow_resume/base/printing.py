"""What flow prints for people: one filter for every line, whichever command prints it.

Text that reaches a terminal may come from anyone: a progress file from a pull request, a
provider's error body, a tool's output. Every character of it passes ``for_people`` on its
way out, which does two things, in this order:

1. **redact**: secrets are replaced as they are before anything is written to disk
   (``redact.Redactor.from_environment``: the values of secret-looking environment variables
   and well-known token shapes), so a provider that echoes the key in an error body does not
   put it on the screen or in a CI log;
2. **make controls visible**: a character a terminal would act on instead of showing is
   replaced by a visible stand-in, so a file cannot set the window title, clear the screen,
   write the clipboard (OSC 52), move the cursor, or reorder what a line seems to say:

   - C0 controls and DEL as their Unicode control pictures: ESC ``␛``, BEL ``␇``, a CR that
     does not end a line ``␍``, DEL ``␡``; newline and tab are layout and stay;
   - C1 controls (U+0080–U+009F), bidirectional formatting characters (U+061C, U+200E,
     U+200F, U+202A–U+202E, U+2066–U+2069) and the line and paragraph separators (U+2028,
     U+2029) as ``<U+202E>``;
   - a lone surrogate (text no UTF-8 output can carry) as U+FFFD, as in every UTF-8 view.

The CLI installs the filter once, at its entry (``people_streams``): ``sys.stdout`` and
``sys.stderr`` are wrapped, so plain writes, typer's messages, prompts and the error boundary
all pass it. Rich output goes through ``console()``, whose consoles make controls visible in
what they render (their own colour and cursor sequences are not content and stay) and redact
what they write. ``json_text`` keeps ``--json`` exact JSON: those characters are written as
``\\u`` escapes, which the filter leaves alone and a JSON reader turns back into the same
string::

    with people_streams():
        print("title\\x1b]0;pwned\\x07")        # prints: title␛]0;pwned␇
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
import sys
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, cast

from .redact import Redactor

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment
    from rich.text import Text

__all__ = [
    "PeopleStream",
    "console",
    "for_people",
    "json_text",
    "people_streams",
    "redact_for_people",
    "visible",
]

# Everything a terminal may act on instead of showing. Newline and tab are layout; a CR is
# handled first (a CR before a LF just ends a line).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]"
)


def _stand_in(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # the control pictures block: U+241B is ␛
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


_STAND_INS: dict[str, str] = {
    chr(c): _stand_in(chr(c))
    for c in [
        *range(0x20),
        *range(0x7F, 0xA0),
        *(0x61C, 0x200E, 0x200F, 0x2028, 0x2029),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    ]
}


def _replace(match: re.Match[str]) -> str:
    # Anything else matched is a lone surrogate, text no terminal encoding can carry.
    return _STAND_INS.get(match.group(), "\ufffd")


def visible(text: str) -> str:
    """``text`` with every character a terminal would act on shown as a visible stand-in.

    ``visible(visible(x)) == visible(x)``; text without such characters is returned as is.
    """
    if _INVISIBLE.search(text) is None:
        return text
    return _INVISIBLE.sub(_replace, text.replace("\r\n", "\n"))


@functools.cache
def _redactor() -> Redactor:
    # Built on first use, from the environment the command started with.
    return Redactor.from_environment()


def redact_for_people(text: str) -> str:
    """``text`` with the secrets flow knows of replaced, as on disk."""
    return _redactor().redact(text)[0]


def for_people(text: str) -> str:
    """``text`` ready for a terminal: secrets redacted, then controls made visible."""
    return visible(redact_for_people(text))


def json_text(data: Any) -> str:
    """``data`` as indented JSON text that passes ``for_people`` unchanged but for secrets:
    the characters ``visible`` would replace are written as ``\\u`` escapes."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    # Outside strings JSON is printable ASCII, spaces and newlines: only string content
    # can hold these characters, where an escape is the same character to a JSON reader.
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class PeopleStream(io.TextIOBase):
    """A text stream that passes everything written through ``for_people`` (or, with
    ``controls=False``, only redacts: for rich, whose content is already made visible)."""

    def __init__(self, inner: IO[str], *, controls: bool = True) -> None:
        """Wrap ``inner``; its encoding, terminal-ness and descriptor are reported as is."""
        super().__init__()
        self.inner = inner
        self._filter = for_people if controls else redact_for_people

    def write(self, text: str) -> int:
        """Write ``text`` filtered; returns ``len(text)`` as callers expect."""
        self.inner.write(self._filter(text))
        return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream."""
        self.inner.flush()

    def isatty(self) -> bool:
        """Whether the wrapped stream is a terminal."""
        return self.inner.isatty()

    def fileno(self) -> int:
        """The wrapped stream's descriptor (``OSError`` when it has none)."""
        return self.inner.fileno()

    def writable(self) -> bool:
        """Always writable."""
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The wrapped stream's encoding."""
        return getattr(self.inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        """The wrapped stream's error handler."""
        return getattr(self.inner, "errors", None)


def _unwrapped(stream: IO[str]) -> IO[str]:
    return stream.inner if isinstance(stream, PeopleStream) else stream


@contextlib.contextmanager
def people_streams() -> Iterator[None]:
    """Within the block, ``sys.stdout`` and ``sys.stderr`` pass ``for_people``."""
    saved = sys.stdout, sys.stderr
    sys.stdout = PeopleStream(_unwrapped(sys.stdout))
    sys.stderr = PeopleStream(_unwrapped(sys.stderr))
    try:
        yield
    finally:
        # What was written is in the wrapped streams; only the wrappers are dropped.
        sys.stdout, sys.stderr = saved


def console(*, stderr: bool = False, file: IO[str] | None = None, **options: Any) -> Console:
    """A rich ``Console`` for people: on stdout (``stderr``: stderr, or ``file``), with every
    rendered character made visible and every written line redacted. ``options`` are rich's."""
    return _console_class()(stderr=stderr, file=file, **options)


@functools.cache
def _console_class() -> type[Console]:
    # Made on first use: rich is imported only by the commands that draw with it.
    from rich.console import Console as RichConsole
    from rich.segment import Segment

    class PeopleConsole(RichConsole):
        """Rich's console, with content filtered on its way out."""

        @property  # type: ignore[override]
        def file(self) -> IO[str]:
            # Rich writes its own colour and cursor sequences: they must reach the terminal,
            # so it writes past the control filter of ``people_streams`` (its content is made
            # visible in ``render``) but through a redacting one.
            chosen = RichConsole.file.fget(self)  # type: ignore[attr-defined]
            return cast(IO[str], PeopleStream(_unwrapped(chosen), controls=False))

        @file.setter
        def file(self, new_file: IO[str]) -> None:
            self._file = new_file

        def render_str(self, text: str, **kwargs: Any) -> Text:
            # Before rich measures it, so a table's columns fit what is shown.
            return super().render_str(visible(text), **kwargs)

        def render(
            self, renderable: RenderableType, options: ConsoleOptions | None = None
        ) -> Iterable[Segment]:
            for segment in super().render(renderable, options):
                if segment.control or _INVISIBLE.search(segment.text) is None:
                    yield segment
                else:
                    yield Segment(visible(segment.text), segment.style)

    return PeopleConsole
