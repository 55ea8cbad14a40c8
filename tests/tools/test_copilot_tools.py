"""Copilot-style prompt files run with the scripted provider calling each mapped tool: the
edit's diff, the todo checklist and the thought end up in the progress file; model-chosen
commands and fetches run only with consent; refusals are results and the run goes on."""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.api import Permissions, RunOptions, StartRequest, start_run
from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import Run
from promptflow_resume.run.events import Reporter
from promptflow_resume.tools.changes import GetChangedFiles
from promptflow_resume.tools.consent import Consent
from promptflow_resume.tools.fetch import FetchWebpage, html_to_markdown
from promptflow_resume.tools.tool import ToolContext
from tests import support
from tests.support.flowproc import flow, flow_env

COPILOT = support.FIXTURES / "copilot"


class Notices(Reporter):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def notice(self, text: str) -> None:
        self.lines.append(text)


def project(where: Path, name: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    for suffix in (".prompt.md", ".script.yaml"):
        shutil.copy(COPILOT / f"{name}{suffix}", where / f"{name}{suffix}")
    (where / "src").mkdir(exist_ok=True)
    (where / "src" / "greet.py").write_text(
        'GREETING = "Hello"\n\n\ndef greet(name):\n    return f"{GREETING}, {name}"\n'
    )
    (where / "src" / "other.py").write_text("print('nothing to see')\n")
    return where


def start(where: Path, name: str, **options: Any) -> tuple[Run, Path]:
    request = StartRequest(
        where / f"{name}.prompt.md",
        recording=where / f"{name}.script.yaml",
        progress=where / "run" / "progress.md",
    )
    outcome = start_run(request, RunOptions(workspace=where, **options))
    return outcome.run, outcome.path


def results(run: Run) -> list[tuple[str | None, str, bool]]:
    return [(e.tool, e.content, e.is_error) for e in run.transcript if e.role == "tool_result"]


def test_an_agent_prompt_finds_and_edits_with_the_diff_in_the_progress_file(
    tmp_path: Path,
) -> None:
    where = project(tmp_path / "p", "find-and-edit")
    notices = Notices()
    run, path = start(where, "find-and-edit", reporter=notices)
    assert run.status == "completed"
    assert (where / "src" / "greet.py").read_text().startswith('GREETING = "Hello there"\n')
    tools = [t for t, _, _ in results(run)]
    assert tools == [
        "manage_todo_list",
        "think",
        "codebase_search",
        "search_files",
        "replace_string_in_file",
        "get_changed_files",
        "manage_todo_list",
    ]
    text = path.read_text(encoding="utf-8")
    # The diff, the checklist and the thought are in the progress file as written.
    assert '-GREETING = "Hello"\n+GREETING = "Hello there"' in text
    assert "- [x] Find the greeting\n- [x] Change it" in text
    assert "- [ ] Find the greeting *(in progress)*" in text
    assert "The greeting is probably a string constant in src/." in text
    assert 'src/greet.py:1: GREETING = "Hello"' in text
    assert "src/greet.py (score" in text  # codebase_search ranked the file
    assert "the workspace is not a git repository" in text
    # Editor-only tools: one line for the run.
    assert [n for n in notices.lines if "editor-only" in n] == [
        "editor-only tools not offered outside VS Code: `problems`, `usages`."
    ]
    loaded, _ = load_progress(path)
    assert [e.content for e in loaded.transcript] == [e.content for e in run.transcript]
    # The progress file records what each Copilot name became.
    note = loaded.attempts[0].notes[0]
    assert note.startswith(
        "tools by their prompt-file names: search/codebase → codebase_search, search_files, "
        "list_files, read_file; edit/editFiles → read_file, create_file"
    )


def test_commands_are_refused_without_consent_and_the_run_goes_on(tmp_path: Path) -> None:
    where = project(tmp_path / "p", "run-command")
    run, _ = start(where, "run-command")
    assert run.status == "completed"
    (first, text, error), (second, _, _) = results(run)
    assert first == second == "run_in_terminal" and error
    assert "the command was not run: the user did not allow it" in text
    assert "--allow-commands" in text
    assert not (where / "marker.txt").exists()


def test_allow_commands_patterns_decide_what_runs(tmp_path: Path) -> None:
    where = project(tmp_path / "p", "run-command")
    run, _ = start(where, "run-command", permissions=Permissions(commands=("ls *",)))
    (_, _, error), (_, _, refused_error) = results(run)
    # `ls src | wc -l` has a pipe: `ls *` does not cover it; only an exact pattern or '*' does.
    assert refused_error and error
    where2 = project(tmp_path / "q", "run-command")
    run, _ = start(where2, "run-command", permissions=Permissions(commands=("*",)))
    (_, counted, error), (_, _, _) = results(run)
    assert not error and counted.startswith("exit code: 0\n--- stdout ---\n2")
    assert (where2 / "marker.txt").read_text() == "ran\n"


def test_the_workflows_allow_list_allows_and_a_progress_file_cannot(tmp_path: Path) -> None:
    where = project(tmp_path / "p", "run-command")
    workflow = where / "run-command.prompt.md"
    workflow.write_text(
        workflow.read_text().replace(
            "tools: ['runCommands']",
            "tools: ['runCommands']\nallow-commands: ['echo ran >> marker.txt']",
        )
    )
    run, path = start(where, "run-command")
    (_, _, first_error), (_, _, second_error) = results(run)
    assert first_error and not second_error
    assert (where / "marker.txt").read_text() == "ran\n"
    # The file records the workflow's list only to notice a change (docs/spec.md 10.7); a
    # wider list planted in it allows nothing (tests/hostile/test_hostile_permissions.py).
    recorded, _ = load_progress(path)
    assert recorded.config.permissions.commands == ["echo ran >> marker.txt"]


def test_a_command_in_flight_at_a_crash_needs_review(tmp_path: Path) -> None:
    where = project(tmp_path / "p", "run-command")
    args = ("run", "run-command.prompt.md", "--recording", "run-command.script.yaml")
    more = ("--progress", "run/progress.md", "--new", "--allow-commands", "*")
    crash = flow_env(FLOW_CRASH_AT="engine.tool_start_recorded")
    killed = flow(*args, *more, cwd=where, env=crash)
    assert killed.returncode == -9, killed.stderr
    resumed = flow("resume", "run/progress.md", "--allow-commands", "*", cwd=where)
    assert resumed.returncode == 8, resumed.stderr
    assert "run_in_terminal" in resumed.stderr and "not idempotent" in resumed.stderr


# --- changes and fetch --------------------------------------------------------------------


def test_changes_show_git_status_and_diff(tmp_path: Path) -> None:
    where = project(tmp_path / "p", "find-and-edit")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=where, check=True)
    subprocess.run([*git, "add", "."], cwd=where, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=where, check=True)
    ctx = ToolContext(where)
    assert GetChangedFiles().run({}, ctx).content.startswith("no changes")
    greet = where / "src" / "greet.py"
    greet.write_text(greet.read_text().replace('"Hello"', '"Hi"'))
    (where / "notes.txt").write_text("new\n")
    text = GetChangedFiles().run({}, ctx).content
    assert " M src/greet.py" in text and "?? notes.txt" in text
    assert '-GREETING = "Hello"\n+GREETING = "Hi"' in text
    assert "not a git repository" in GetChangedFiles().run({}, ToolContext(tmp_path)).content


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{self.server.server_port}/doc")
            self.end_headers()
            return
        body = (
            b"<html><head><title>Guide</title><style>p{}</style></head><body>"
            b"<h1>Install</h1><p>Run <b>pip install</b> x.</p><script>evil()</script>"
            b"<ul><li>one</li><li>two</li></ul></body></html>"
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_port
    httpd.shutdown()
    httpd.server_close()


def test_fetch_needs_the_host_allowed_and_returns_text(server: int, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{server}/doc"
    refused = FetchWebpage().run({"url": url}, ToolContext(tmp_path, consent=Consent()))
    assert refused.is_error and "was not fetched" in refused.content
    allowed = ToolContext(tmp_path, consent=Consent(hosts=("127.0.0.1",)))
    page = FetchWebpage().run({"url": url}, allowed)
    assert not page.is_error
    assert "# Guide" in page.content and "Run **pip install** x." in page.content
    assert "- one\n" in page.content and "evil" not in page.content
    # A redirect to a host that is not allowed is not followed.
    moved = FetchWebpage().run({"url": f"http://127.0.0.1:{server}/moved"}, allowed)
    assert moved.is_error and "localhost" in moved.content


def test_html_to_markdown_keeps_structure() -> None:
    assert html_to_markdown("<h2>A</h2><p>b &amp; c</p>") == "## A\n\nb & c"


def test_a_progress_file_cannot_make_a_command_run_without_consent(tmp_path: Path) -> None:
    # The first run was allowed to run commands and crashed with one in flight; whoever
    # resumes it without --allow-commands gets a refusal, even with --rerun-unsafe.
    where = project(tmp_path / "p", "run-command")
    args = ("run", "run-command.prompt.md", "--recording", "run-command.script.yaml")
    more = ("--progress", "run/progress.md", "--new", "--allow-commands", "*")
    crash = flow_env(FLOW_CRASH_AT="engine.tool_start_recorded:2")
    assert flow(*args, *more, cwd=where, env=crash).returncode == -9
    resumed = flow("resume", "run/progress.md", "--rerun-unsafe", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert not (where / "marker.txt").exists()
    run, _ = load_progress(where / "run" / "progress.md")
    last = [e for e in run.transcript if e.role == "tool_result"][-1]
    assert last.is_error and "the command was not run" in last.content


def test_secrets_in_an_edit_are_redacted_in_its_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-proj-" + "Q7x9" * 10
    monkeypatch.setenv("DEPLOY_TOKEN", secret)
    where = project(tmp_path / "p", "find-and-edit")
    script = where / "find-and-edit.script.yaml"
    script.write_text(script.read_text().replace('"Hello there"', f'"{secret}"'))
    run, path = start(where, "find-and-edit")
    assert run.status == "completed"
    # Tools run with the arguments as recorded (redacted), so a resumed run does the same.
    assert secret not in (where / "src" / "greet.py").read_text()
    text = path.read_text(encoding="utf-8")
    assert secret not in text
    assert '+GREETING = "[REDACTED:DEPLOY_TOKEN]"' in text


def test_run_tests_uses_the_declared_test_command(tmp_path: Path) -> None:
    from promptflow_resume.tools import build_tools
    from promptflow_resume.workflow import parse_workflow

    text = (
        "---\ntools: [runTests, testFailure]\ncommands:\n  test:\n"
        "    argv: [sh, -c, 'test -f ok.txt && echo passed || { echo 1 failed; exit 1; }']\n"
        "    idempotent: true\n---\nRun the tests.\n"
    )
    wf = parse_workflow(text, path=tmp_path / "t.prompt.md")
    tools = build_tools(wf, tmp_path)
    ctx = ToolContext(tmp_path)
    failing = tools["runTests"].run({}, ctx)
    assert failing.is_error and "1 failed" in failing.content
    assert "1 failed" in tools["testFailure"].run({}, ctx).content
    (tmp_path / "ok.txt").write_text("")
    assert tools["runTests"].run({}, ctx).content == "exit code: 0\n--- stdout ---\npassed\n"
    assert tools["testFailure"].run({}, ctx).content.startswith("no test fails")
    bare = build_tools(parse_workflow("---\ntools: [runTests]\n---\nGo.\n", path="b.md"), tmp_path)
    none = bare["runTests"].run({}, ctx)
    assert none.is_error and "no test command is declared" in none.content


def test_flow_run_fetches_only_from_hosts_allowed_on_the_command_line(
    server: int, tmp_path: Path
) -> None:
    where = tmp_path / "p"
    where.mkdir()
    (where / "docs.prompt.md").write_text(
        "---\nmode: agent\nprovider: scripted\ntools: ['web/fetch']\n---\nRead the guide.\n"
    )
    (where / "docs.script.yaml").write_text(
        "replies:\n  - content: Fetching.\n    tool_calls:\n      - name: fetch_webpage\n"
        f"        arguments: {{url: 'http://127.0.0.1:{server}/doc'}}\n  - Read it.\n"
    )
    args = ("run", "docs.prompt.md", "--recording", "docs.script.yaml", "--new")
    allowed = flow(*args, "--progress", "a/progress.md", "--allow-fetch", "127.0.0.1", cwd=where)
    assert allowed.returncode == 0, allowed.stderr
    refused = flow(*args, "--progress", "b/progress.md", cwd=where)
    assert refused.returncode == 0, refused.stderr
    (ok,) = results(load_progress(where / "a" / "progress.md")[0])
    assert ok[0] == "fetch_webpage" and not ok[2] and "# Guide\n\n# Install" in ok[1]
    (no,) = results(load_progress(where / "b" / "progress.md")[0])
    assert no[2] and "was not fetched: the user did not allow the host 127.0.0.1" in no[1]
