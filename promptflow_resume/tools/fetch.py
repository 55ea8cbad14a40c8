"""``fetch_webpage {url}``: an HTTP(S) GET with consent per host, a size cap and HTML → text.

The host must be allowed (``--allow-fetch HOST``, the workflow's ``allow-fetch:``, or a person
on a terminal; see ``tools.consent``); a refusal is a result the model reads. Redirects are
followed only to hosts that are allowed too. At most ``MAX_FETCH_BYTES`` are read; HTML is
turned into plain text (scripts and styles dropped, block elements on their own lines), other
text is returned as it is, and binary content is described, not shown. A GET changes nothing,
so the tool is idempotent.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from html.parser import HTMLParser
from typing import Any

from ..chat import ToolSpec
from .base import ToolContext, ToolResult
from .builtin import _object_schema, error_result, signature, validate_arguments

MAX_FETCH_BYTES = 2 * 1024 * 1024
#: Characters of text returned to the model.
MAX_FETCH_CHARS = 100_000
FETCH_TIMEOUT = 30.0
MAX_REDIRECTS = 5

_BLOCKS = frozenset(
    {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table"}
    | {"section", "article", "header", "footer", "pre", "blockquote", "dt", "dd", "nav", "main"}
)
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIP:
            self.skipping += 1
        elif tag in _BLOCKS:
            self.parts.append("\n")
            if tag == "li":
                self.parts.append("- ")
            elif tag in ("h1", "h2", "h3"):
                self.parts.append("#" * int(tag[1]) + " ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self.skipping:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    """Readable text of an HTML page: title first, then the text, blank lines squeezed."""
    parser = _TextParser()
    parser.feed(markup)
    parser.close()
    text = "".join(parser.parts)
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split("\n")]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = html.unescape(parser.title).strip()
    return f"# {title}\n\n{body}" if title else body


def _opener() -> Any:
    """An opener that follows no redirect: each is checked against consent by the tool."""
    # urllib.request pulls http.client, ssl and email (~20 ms): loaded when a page is fetched,
    # not by every command that builds the tool table.
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(NoRedirect)


class FetchWebpage:
    """``fetch_webpage {url}``: a web page as text, from an allowed host."""

    idempotent = True
    spec = ToolSpec(
        name="fetch_webpage",
        description=(
            "Fetch a web page (HTTP GET) and return its text; HTML is converted to plain "
            "text. The user must allow the host."
        ),
        parameters=_object_schema(
            {"url": {"type": "string", "minLength": 1, "description": "http:// or https:// URL."}},
            ["url"],
        ),
    )

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """GET the URL (following allowed redirects) and return its text."""
        problem = validate_arguments(self.spec.parameters, arguments)
        if problem is not None:
            return error_result(f"{problem}. Expected: {signature(self.spec)}.")
        from urllib.error import HTTPError, URLError
        from urllib.request import Request

        url: str = arguments["url"].strip()
        opener = _opener()
        for _ in range(MAX_REDIRECTS + 1):
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                return error_result(f"'{url}' is not an http:// or https:// URL")
            host = parts.hostname
            decision = ctx.consent.fetch(host, url) if ctx.consent is not None else None
            if decision is None or not decision.allowed:
                why = decision.how if decision is not None else "nobody can be asked"
                return ToolResult(
                    f"{url} was not fetched: the user did not allow the host {host} ({why}). "
                    "Do without it, or ask the user to allow it (--allow-fetch HOST).",
                    is_error=True,
                )
            request = Request(url, headers={"User-Agent": "flow-fetch/1"})
            try:
                with opener.open(request, timeout=FETCH_TIMEOUT) as response:
                    data = response.read(MAX_FETCH_BYTES + 1)
                    kind = response.headers.get_content_type()
                    charset = response.headers.get_content_charset() or "utf-8"
                    status = response.status
                break
            except HTTPError as exc:
                location = (
                    exc.headers.get("Location") if exc.code in (301, 302, 303, 307, 308) else None
                )
                if location:
                    url = urllib.parse.urljoin(url, location)
                    continue
                return ToolResult(f"HTTP {exc.code} {exc.reason} for {url}", is_error=True)
            except (URLError, OSError, ValueError) as exc:
                reason = getattr(exc, "reason", exc)
                return ToolResult(f"could not fetch {url}: {reason}", is_error=True)
        else:
            return error_result(f"more than {MAX_REDIRECTS} redirects from {arguments['url']}")
        truncated = len(data) > MAX_FETCH_BYTES
        data = data[:MAX_FETCH_BYTES]
        if b"\x00" in data[:8192]:
            return ToolResult(f"{url}: binary content ({kind}, {len(data)} bytes); not shown")
        try:
            text = data.decode(charset, errors="replace")
        except LookupError:
            text = data.decode("utf-8", errors="replace")
        if kind in ("text/html", "application/xhtml+xml"):
            text = html_to_text(text)
        notes = []
        if truncated:
            notes.append(f"only the first {MAX_FETCH_BYTES} bytes were read")
        if len(text) > MAX_FETCH_CHARS:
            text = text[:MAX_FETCH_CHARS]
            notes.append(f"text cut at {MAX_FETCH_CHARS} characters")
        head = f"{url} (HTTP {status}, {kind})"
        tail = "".join(f"\n[{n}]" for n in notes)
        return ToolResult(f"{head}\n\n{text}{tail}")
