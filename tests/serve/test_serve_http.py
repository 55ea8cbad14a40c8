"""``flow serve`` over real HTTP, without a browser: who may ask (token, cookie, Host, CSRF,
Origin), what may be read (the served folders only), what every page escapes, and the errors
a person can cause when starting it (docs/spec.md 14)."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from promptflow_resume.progress import load_progress, render
from promptflow_resume.run.humananswers import ANSWER_PLACEHOLDER
from promptflow_resume.serve.security import Guard
from tests.support import xss
from tests.support.flowproc import flow
from tests.support.serve import Server


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """A server over a folder holding the hostile runs, a plain run, and a secret beside it."""
    root = tmp_path_factory.mktemp("served")
    folder = root / "project"
    xss.plant(folder)
    plain = folder / ".flow" / "runs" / "plain" / "progress.md"
    plain.parent.mkdir(parents=True)
    plain.write_text(render(xss.plain_run()), encoding="utf-8")
    (plain.parent / "progress.files").mkdir()
    (plain.parent / "progress.files" / "out.txt").write_text("sidecar text", encoding="utf-8")
    (root / "secret.txt").write_text("outside the served folder", encoding="utf-8")
    (folder / ".flow" / "runs" / "plain" / "escape.txt").symlink_to(root / "secret.txt")
    with Server(folder) as server:
        yield server, folder


def test_the_url_holds_a_token_that_becomes_a_cookie(site: tuple[Server, Path]) -> None:
    server, _ = site
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{20,}", server.url)
    status, headers, _ = server.get(f"/?token={server.token}&status=failed", cookie=False)
    assert status == 303 and headers["location"] == "/?status=failed"  # the token leaves
    assert headers["set-cookie"].startswith(f"flow_serve_{server.port}={server.token};")
    assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
    status, _, body = server.get("/")
    assert status == 200 and "3 runs in" in body


@pytest.mark.parametrize(
    "path", ["/", "/run/0/.flow/runs/plain/progress.md", "/static/serve.js", "/events/list"]
)
def test_no_token_no_page(site: tuple[Server, Path], path: str) -> None:
    server, _ = site
    status, _, body = server.get(path, cookie=False)
    assert status == 403 and "Open the address flow serve printed" in body
    status, _, _ = server.get(path + "?token=wrong", cookie=False)
    assert status == 403


@pytest.mark.parametrize(
    "host", ["evil.example:{port}", "127.0.0.1:1", "localhost.evil.example:{port}", "", "x"]
)
def test_a_foreign_host_is_refused_even_with_the_token(
    site: tuple[Server, Path], host: str
) -> None:
    server, _ = site
    status, _, body = server.get("/", host=host.format(port=server.port))
    assert status == 421 and "host name" in body


def test_every_response_carries_the_policy(site: tuple[Server, Path]) -> None:
    server, _ = site
    for path in ("/", "/run/0/.flow/runs/plain/progress.md", "/nothing", "/static/serve.js"):
        _, headers, _ = server.get(path)
        policy = headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize(
    "path",
    [
        "/run/0/../secret.txt",
        "/run/0/%2e%2e/secret.txt",
        "/run/0/.flow/runs/plain/escape.txt",  # a link pointing outside
        "/run/1/.flow/runs/plain/progress.md",  # no second folder
        "/run/0//etc/passwd",
        "/run/0/.flow/runs/plain/progress.md.lock",
        "/export/0/.flow/runs/plain/progress.files/out.txt",  # not a progress file
        "/review/0/../secret.txt",
        "/events/run/0/../secret.txt",
        "/compare/0/.flow/runs/plain/progress.md?with=0/../secret.txt",
        "/run/x/progress.md",
    ],
)
def test_nothing_outside_the_served_folders_is_read(site: tuple[Server, Path], path: str) -> None:
    server, _ = site
    status, _, body = server.get(path)
    assert status == 404 and "outside the served folder" not in body


def test_a_sidecar_is_a_download_that_runs_nothing(site: tuple[Server, Path]) -> None:
    server, _ = site
    status, headers, body = server.get("/run/0/.flow/runs/plain/progress.files/out.txt")
    assert status == 200 and body == "sidecar text"
    assert headers["content-type"] == "application/octet-stream"
    assert "attachment" in headers["content-disposition"]
    assert "sandbox" in headers["content-security-policy"]


def test_every_string_from_a_progress_file_is_escaped(site: tuple[Server, Path]) -> None:
    server, _ = site
    pages = [server.get("/")[2]]
    for name in ("xss-a", "xss-b"):
        pages.append(server.get(f"/run/0/.flow/runs/{name}/progress.md")[2])
        pages.append(server.get(f"/export/0/.flow/runs/{name}/progress.md")[2])
    for page in pages:
        # The only tags a page has are its own: no payload's tag or attribute survives.
        assert "<script>window" not in page and "onerror=" not in page.replace("onerror=&quot;", "")
        assert not re.search(
            r"<(?:img|iframe|svg(?! class=\"chart\")|details open ontoggle|style>@)", page
        )
        assert 'href="javascript' not in page
    assert "&lt;script&gt;window.__flow_xss" in pages[1]  # shown as text


def _form(server: Server, action: str, key: str, body: dict[str, str], **kwargs: object) -> int:
    status, _, _ = server.request(
        "POST",
        f"/act/{action}/{quote(key)}",
        body=urlencode(body),
        **kwargs,  # type: ignore[arg-type]
    )
    return status


def test_a_post_needs_the_csrf_token_and_this_origin(site: tuple[Server, Path]) -> None:
    server, folder = site
    key = "0/.flow/runs/xss-b/progress.md"
    before = (folder / key[2:]).read_bytes()
    csrf = Guard(server.token, "127.0.0.1", server.port).csrf
    assert _form(server, "approve", key, {"call": "call_1"}) == 403
    assert _form(server, "approve", key, {"csrf": "nope", "call": "call_1"}) == 403
    evil = {"Origin": "http://evil.example"}
    assert _form(server, "approve", key, {"csrf": csrf, "call": "call_1"}, headers=evil) == 403
    assert _form(server, "approve", key, {"csrf": csrf}, cookie=False) == 403
    assert (folder / key[2:]).read_bytes() == before  # nothing was written
    assert server.request("GET", f"/act/approve/{quote(key)}")[0] == 405


def test_an_answer_is_text_never_a_file_to_read(tmp_path: Path) -> None:
    # flow answer --text @FILE reads a file; a form must not: the server would read any file.
    run = xss.plain_run()
    run.status, run.reason = "awaiting_input", "a question"
    run.transcript[-1].content = "Which release?\n\n" + ANSWER_PLACEHOLDER
    path = tmp_path / ".flow" / "runs" / "q" / "progress.md"
    path.parent.mkdir(parents=True)
    path.write_text(render(run), encoding="utf-8")
    with Server(tmp_path) as server:
        csrf = Guard(server.token, "127.0.0.1", server.port).csrf
        status, headers, _ = server.request(
            "POST",
            "/act/answer/0/.flow/runs/q/progress.md",
            body=urlencode({"csrf": csrf, "text": "@/etc/hostname"}),
        )
        assert status == 303 and headers["location"].startswith("/run/0/.flow/runs/q/")
        page = server.get(headers["location"])[2]
        assert "answered in progress.md" in page
    answered, _ = load_progress(path)
    assert "@/etc/hostname" in answered.transcript[-1].content


def test_a_port_in_use_is_one_paragraph_and_exit_21(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        result = flow("serve", str(tmp_path), "--port", str(port), cwd=tmp_path)
    finally:
        taken.close()
    assert result.returncode == 21, result.stderr
    assert result.stderr.startswith(f"error: port {port} on 127.0.0.1 is in use.")
    assert "--port 0" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_missing_folder_is_exit_5(tmp_path: Path) -> None:
    result = flow("serve", "nowhere", "--port", "0", cwd=tmp_path)
    assert result.returncode == 5, result.stderr
    assert "nowhere: no such folder." in result.stderr and "Traceback" not in result.stderr


def test_the_list_filters_and_sorts_without_scripts(site: tuple[Server, Path]) -> None:
    server, _ = site
    body = server.get("/?status=awaiting_approval")[2]
    rows = re.findall(r'<tr data-status="([a-z_]+)"', body)
    assert rows == ["awaiting_approval"]
    assert server.get("/?needs=1")[2].count('<span class="needs">approval</span>') == 1
    body = server.get("/?q=nothing-like-this")[2]
    assert "No runs match." in body
    tokens = re.findall(
        r'<td class="num">([\d,]+)</td><td class="num">\$', server.get("/?sort=tokens")[2]
    )
    assert tokens == sorted(tokens, key=lambda t: -int(t.replace(",", "")))


def test_an_entry_edited_by_hand_is_marked(site: tuple[Server, Path]) -> None:
    server, folder = site
    path = folder / ".flow" / "runs" / "xss-a" / "progress.md"
    run, _ = load_progress(path)
    answer = next(e for e in run.transcript if e.role == "assistant")
    text = path.read_text(encoding="utf-8")
    first_line = answer.content.split("\n", 1)[0]
    path.write_text(text.replace(first_line, first_line + " (fixed by hand)", 1), "utf-8")
    page = server.get("/run/0/.flow/runs/xss-a/progress.md")[2]
    assert page.count("edited by hand") == 1
    marked = page[page.index('class="entry assistant edited"') :]
    assert marked.startswith(f'class="entry assistant edited" id="entry-{answer.id}"')
    report = server.get("/export/0/.flow/runs/xss-a/progress.md")[2]
    assert report.count("edited by hand") == 1


@pytest.mark.parametrize(
    ("bound", "host", "ok"),
    [
        ("127.0.0.1", "127.0.0.1:8765", True),
        ("127.0.0.1", "localhost:8765", True),
        ("127.0.0.1", "[::1]:8765", True),
        ("127.0.0.1", "127.0.0.1:80", False),
        ("127.0.0.1", "127.0.0.1", False),
        ("127.0.0.1", "rebind.example:8765", False),
        ("192.168.1.5", "192.168.1.5:8765", True),
        ("192.168.1.5", "10.0.0.1:8765", False),
        ("0.0.0.0", "10.0.0.1:8765", True),  # any address of this machine, as a literal
        ("0.0.0.0", "[fe80::1]:8765", True),
        ("0.0.0.0", "rebind.example:8765", False),  # never a name
        ("::", "host.local:8765", False),
        ("::1", "[::1]:8765", True),
        ("::1", "::1:8765", False),
    ],
)
def test_which_host_names_the_server_answers_to(bound: str, host: str, ok: bool) -> None:
    assert Guard("t", bound, 8765).host_ok(host) is ok


def test_the_printed_url_names_an_address_to_open() -> None:
    assert Guard("abc", "0.0.0.0", 9).url() == "http://127.0.0.1:9/?token=abc"
    assert Guard("abc", "::1", 9).url() == "http://[::1]:9/?token=abc"
    assert Guard("abc", "127.0.0.1", 9).origin_ok("http://127.0.0.1:9")
    assert not Guard("abc", "127.0.0.1", 9).origin_ok("null")
    assert not Guard("abc", "127.0.0.1", 9).origin_ok("https://127.0.0.1:9")


def test_an_event_keeps_every_line_of_its_data_as_data() -> None:
    from promptflow_resume.serve.sse import event

    data = event("entries", "one\ntwo\r\nevent: reload\rthree \ud800")
    assert data == (
        b"event: entries\ndata: one\ndata: two\ndata: event: reload\ndata: three \xef\xbf\xbd\n\n"
    )


def test_compare_shows_flow_diff_of_two_runs_escaped(site: tuple[Server, Path]) -> None:
    server, _ = site
    plain, hostile = "0/.flow/runs/plain/progress.md", "0/.flow/runs/xss-a/progress.md"
    status, _, page = server.get(f"/compare/{hostile}?" + urlencode({"with": plain}))
    assert status == 200, page
    assert "<h2>Edited" in page  # every entry gained the payloads
    assert "<script>window" not in page and 'href="javascript' not in page
    assert not re.search(r"<(?:img|iframe|details open ontoggle|style>@)", page)
    status, _, page = server.get(f"/compare/{hostile}?" + urlencode({"with": "0/../secret.txt"}))
    assert status == 404


def test_compare_against_git_refuses_an_option_as_a_revision(tmp_path: Path) -> None:
    import subprocess

    folder = tmp_path / "repo"
    run_file = folder / ".flow" / "runs" / "plain" / "progress.md"
    run_file.parent.mkdir(parents=True)
    run_file.write_text(render(xss.plain_run()), encoding="utf-8")
    identity = ["-c", "user.name=dev", "-c", "user.email=dev@example.com"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "run"]):
        subprocess.run(["git", *identity, *args], cwd=folder, check=True, capture_output=True)
    run = load_progress(run_file)[0]
    first = next(e for e in run.transcript if e.role == "assistant")
    text = run_file.read_text(encoding="utf-8")
    run_file.write_text(text.replace(first.content, "Changed by hand.", 1), encoding="utf-8")
    key = "0/.flow/runs/plain/progress.md"
    written = tmp_path / "written.txt"
    with Server(folder) as server:
        status, _, page = server.get(f"/compare/{key}?rev=HEAD")
        assert status == 200, page
        assert f"Edited by hand: entry {first.id}" in page and "Changed by hand." in page
        status, _, page = server.get(f"/compare/{key}?" + urlencode({"rev": f"--output={written}"}))
        assert status == 422 and "is not a git revision" in page
    assert not written.exists()
