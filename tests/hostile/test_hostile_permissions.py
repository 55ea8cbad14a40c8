"""What a command pattern allows, and a workflow whose permissions grew (docs/spec.md 1.6,
10.7).

The model's commands come from a scripted provider; every ``flow`` is a real subprocess in a
real git repository, and marker files prove what ran. A pattern such as ``git *`` must not let
``git -c alias.x='!cmd' x`` or ``git log --output=FILE`` through, and a refusal says why, in
the tool result the model reads and on the terminal line. A workflow that allows more than
when the run last went on (``allow-commands: ['*']`` added in a pull request, which changes no
hash) is reported, and without a terminal the resume stops unless ``--accept-permissions``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from promptflow_resume.base.errors import EXIT_INPUT, EXIT_OK
from promptflow_resume.progress import load_progress, render
from promptflow_resume.progress.frontmatter import from_front_matter, to_front_matter
from tests.support.faults import assert_clean_error, flow, flow_env, snapshot

PROGRESS = "run/progress.md"


def _git_repo(where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    env = flow_env(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    for args in (
        ["init", "-q"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"],
    ):
        subprocess.run(["git", *args], cwd=where, env=env, check=True)


def _workflow(where: Path, commands: list[str], allow: list[str] | None = None) -> None:
    """A workflow whose model runs ``commands`` in one reply, then says it is done."""
    front = "provider: scripted\ntools: ['runCommands']\n"
    if allow is not None:
        front += f"allow-commands: {json.dumps(allow)}\n"
    (where / "cmd.prompt.md").write_text(f"---\n{front}---\nRun the commands.\n")
    calls = [{"name": "run_in_terminal", "arguments": {"command": c}} for c in commands]
    script = {"replies": [{"content": "Running.", "tool_calls": calls}, "Done."]}
    (where / "cmd.script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))


def _run(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return flow(
        "run",
        "cmd.prompt.md",
        "--recording",
        "cmd.script.yaml",
        "--progress",
        PROGRESS,
        "--new",
        "--verbose",
        *args,
        cwd=where,
        env=flow_env(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1"),
    )


def _results(where: Path) -> list[tuple[str, bool]]:
    run, _ = load_progress(where / PROGRESS)
    return [(e.content, e.is_error) for e in run.transcript if e.role == "tool_result"]


# --- what a pattern's wildcard stands for ----------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "command", "named"),
    [
        ("git *", "git -c alias.x='!touch pwned' x", "`-c`"),
        ("git *", "git --config-env=alias.x=EVIL x", "`--config-env=alias.x=EVIL`"),
        ("git *", "git log --output=written.txt", "`--output=written.txt`"),
        ("git *", "git log --outp=written.txt", "`--outp=written.txt`"),
        ("git *", "git config alias.y '!touch pwned'", "`config`"),
        ("find *", "find . -maxdepth 0 -exec touch pwned {} ;", "shell syntax (`;`)"),
        ("find *", "find . -maxdepth 0 -exec touch pwned {} +", "`-exec`"),
        ("find *", "find . -maxdepth 0 -fprint written.txt", "`-fprint`"),
        ("env *", "env touch pwned", "env runs the program named"),
        ("* --version", "sh -c 'touch pwned' --version", "the program `sh`"),
        ("git *", "git status | touch pwned", "shell syntax (`|`)"),
        ("git *", "git status $(touch pwned)", "shell syntax (`$(`)"),
    ],
)
def test_a_wildcard_never_stands_for_an_argument_that_runs_or_writes(
    tmp_path: Path, pattern: str, command: str, named: str
) -> None:
    _git_repo(tmp_path)
    _workflow(tmp_path, [command, "git status --short"])
    result = _run(tmp_path, "--allow-commands", pattern, "--allow-commands", "git status *")
    assert result.returncode == EXIT_OK, result.stderr
    (refused, refused_error), (allowed, allowed_error) = _results(tmp_path)
    assert refused_error and named in refused and f"`{pattern}` does not cover" in refused
    # The terminal line says the same, and a plain command is still allowed.
    assert any(named in line and "✗ run_in_terminal" in line for line in result.stderr.splitlines())
    assert not allowed_error, allowed
    for name in ("pwned", "written.txt"):
        assert not (tmp_path / name).exists(), f"{name}: {command} ran"


@pytest.mark.parametrize(
    ("pattern", "command", "marker"),
    [
        ("git -c *", "git -c alias.x='!touch pwned' x", "pwned"),
        ("git log --output=*", "git log --output=written.txt", "written.txt"),
        ("find . -maxdepth 0 -exec touch *", "find . -maxdepth 0 -exec touch pwned {} +", "pwned"),
    ],
)
def test_an_option_the_pattern_names_itself_is_allowed(
    tmp_path: Path, pattern: str, command: str, marker: str
) -> None:
    _git_repo(tmp_path)
    _workflow(tmp_path, [command])
    result = _run(tmp_path, "--allow-commands", pattern)
    assert result.returncode == EXIT_OK, result.stderr
    [(_, error)] = _results(tmp_path)
    assert not error
    assert (tmp_path / marker).exists()


# --- a workflow whose permissions changed ----------------------------------------------------


@pytest.fixture
def stopped(tmp_path: Path) -> Path:
    """A run that ran `echo hi` (its workflow allows that) and stopped by its turn budget; its
    model's next command is `touch pwned`."""
    _git_repo(tmp_path)
    _workflow(tmp_path, ["echo hi"], allow=["echo hi"])
    script = {
        "replies": [
            {"content": "One.", "tool_calls": [_call("echo hi")]},
            {"content": "Two.", "tool_calls": [_call("touch pwned")]},
            "Done.",
        ]
    }
    (tmp_path / "cmd.script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    result = _run(tmp_path, "--max-turns", "1")
    assert result.returncode == 1, result.stderr
    return tmp_path


def _call(command: str) -> dict[str, Any]:
    return {"name": "run_in_terminal", "arguments": {"command": command}}


def _allow(where: Path, allow: list[str] | None) -> None:
    """Rewrite the workflow's allow-commands (as a pull request might)."""
    path = where / "cmd.prompt.md"
    lines = [
        line for line in path.read_text().splitlines() if not line.startswith("allow-commands:")
    ]
    if allow is not None:
        lines.insert(1, f"allow-commands: {json.dumps(allow)}")
    path.write_text("\n".join(lines) + "\n")


def _resume(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return flow("resume", PROGRESS, "--max-turns", "10", *args, cwd=where)


def test_a_widened_allow_list_stops_a_resume_without_a_terminal(stopped: Path) -> None:
    _allow(stopped, ["*"])
    before = snapshot(stopped)
    result = _resume(stopped)
    last = assert_clean_error(
        result, EXIT_INPUT, "allow-commands added `*`", "--accept-permissions", "cmd.prompt.md"
    )
    assert "allow-commands removed `echo hi`" in last
    assert snapshot(stopped) == before
    assert not (stopped / "pwned").exists()


def test_status_says_what_resume_will_ask_about_a_widened_allow_list(stopped: Path) -> None:
    _allow(stopped, ["*"])
    before = snapshot(stopped)
    text = flow("status", PROGRESS, cwd=stopped)
    assert text.returncode == EXIT_OK, text.stderr
    assert "perms    the workflow's permissions changed since the run last went on: " in text.stdout
    assert "allow-commands added `*`" in text.stdout and "--accept-permissions" in text.stdout
    data = json.loads(flow("status", "--json", PROGRESS, cwd=stopped).stdout)
    assert data["permissions_change"]["widened"] is True
    assert "allow-commands added `*`" in data["permissions_change"]["change"]
    assert snapshot(stopped) == before  # status writes nothing and runs nothing
    assert not (stopped / "pwned").exists()


def test_accepting_a_widened_allow_list_records_it_and_notes_the_change(stopped: Path) -> None:
    _allow(stopped, ["echo hi", "touch *"])
    result = _resume(stopped, "--accept-permissions")
    assert result.returncode == EXIT_OK, result.stderr
    line = "the workflow's permissions changed since the run last went on: allow-commands added"
    assert f"{line} `touch *`" in result.stderr
    assert (stopped / "pwned").exists()  # accepted: the workflow allows it now
    run, _ = load_progress(stopped / PROGRESS)
    assert run.config.permissions.commands == ["echo hi", "touch *"]
    assert any(line in note for note in run.attempts[-1].notes)


def test_a_narrowed_allow_list_is_reported_and_goes_on(stopped: Path) -> None:
    _allow(stopped, None)
    result = _resume(stopped)
    assert result.returncode == EXIT_OK, result.stderr
    assert "allow-commands removed `echo hi`" in result.stderr
    assert not (stopped / "pwned").exists()  # refused: nothing allows it


def test_a_file_without_the_record_counts_as_having_allowed_nothing(stopped: Path) -> None:
    # A stranger's file (or one written before the record existed) cannot hide a change by
    # leaving the record out.
    from promptflow_resume.progress.model import AllowLists

    path = stopped / PROGRESS
    run, _ = load_progress(path)
    run.config.permissions = AllowLists()
    path.write_text(render(run), encoding="utf-8", newline="")
    _allow(stopped, ["*"])
    assert_clean_error(_resume(stopped), EXIT_INPUT, "allow-commands added `*`")
    assert not (stopped / "pwned").exists()


def test_a_record_in_the_file_allows_nothing(stopped: Path) -> None:
    from promptflow_resume.progress.model import AllowLists

    path = stopped / PROGRESS
    run, _ = load_progress(path)
    run.config.permissions = AllowLists(commands=["echo hi", "*"])
    path.write_text(render(run), encoding="utf-8", newline="")
    result = _resume(stopped)
    assert result.returncode == EXIT_OK, result.stderr
    assert "allow-commands removed `*`" in result.stderr
    assert not (stopped / "pwned").exists()


@pytest.mark.parametrize(("answer", "goes_on"), [("yes", True), ("no", False)])
def test_on_a_terminal_the_person_is_asked(stopped: Path, answer: Any, goes_on: bool) -> None:
    from promptflow_resume.api import Permissions, RunOptions, resume_run
    from promptflow_resume.base.errors import PermissionsNotConfirmedError

    _allow(stopped, ["*"])
    asked: list[str] = []

    def ask(question: str) -> Any:
        asked.append(question)
        return answer

    permissions = Permissions(ask=ask)
    if goes_on:
        outcome = resume_run(
            stopped / PROGRESS, RunOptions(workspace=stopped, permissions=permissions)
        )
        assert outcome.run.status in ("completed", "budget_exhausted")
    else:
        with pytest.raises(PermissionsNotConfirmedError):
            resume_run(stopped / PROGRESS, RunOptions(workspace=stopped, permissions=permissions))
    assert "allow-commands added `*`" in asked[0]


def test_the_record_round_trips() -> None:
    from promptflow_resume.progress.model import AllowLists, Cursor, Run, RunConfig, WorkflowRef

    lists = AllowLists(commands=["git log *", "a | b", "`x`", "*"], hosts=["*.example.org"])
    run = Run(
        run_id="r1",
        workflow=WorkflowRef(path="w.prompt.md", hash="sha256:v1:" + "0" * 64),
        status="paused",
        created="2026-11-25T00:00:00Z",
        updated="2026-11-25T00:00:00Z",
        config=RunConfig(provider="echo", permissions=lists),
        cursor=Cursor(step=None, index=0, total=0),
    )
    assert from_front_matter(to_front_matter(run)).config.permissions == lists
    assert "| allow-commands | `git log *`, `a \\| b`" in render(run)


# --- flow check ------------------------------------------------------------------------------


def test_flow_check_warns_about_catch_all_patterns(tmp_path: Path) -> None:
    (tmp_path / "w.prompt.md").write_text(
        "---\nallow-commands: ['pytest *', '*']\nallow-fetch: ['docs.python.org', '*.com']\n"
        "---\nDo it.\n"
    )
    result = flow("check", "w.prompt.md", "--json", cwd=tmp_path)
    assert result.returncode == EXIT_OK, result.stderr
    [plan] = json.loads(result.stdout)["workflows"]
    found = [
        (d["field"], d["line"])
        for d in plan["diagnostics"]
        if d.get("code") == "catch-all-permission"
    ]
    assert found == [("$.allow-commands[1]", 2), ("$.allow-fetch[1]", 3)]
