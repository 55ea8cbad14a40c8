"""A ``flow serve`` process for tests: started on a free port, its URL read from its first line,
and requests sent with any headers (a foreign ``Host``, no cookie) over a real socket::

    with Server(folder) as server:
        status, headers, body = server.get("/")              # with the token's cookie
        status, _, _ = server.get("/", cookie=False)         # refused: 403
"""

from __future__ import annotations

import http.client
import re
import select
import subprocess
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from tests.support.flowproc import FLOW, flow_env


class Server:
    """``flow serve FOLDER --port 0`` in the background."""

    def __init__(self, *folders: Path, cwd: Path | None = None) -> None:
        self.folders = folders
        self.cwd = cwd or folders[0]
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.port = 0
        self.token = ""

    def __enter__(self) -> Server:
        self.process = subprocess.Popen(
            [*FLOW, "serve", *map(str, self.folders), "--port", "0"],
            cwd=self.cwd,
            env=flow_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 30)
        assert ready, "flow serve printed no URL within 30 s"
        self.url = self.process.stdout.readline().strip()
        parts = urlsplit(self.url)
        assert parts.port is not None, self.url + (
            self.process.stderr.read() if self.process.stderr else ""
        )
        self.port = parts.port
        found = re.search(r"token=([\w-]+)", self.url)
        assert found is not None
        self.token = found.group(1)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def cookie(self) -> str:
        """The cookie a browser holds after the first visit."""
        return f"flow_serve_{self.port}={self.token}"

    def request(
        self,
        method: str,
        path: str,
        *,
        body: str | None = None,
        cookie: bool = True,
        host: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], str]:
        """One request; returns the status, the headers (lower-case names) and the body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = {"Host": f"127.0.0.1:{self.port}" if host is None else host, **(headers or {})}
        if cookie:
            sent["Cookie"] = self.cookie
        if body is not None:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        started = time.monotonic()
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        data = response.read().decode("utf-8", "replace")
        self.last_seconds = time.monotonic() - started
        conn.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data

    def get(self, path: str, **kwargs: object) -> tuple[int, dict[str, str], str]:
        """A GET request (see ``request``)."""
        return self.request("GET", path, **kwargs)  # type: ignore[arg-type]
