"""GitHub as a ``flow ci`` job sees it, without GitHub: a local REST API that describes pull
requests, the payloads of the events, and a bare ``origin`` with a pull request's refs."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.git import git

#: The workflow a pull request's jobs run in these tests: one command tool, ``stamp``, that
#: an ``approve: stamp`` holds for a person.
STAMP_WORKFLOW = """\
---
description: Stamp the change, then report
commands:
  stamp:
    description: Stamp the build
    argv: ["true"]
tools: [stamp]
---
Stamp the build, then say that it is done.
"""
#: The action's ``seal-key`` input in these tests (base64 of 32 bytes).
SEAL_KEY = base64.b64encode(bytes(range(32))).decode()


def pull_request(
    number: int,
    *,
    base_sha: str,
    head_sha: str,
    head_ref: str = "feature",
    repo: str = "team/project",
    head_repo: str | None = None,
) -> dict[str, Any]:
    """A pull request in the REST API's form (also the ``pull_request`` event's)."""
    return {
        "number": number,
        "base": {"ref": "main", "sha": base_sha, "repo": {"full_name": repo}},
        "head": {"ref": head_ref, "sha": head_sha, "repo": {"full_name": head_repo or repo}},
    }


def comment_event(number: int, body: str, *, login: str, association: str) -> dict[str, Any]:
    """An ``issue_comment`` event on pull request ``number``."""
    return {
        "action": "created",
        "issue": {"number": number, "pull_request": {"url": f"/pulls/{number}"}},
        "comment": {
            "body": body,
            "user": {"login": login},
            "author_association": association,
            "html_url": f"https://github.example/team/project/pull/{number}#issuecomment-1",
        },
        "repository": {"full_name": "team/project", "default_branch": "main"},
    }


@contextmanager
def rest_api(pulls: dict[int, dict[str, Any]]) -> Iterator[tuple[str, list[str]]]:
    """A REST API answering ``GET /repos/OWNER/REPO/pulls/N`` from ``pulls``: its URL (for
    ``GITHUB_API_URL``) and the Authorization headers it was sent."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            number = self.path.rstrip("/").rsplit("/", 1)[-1]
            found = pulls.get(int(number)) if number.isdigit() else None
            body = json.dumps(found if found else {"message": "Not Found"}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def publish_pull(seed: Path, number: int, branch: str = "feature") -> str:
    """Push ``branch`` of the clone ``seed`` as pull request ``number``'s head (as GitHub keeps
    ``refs/pull/N/head``); its commit."""
    git(seed, "push", "-q", "origin", f"{branch}:refs/pull/{number}/head", "--force")
    return git(seed, "rev-parse", branch).strip()
