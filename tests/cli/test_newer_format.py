"""A file from a later minor of the format, read and resumed by this flow (docs/spec.md 2.5).

``tests/fixtures/progress/formats/v8.1-next.md`` is the golden ``v8.0.md`` with what a later
minor may add (``make_next.py`` beside it): unknown keys at the top, in ``config``, a step, a
one-line usage record, an attempt and a snapshot record, unknown marker fields on two entries,
and ``flow_progress_minor: 1``. Every read command reads it with one notice; a resume keeps
every byte this flow did not change; a newer format number is refused, naming ``min_flow``.
"""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from promptflow_resume.base import notices
from promptflow_resume.ci import run_ci
from promptflow_resume.cli import main
from promptflow_resume.progress import ProgressStore, load_progress, render
from promptflow_resume.progress.model import Entry
from promptflow_resume.sharing import share
from tests import support
from tests.support.serve import Server

FORMATS = support.FIXTURES / "progress" / "formats"
NEXT = FORMATS / "v8.1-next.md"
OLDER = FORMATS / "v8.0.md"


def added_lines() -> list[str]:
    """The lines the later minor added to the 8.0 file (digest lines aside: those follow the
    transcript)."""
    older = OLDER.read_text(encoding="utf-8").splitlines()
    newer = NEXT.read_text(encoding="utf-8").splitlines()
    return [
        line[1:]
        for line in difflib.unified_diff(older, newer, n=0, lineterm="")
        if line.startswith("+") and not line.startswith("+++") and "digest: sha256:" not in line
    ]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A folder with the later minor's run (``out/progress.md``) and its workflow."""
    where = tmp_path / "ws"
    shutil.copytree(FORMATS / "workflows", where / "workflows")
    (where / "out").mkdir()
    shutil.copy(NEXT, where / "out" / "progress.md")
    shutil.copy(OLDER, where / "older.md")
    return where


def _notices(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("notice: ")]


