"""Secrets planted everywhere a run touches never reach a file under the runs folder.

One run of ``fixtures/hostile/secrets.prompt.md`` meets a secret in an environment variable
(printed by a command, also on its stderr when it fails), a model reply, a tool call's
arguments, a tool output large enough for a sidecar, an input value, the base URL, a
transient provider error (attempt notes) and a permanent one (the last error); it is resumed
after that failure and recorded with ``--record``; ``flow list`` then indexes it. Every byte of
every file under the runs folder is scanned, case-insensitively (keywords are lower case), for
each secret and for its distinctive tail; the front matter must say how many values were
redacted and where.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_PROVIDER
from promptflow_resume.progress import load_progress
from tests.support.faults import HOSTILE, copy_fixtures, flow, flow_env

SECRETS = {
    "environment": "Vq9dEpL0yT0k3n-8x7c6v5b4n3m2",
    "reply": "sk-ant-api03-Hq7wE2rT9yU4iO1pA6sD3fG8hJ5kL0zX",
    "arguments": "AKIAQWERTYUIOPASDFGH",
    "sidecar": "ghp_Rk3sT9vWx2yZa4bC6dE8fG0hJ1kL3mN5pQ7r",
    "input": "glpat-Zx8cV7bN6mQ5wE4rT3yU",
    "retry": "xoxb-2048-Kj4hG7fD2sA9pL5m",
    "error": "sk-proj-Mn8bV5cX2zL7kJ4hG1fD9sA6qW3eR0tY",
    "url": "hunter2-Pa55w0rd-9f8e7d",
}


def _leaks(folder: Path) -> list[str]:
    """``file: secret`` for every planted secret (or its tail) found under ``folder``."""
    found = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes().lower()
        for where, secret in SECRETS.items():
            for needle in (secret, secret[-12:]):
                if needle.lower().encode() in data:
                    found.append(f"{path.relative_to(folder)}: {where} ({needle})")
                    break
    return found


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = copy_fixtures(
        tmp_path_factory.mktemp("secrets"),
        "secrets.prompt.md",
        "secrets.script.yaml",
        source=HOSTILE,
    )
    env = flow_env(DEPLOY_TOKEN=SECRETS["environment"])
    first = flow(
        "run",
        "secrets.prompt.md",
        "--recording",
        "secrets.script.yaml",
        "--input",
        f"note=rotate {SECRETS['input']} today",
        "--base-url",
        f"https://deploy:{SECRETS['url']}@gateway.example.com/v1",
        "--record",
        "--new",
        cwd=where,
        env=env,
    )
    assert first.returncode == EXIT_PROVIDER, first.stderr  # the scripted permanent failure
    assert "failed (auth)" in first.stderr
    (progress,) = (where / ".flow" / "runs").glob("*/progress.md")
    resumed = flow("resume", str(progress.relative_to(where)), cwd=where, env=env)
    assert resumed.returncode == 0, resumed.stderr
    listed = flow("list", "--all", "--json", cwd=where, env=env)
    assert listed.returncode == 0, listed.stderr
    return progress


def test_the_secrets_really_went_through_the_run(finished: Path) -> None:
    # Without this the scan below would pass vacuously.
    run, _ = load_progress(finished)
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert any(e.sidecar for e in results), "the long output must have gone to a sidecar"
    assert any("[REDACTED:DEPLOY_TOKEN]" in e.content for e in results)
    assert any(e.is_error and "failing with" in e.content for e in results)
    assert any("retry 1" in note for a in run.attempts for note in a.notes)
    assert any(a.status == "failed" for a in run.attempts)
    assert run.status == "completed"
    recording = finished.parent / "session.recording.jsonl"
    assert recording.is_file() and recording.stat().st_size > 0
    assert (finished.parent.parent / ".index.sqlite").is_file()


def test_no_secret_reaches_any_file_under_the_runs_folder(finished: Path) -> None:
    runs = finished.parent.parent
    assert _leaks(runs) == []


def test_the_front_matter_says_how_many_values_were_redacted_and_where(finished: Path) -> None:
    run, _ = load_progress(finished)
    where = " | ".join(run.redactions.where)
    for place in ("inputs", "config", "attempt notes", "last error", "sidecar", "assistant"):
        assert place in where, (place, where)
    assert "tool_result" in where or "tool result" in where
    assert "tool_call" in where or "tool call" in where
    # At least one per planted place; a secret seen in several entries counts each time.
    assert run.redactions.count >= len(SECRETS)
    text = finished.read_text(encoding="utf-8")
    assert f"count: {run.redactions.count}" in text


def test_a_failed_run_keeps_its_error_without_the_key(tmp_path: Path) -> None:
    where = copy_fixtures(tmp_path, "secrets.prompt.md", "secrets.script.yaml", source=HOSTILE)
    result = flow(
        "run",
        "secrets.prompt.md",
        "--recording",
        "secrets.script.yaml",
        "--input",
        "note=plain",
        "--progress",
        "run/progress.md",
        "--new",
        "--json",
        cwd=where,
        env=flow_env(DEPLOY_TOKEN=SECRETS["environment"]),
    )
    assert result.returncode == EXIT_PROVIDER
    summary = json.loads(result.stdout)
    assert "Incorrect API key provided: [REDACTED]" in summary["last_error"]
    assert _leaks(where / "run") == []
