"""An ``http://`` endpoint of the openai provider that redirects to ``https://``: the TLS
connection is verified as the SDK's default client verifies it (the client for a plain-HTTP
base URL loads the certificates only then), against real local servers and a certificate made
for the test."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.support.flowproc import flow_env
from tests.support.providers import PROXY_ENV_VARS

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4.1",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "answered over TLS"},
        }
    ],
}

#: Sends one request through the openai provider to ``sys.argv[1]``; prints the reply or the
#: error's message.
ASK = """
import sys
from promptflow_resume.base.errors import ProviderError
from promptflow_resume.chat import Message
from promptflow_resume.providers.provider import ProviderSettings, Request
from promptflow_resume.providers.openai import OpenAIProvider
provider = OpenAIProvider(
    ProviderSettings("openai", model="gpt-4.1", base_url=sys.argv[1], stream=False)
)
try:
    print(provider.complete(Request(messages=(Message("user", "hi"),))).content)
except ProviderError as error:
    print(error)
"""


class _Answer(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.dumps(COMPLETION).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _servers(cert: Path, key: Path) -> Iterator[str]:
    """A TLS server that answers, and a plain one that redirects (307) every request to it;
    the plain one's base URL."""
    tls = HTTPServer(("127.0.0.1", 0), _Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    tls.socket = context.wrap_socket(tls.socket, server_side=True)
    target = f"https://127.0.0.1:{tls.server_address[1]}"

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(307)
            self.send_header("location", target + self.path)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    plain = HTTPServer(("127.0.0.1", 0), Redirect)
    for server in (tls, plain):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{plain.server_address[1]}/v1"
    finally:
        for server in (tls, plain):
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("trusted", [False, True])
def test_a_redirect_to_https_is_verified_against_the_system_certificates(
    tmp_path: Path, trusted: bool
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    make_cert = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    make_cert += ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"]
    make_cert += ["-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        make_cert,
        check=True,
        capture_output=True,
    )
    env = {k: v for k, v in flow_env().items() if k not in PROXY_ENV_VARS}
    env["OPENAI_API_KEY"] = "sk-test-redirect"
    env.pop("SSL_CERT_FILE", None)
    env.pop("SSL_CERT_DIR", None)
    if trusted:
        env["SSL_CERT_FILE"] = str(cert)  # the certificates the HTTP library trusts
    with _servers(cert, key) as url:
        said = subprocess.run(
            [sys.executable, "-c", ASK, url],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    if trusted:
        assert said.strip() == "answered over TLS"
    else:
        assert "CERTIFICATE_VERIFY_FAILED" in said