def test_the_later_minor_reads_whole_and_writes_back_as_it_was() -> None:
    notices.forget()
    run, report = load_progress(NEXT)
    assert report.format == "8.1" and report.warnings == [] and report.edited_entries == []
    assert report.unknown == [
        "$.review",
        "$.config.trust",
        "$.steps.collect.effort",
        "$.steps.collect.usage.reasoning_tokens",
        "$.attempts[0].machine",
        "$.snapshots.calls[0].size",
        "entry 3: effort",
        "entry 5: cache, sandbox",
    ]
    told = notices.drain()
    assert len(told) == 1 and "written in progress format 8.1 by a newer flow" in told[0]
    assert run.kept is not None and run.kept.minor == 1
    entry: Entry = run.transcript[4]
    assert entry.meta is not None and entry.meta.extra == (("cache", "hit"), ("sandbox", "none"))
    # Written back, every byte is as the later flow wrote it.
    assert render(run) == NEXT.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "args",
    [
        ["show", "out/progress.md"],
        ["show", "--json", "out/progress.md"],
        ["show", "--summary", "out/progress.md"],
        ["status", "out/progress.md"],
        ["status", "--json", "out/progress.md"],
        ["validate", "out/progress.md"],
        ["validate", "--json", "out/progress.md"],
        ["diff", "older.md", "out/progress.md"],
        ["log", "out/progress.md"],
    ],
    ids=" ".join,
)
def test_each_read_command_reads_it_with_one_notice(
    args: list[str],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(workspace)
    before = (workspace / "out" / "progress.md").read_bytes()
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.out.strip()
    told = _notices(captured.err)
    assert len(told) == 1, captured.err
    assert "out/progress.md: written in progress format 8.1 by a newer flow" in told[0]
    if "--json" in args:
        json.loads(captured.out)
    assert (workspace / "out" / "progress.md").read_bytes() == before


def test_validate_strict_names_each_addition(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(workspace)
    assert main(["validate", "--strict", "out/progress.md"]) == 4
    err = capsys.readouterr().err
    assert _notices(err) == []  # the error says it all
    for field in ("$.flow_progress_minor", "$.config.trust", "$.review", "$.attempts[0].machine"):
        assert f": {field}: " in err, field
    assert "entry 5's flow:entry line has fields this flow does not know: cache, sandbox" in err


def test_a_resume_keeps_every_byte_it_did_not_change(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(workspace)
    path = workspace / "out" / "progress.md"
    before = path.read_text(encoding="utf-8")
    code = main(["resume", "out/progress.md", "--max-turns", "12", "--no-snapshots"])
    assert code == 0, capsys.readouterr().err
    assert len(_notices(capsys.readouterr().err)) == 1
    after = path.read_text(encoding="utf-8")
    run, report = load_progress(path)
    assert run.status == "completed" and report.format == "8.1"
    # Each line the later minor added is where it was; the conversation so far is unchanged.
    lines = after.splitlines()
    for line in added_lines():
        assert line in lines, line
    old = before.index("<!-- flow:entry 1 ")
    end = before.index("\n<!-- flow:entry 10 ")
    assert before[old:end] in after
    # The attempt this flow added has none of the later minor's keys; the first keeps its.
    attempts = yaml.safe_load(after.split("---\n")[1])["attempts"]
    assert [a.get("machine") for a in attempts] == ["ci-runner", None]


def test_a_crash_journal_over_a_later_minor_keeps_its_additions(workspace: Path) -> None:
    path = workspace / "out" / "progress.md"
    store, run, _ = ProgressStore.open(path)
    try:
        run.reason = "stopped again"
        store.save(run)  # an event in the journal, never folded: a crash
    finally:
        store.close()
    again, report = load_progress(path)
    assert report.replayed_events == 1 and again.reason == "stopped again"
    assert again.kept == run.kept and report.format == "8.1"
    text = render(again)
    for line in added_lines():
        assert line in text.splitlines(), line


def test_flow_ci_resumes_it_and_keeps_the_additions(workspace: Path, tmp_path: Path) -> None:
    outputs = tmp_path / "outputs.txt"
    summary = tmp_path / "summary.md"
    env = {
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_STEP_SUMMARY": str(summary),
        # flow's own folder is never inside the workspace a job checked out.
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "INPUT_PROGRESS": "out/progress.md",
        "INPUT_SHARE": "no",
        "FLOW_HOME": str(tmp_path / "home"),
    }
    notices.forget()
    result = run_ci(env, set_env=lambda k, v: None, log=lambda text: None)
    written = outputs.read_text(encoding="utf-8")
    # Resumed, and held by its turn budget again (a waiting status: the job stays green).
    assert "run-id=20261128-105943-triage-todos-adf1" in written
    assert "status=budget_exhausted" in written and result.exit_code == 1
    assert len(notices.drain()) == 1
    lines = (workspace / "out" / "progress.md").read_text(encoding="utf-8").splitlines()
    for line in added_lines():
        assert line in lines, line
    assert load_progress(workspace / "out" / "progress.md")[0].attempts[-1].n == 2


def test_the_dashboard_serves_it_with_one_notice(workspace: Path) -> None:
    runs = workspace / ".flow" / "runs" / "next"
    runs.mkdir(parents=True)
    shutil.copy(NEXT, runs / "progress.md")
    with Server(workspace) as server:
        status, _, body = server.get("/")
        assert status == 200 and "triage-todos" in body
        for _ in range(2):
            status, _, body = server.get("/run/0/.flow/runs/next/progress.md")
            assert status == 200 and "20261128-105943-triage-todos-adf1" in body
    assert server.process is not None and server.process.stderr is not None
    told = _notices(server.process.stderr.read())
    assert len(told) == 1 and "progress format 8.1" in told[0]


def test_a_newer_min_flow_is_read_but_not_resumed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(workspace)
    path = workspace / "out" / "progress.md"
    path.write_text(
        path.read_text(encoding="utf-8").replace("min_flow: 0.2.0\n", "min_flow: 9.0.0\n", 1),
        encoding="utf-8",
    )
    before = path.read_bytes()
    assert main(["status", "out/progress.md"]) == 0
    capsys.readouterr()
    assert main(["resume", "out/progress.md", "--max-turns", "12", "--no-snapshots"]) == 4
    err = capsys.readouterr().err
    assert "can be resumed by flow 9.0.0 or later (its min_flow)" in err
    assert path.read_bytes() == before


@pytest.mark.parametrize("command", ["status", "show", "log", "resume"])
def test_a_newer_format_number_is_refused_naming_the_flow_it_needs(
    command: str,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(workspace)
    path = workspace / "out" / "progress.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("flow_progress: 8\n", "flow_progress: 9\n", 1).replace(
            "min_flow: 0.2.0\n", "min_flow: 0.5.0\n", 1
        ),
        encoding="utf-8",
    )
    before = path.read_bytes()
    assert main([command, "out/progress.md"]) == 4
    err = capsys.readouterr().err
    assert "out/progress.md:2:1: $.flow_progress: this progress file is in format 9" in err
    assert "it needs flow 0.5.0 or later (its min_flow)" in err
    assert "pip install 'promptflow-resume>=0.5.0'" in err
    assert path.read_bytes() == before


def test_a_shared_copy_keeps_the_additions_with_their_secrets_redacted(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-Value-0451"
    path = workspace / "out" / "progress.md"
    text = path.read_text(encoding="utf-8").replace("  by: alice\n", f"  by: {secret}\n", 1)
    path.write_text(text.replace("by: alice}", f"by: 'x {secret}'}}", 1), encoding="utf-8")
    monkeypatch.setenv("RELEASE_TOKEN", secret)
    result = share(path, workspace / "shared" / "run.md")
    copy = result.output.read_text(encoding="utf-8")
    assert secret not in copy
    assert "review:\n  by: '[REDACTED:RELEASE_TOKEN]'\n" in copy
    assert "  trust: {commands: ['grep *'], by: 'x [REDACTED:RELEASE_TOKEN]'}\n" in copy
    assert load_progress(result.output)[1].format == "8.1"
