"""What a new user meets in the first hour: setup errors, run ids, output folders, the
wrong file given to a command, and every problem of a broken file listed."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import typer
import typer.core
import typer.main

from promptflow_resume.base.errors import EXIT_INVALID_FILE, EXIT_PROVIDER
from promptflow_resume.cli import main, register_commands
from promptflow_resume.cli.app import app
from promptflow_resume.progress import load_progress
from tests.support import flowproc

HELLO = (
    "---\nname: hello\ninputs:\n  topic: {default: bees}\n---\n"
    "# Greet\nSay hello about ${input:topic}.\n"
)


def flow(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def hello(workdir: Path) -> Path:
    path = workdir / "hello.prompt.md"
    path.write_text(HELLO, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--provider", "openai"], "no model named for the openai provider"),
        (["--provider", "anthropic"], "no model named for the anthropic provider"),
        (["--provider", "nope"], "unknown provider 'nope'"),
        (["--provider", "openai", "--model", "gpt-4o-mini"], "OPENAI_API_KEY is not set"),
    ],
)
def test_a_provider_setup_error_exits_10_before_any_run_exists(
    hello: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    words: str,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    if "--model" not in args:
        monkeypatch.setenv("OPENAI_API_KEY", "k")
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, _, err = flow(capsys, "run", str(hello), "--new", *args)
    assert code == EXIT_PROVIDER, err
    assert err.startswith("error: ") and words in err and "Traceback" not in err
    assert not (hello.parent / ".flow").exists()  # no failed run left behind


def test_runs_written_outside_flow_runs_get_unique_ids(
    hello: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for where in ("a/out/progress.md", "b/out/progress.md"):
        code, _, err = flow(capsys, "run", str(hello), "--provider", "echo", "--progress", where)
        assert code == 0, err
    ids = {load_progress(f"{x}/out/progress.md")[0].run_id for x in "ab"}
    assert len(ids) == 2 and "out" not in ids
    assert all(i.endswith(tuple("0123456789abcdef")) and "-hello-" in i for i in ids)
    code, out, _ = flow(capsys, "list", "-a", "a", "b", "--json")
    assert code == 0 and {r["run_id"] for r in json.loads(out)} == ids


def test_share_and_fork_create_a_missing_output_folder(
    hello: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow(capsys, "run", str(hello), "--provider", "echo", "--progress", "run/progress.md")
    run_id = load_progress("run/progress.md")[0].run_id
    code, _, err = flow(capsys, "share", "run/progress.md", "-o", "docs/runs/")
    assert code == 0, err
    assert (hello.parent / "docs" / "runs" / f"{run_id}.md").is_file()
    code, _, err = flow(capsys, "fork", "run/progress.md", "--at", "1", "-o", "forks")
    assert code == 0, err
    assert load_progress("forks/progress.md")[0].parent["run_id"] == run_id  # type: ignore[index]


def test_a_progress_file_given_to_run_or_check_points_to_resume(
    hello: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow(capsys, "run", str(hello), "--provider", "echo", "--progress", "run/progress.md")
    before = Path("run/progress.md").read_bytes()
    for command in ("run", "check"):
        code, out, err = flow(capsys, command, "run/progress.md")
        assert code == EXIT_INVALID_FILE
        text = out + err
        assert "this is the progress file of a run" in text
        assert "flow resume run/progress.md" in text
        assert "its workflow (../hello.prompt.md, relative to this file)" in text
        assert "must be a mapping" not in text
    assert Path("run/progress.md").read_bytes() == before


def test_validate_lists_every_schema_problem(
    hello: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow(capsys, "run", str(hello), "--provider", "echo", "--progress", "run/progress.md")
    path = Path("run/progress.md")
    text = path.read_text(encoding="utf-8")
    broken = (
        text.replace("\nstatus: completed\n", "\nstatus: bogus\n", 1)
        .replace("\nrun_id: ", "\nrun_id: 7\nx_run_id: ", 1)
        .replace("\n  name: hello\n", "\n  name: 5\n", 1)
    )
    path.write_text(broken, encoding="utf-8")
    # The unknown key is a newer flow's to readers (kept); --strict lists it with the rest.
    code, out, err = flow(capsys, "validate", "--strict", str(path))
    assert code == EXIT_INVALID_FILE and out == ""
    lines = err.splitlines()
    assert lines[0].startswith(f"error: {path}: ") and "problems in the front matter" in lines[0]
    listed = [line for line in lines if line.startswith("  - ")]
    assert len(listed) == 4  # run_id, the unknown key, status, workflow.name
    for field in ("$.run_id", "$.x_run_id", "$.status", "$.workflow.name"):
        assert sum(field + ":" in line for line in listed) == 1, field
    code, out, err = flow(capsys, "validate", str(path))
    assert code == EXIT_INVALID_FILE and "$.x_run_id" not in err
    assert len([line for line in err.splitlines() if line.startswith("  - ")]) == 3
    code, out, _ = flow(capsys, "validate", "--strict", "--json", str(path))
    problems = json.loads(out)[0]["error"]["problems"]
    assert len(problems) == len(listed)
    assert {"$.run_id", "$.status", "$.workflow.name"} <= {p["field"] for p in problems}
    assert path.read_text(encoding="utf-8") == broken


def test_without_a_terminal_each_step_start_and_end_reaches_stderr(workdir: Path) -> None:
    (workdir / "two.prompt.md").write_text(
        "---\nname: two\n---\n## Step 1: First\nSay one.\n\n## Step 2: Second\nSay two.\n",
        encoding="utf-8",
    )
    result = flowproc.flow("run", "two.prompt.md", "--provider", "echo", cwd=workdir)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("flow: step")]
    assert lines[0] == "flow: step 1/2 First: started"
    assert lines[1].startswith("flow: step 1/2 First: completed in ")
    assert lines[2] == "flow: step 2/2 Second: started"
    assert lines[3].startswith("flow: step 2/2 Second: completed in ")
    assert len(lines) == 4 and "\x1b" not in result.stderr  # no spinner, no colour codes


def test_a_refused_connection_shows_each_retry_and_the_cause_at_the_end(workdir: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (workdir / "w.prompt.md").write_text(
        "---\nname: w\nretry: {max_attempts: 3, initial_delay: 0.05, jitter: 0}\n---\nHi.\n",
        encoding="utf-8",
    )
    env = flowproc.flow_env(OPENAI_API_KEY="k", OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1")
    result = flowproc.flow(
        "run", "w.prompt.md", "--provider", "openai", "--model", "m", cwd=workdir, env=env
    )
    assert result.returncode == EXIT_PROVIDER
    lines = result.stderr.splitlines()
    retries = [line for line in lines if line.startswith("flow: provider error, retry")]
    assert len(retries) == 2 and all("Connection refused" in line for line in retries)
    assert retries[0].startswith("flow: provider error, retry 1 in 0.1s: ")
    failed = next(i for i, line in enumerate(lines) if line.startswith("failed ("))
    assert lines[failed + 1].startswith("Cause: ") and "Connection refused" in lines[failed + 1]
    assert lines[-1].startswith("Resume with: flow resume ")


def test_every_placeholder_in_help_is_an_upper_case_name() -> None:
    register_commands()
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    loose = [
        f"flow {name} {param.name}: {param.metavar!r}"
        for name, command in group.commands.items()
        for param in command.params
        if not getattr(param, "is_flag", False)
        and param.name != "help"
        and not (param.metavar and param.metavar.replace("=", "").isupper())
    ]
    assert loose == []


@pytest.mark.parametrize("command", ["run", "detect"])
def test_inputs_file_help_is_the_same_everywhere(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = flow(capsys, command, "--help")
    assert code == 0
    assert "--inputs FILE" in out and "A YAML or JSON file of input values." in out
    assert "<list[str]>" not in out and "{workflow}" not in out


def test_base_url_help_names_the_presets(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "resume"):
        _, out, _ = flow(capsys, command, "--help")
        assert "--base-url URL" in out
        words = " ".join(out.split())
        assert "a preset (openai, github, ollama, azure)" in words


def test_status_speaks_in_counted_nouns_and_draws_the_bar_as_list_does(
    hello: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow(capsys, "run", str(hello), "--provider", "echo", "--progress", "run/progress.md")
    code, out, _ = flow(capsys, "status", "run/progress.md")
    assert code == 0
    usage = next(line for line in out.splitlines() if line.startswith("usage"))
    # The echo model has no price: tokens only (docs/spec.md 5.4).
    assert usage.endswith(", 1 turn, 1 attempt")
    progress = next(line for line in out.splitlines() if line.startswith("progress"))
    bar = progress.split()[1]
    assert set(bar[1:-1]) <= {"█", "░"} or set(bar[1:-1]) <= {"#", "-"}
    _, listed, _ = flow(capsys, "list", "-a", "run")
    assert bar[1] in listed  # the same glyphs in both commands


def test_detect_keeps_the_matched_column_short(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "two.prompt.md").write_text(
        "---\nname: two\ninputs:\n  topic: {}\n---\n## Step 1: First\nWrite about "
        "${input:topic}.\n\n## Step 2: Second\nSay two.\n",
        encoding="utf-8",
    )
    topic = " ".join(f"keyword{i:02d}long" for i in range(60))
    args = ("two.prompt.md", "-i", f"topic={topic}")
    code, _, _ = flow(capsys, "run", *args, "--provider", "echo", "--max-turns", "1", "--new")
    assert code == 1  # the turn budget stops it after step 1: an unfinished run to find
    code, out, _ = flow(capsys, "detect", *args)
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("1 "))
    assert "more" in row and len(row) < 250
    code, out, _ = flow(capsys, "detect", *args, "--json")
    assert len(json.loads(out)["candidates"][0]["matched"]) > 60  # --json keeps them all
