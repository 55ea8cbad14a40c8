"""What stands between a browser and the runs: the access token, the Host check, CSRF tokens,
and the headers every response carries.

A web page on another site can make a browser send requests to ``127.0.0.1``; so every request
must prove it comes from the person who started ``flow serve``:

- the token printed in the URL (``?token=…``) is exchanged on the first visit for a cookie
  (``HttpOnly``, ``SameSite=Strict``), then dropped from the address bar;
- the ``Host`` header must name this server (``127.0.0.1:PORT``, ``localhost:PORT`` …), so a
  DNS-rebinding page whose name now points at 127.0.0.1 is refused;
- a POST carries a CSRF token (derived from the access token) in a form field, and an
  ``Origin`` header, when sent, must be this server's;
- every response has a strict Content-Security-Policy (scripts only from this server, nothing
  from anywhere else), ``nosniff``, no framing, no referrer sent to other sites.

The guard is plain ASGI, so it wraps the whole application and nothing reaches a route
unchecked::

    guard = Guard.new("127.0.0.1", 8765)
    app = GuardedApp(starlette_app, guard)
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The pages' policy: as strict as ``flow show --html``'s, plus scripts, live updates and
#: forms from this server only.
POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
#: A file served for download (a sidecar, an exported page) runs nothing even if opened.
DOWNLOAD_POLICY = "default-src 'none'; sandbox"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_ANY = ("0.0.0.0", "::", "")


@dataclass(frozen=True)
class Guard:
    """The server's secrets and the names it answers to."""

    token: str
    host: str
    port: int

    @classmethod
    def new(cls, host: str, port: int) -> Guard:
        """A guard with a fresh random token."""
        return cls(secrets.token_urlsafe(24), host, port)

    @property
    def cookie(self) -> str:
        """The cookie's name: one per port, so two servers on one machine do not clash."""
        return f"flow_serve_{self.port}"

    @property
    def csrf(self) -> str:
        """The CSRF token every form carries (derived, so it needs no storage)."""
        return hmac.new(self.token.encode(), b"csrf", hashlib.sha256).hexdigest()[:32]

    def url(self, path: str = "/") -> str:
        """The address to open, with the token; the one line ``flow serve`` prints first."""
        name = self.host if self.host not in _ANY else "127.0.0.1"
        if ":" in name and not name.startswith("["):
            name = f"[{name}]"
        return f"http://{name}:{self.port}{path}?{urlencode({'token': self.token})}"

    def host_ok(self, value: str | None) -> bool:
        """Whether a ``Host`` header names this server (DNS rebinding sends another name)."""
        if not value:
            return False
        name, sep, port = value.rpartition(":")
        if not sep or port != str(self.port) or (name.count(":") and not name.startswith("[")):
            return False
        if name in _LOOPBACK_NAMES or name == self.host or f"[{self.host}]" == name:
            return True
        if self.host in _ANY:
            # Bound to every address: any address of this machine is a literal IP, never a
            # name an attacker's DNS can point here.
            try:
                ipaddress.ip_address(name.strip("[]"))
            except ValueError:
                return False
            return True
        return False

    def origin_ok(self, origin: str | None) -> bool:
        """An ``Origin`` header (sent by browsers on POST) must be this server's."""
        if origin is None:
            return True
        scheme, sep, rest = origin.partition("://")
        return scheme == "http" and bool(sep) and self.host_ok(rest)

    def token_ok(self, given: str | None) -> bool:
        """Whether ``given`` is the access token (compared in constant time)."""
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_ok(self, given: str | None) -> bool:
        """Whether a form's ``csrf`` field is right."""
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())


def security_headers(policy: str = POLICY) -> list[tuple[bytes, bytes]]:
    """The headers every response carries."""
    return [
        (b"content-security-policy", policy.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        # same-origin, not no-referrer: with no-referrer a form's Origin is "null".
        (b"referrer-policy", b"same-origin"),
        (b"cache-control", b"no-store"),
        (b"cross-origin-opener-policy", b"same-origin"),
        (b"cross-origin-resource-policy", b"same-origin"),
    ]


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]]) -> None:
    body = text.encode("utf-8")
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *security_headers(),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class GuardedApp:
    """The application behind the guard: refuses what does not prove itself, adds headers."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check one request, then pass it on with the security headers added."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        guard = self.guard
        if not guard.host_ok(headers.get("host")):
            await _plain(send, 421, "This server does not answer to that host name.", [])
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header is no cookie
            cookie = SimpleCookie()
        morsel = cookie.get(guard.cookie)
        if not guard.token_ok(morsel.value if morsel is not None else None):
            if scope["method"] == "GET" and guard.token_ok(query.get("token")):
                # First visit: the token becomes a cookie and leaves the address bar (and
                # the history) at once.
                rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
                where = scope["path"] + (f"?{rest}" if rest else "")
                set_cookie = (
                    f"{guard.cookie}={guard.token}; Path=/; HttpOnly; SameSite=Strict"
                ).encode()
                await _plain(
                    send,
                    303,
                    "See the page without the token.",
                    [(b"location", where.encode("latin-1")), (b"set-cookie", set_cookie)],
                )
                return
            await _plain(
                send,
                403,
                "Open the address flow serve printed (it holds the access token).",
                [],
            )
            return
        if scope["method"] not in ("GET", "HEAD") and not guard.origin_ok(headers.get("origin")):
            await _plain(send, 403, "A request from another site was refused.", [])
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [h for h in security_headers() if h[0] not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_secured)
