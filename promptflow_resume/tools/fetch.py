"""``fetch_webpage {url}``: an HTTP(S) GET with consent per host, a size cap and HTML → Markdown.

The host must be allowed (``--allow-fetch HOST``, the workflow's ``allow-fetch:``, or a person
on a terminal; see ``tools.consent``); a refusal is a result the model reads. Redirects are
followed only to hosts that are allowed too. At most ``MAX_FETCH_BYTES`` are read; HTML is
turned into Markdown by markdownify (headings, links, lists, tables and code kept; scripts and
styles dropped; relative links made absolute), other text is returned as it is, and binary
content is described, not shown. At most ``MAX_FETCH_CHARS`` characters are returned. A GET
changes nothing, so the tool is idempotent.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from ..chat import ToolSpec
from .builtin import _object_schema, error_result, signature, validate_arguments
from .tool import Standalone, ToolContext, ToolResult

MAX_FETCH_BYTES = 2 * 1024 * 1024
#: Characters of text returned to the model.
MAX_FETCH_CHARS = 100_000
FETCH_TIMEOUT = 30.0
MAX_REDIRECTS = 5

#: Elements whose content is never page text: dropped before converting.
_DROPPED = ("script", "style", "noscript", "template", "svg", "head", "iframe", "object")
#: Attributes holding a URL, per element: made absolute against the page's URL.
_LINKS = (("a", "href"), ("img", "src"), ("area", "href"))


def html_to_markdown(markup: str, url: str = "") -> str:
    """A page as Markdown (headings, links, lists, tables, code), as the editor's fetch tool
    gives it: the title first as a heading, scripts and styles dropped, relative links made
    absolute against ``url`` (or the page's ``<base href>``), blank lines squeezed."""
    # bs4 and markdownify (~60 ms to import) load when a page is converted, not at start-up.
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(markup, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title is not None else ""
    base_tag = soup.find("base", href=True)
    base = urllib.parse.urljoin(url, str(base_tag["href"])) if base_tag is not None else url
    for element in soup.find_all(_DROPPED):
        element.decompose()
    for tag, attribute in _LINKS:
        for element in soup.find_all(tag, attrs={attribute: True}):
            target = str(element[attribute]).strip()
            if base and not target.startswith(("#", "javascript:", "data:")):
                element[attribute] = urllib.parse.urljoin(base, target)
    # Unescaped: the model reads snake_case names and globs as written.
    converter = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        escape_misc=False,
        escape_underscores=False,
        escape_asterisks=False,
    )
    text = converter.convert_soup(soup)
    lines = [line.rstrip() for line in text.splitlines()]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
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


class FetchWebpage(Standalone):
    """``fetch_webpage {url}``: a web page as text, from an allowed host."""

    idempotent = True
    #: Changes no file: no snapshot after its calls (docs/spec.md 12).
    read_only = True
    spec = ToolSpec(
        name="fetch_webpage",
        description=(
            "Fetch a web page (HTTP GET) and return its text; HTML is converted to Markdown "
            "(headings, links, lists, tables). The user must allow the host."
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
            text = html_to_markdown(text, url)
        notes = []
        if truncated:
            notes.append(f"only the first {MAX_FETCH_BYTES} bytes were read")
        if len(text) > MAX_FETCH_CHARS:
            text = text[:MAX_FETCH_CHARS]
            notes.append(f"text cut at {MAX_FETCH_CHARS} characters")
        head = f"{url} (HTTP {status}, {kind})"
        tail = "".join(f"\n[{n}]" for n in notes)
        return ToolResult(f"{head}\n\n{text}{tail}")
