"""Consent for model-chosen commands and fetches: the rules, and the question on a real pty."""

from __future__ import annotations

import shutil
from pathlib import Path

import pexpect
import pytest

from promptflow_resume.progress import load_progress
from promptflow_resume.tools.consent import (
    Consent,
    command_matches,
    command_prefix,
    host_matches,
    parse_answer,
)
from tests import support
from tests.support.flowproc import FLOW, flow_env

COPILOT = support.FIXTURES / "copilot"


@pytest.mark.parametrize(
    ("command", "pattern", "allowed"),
    [
        ("pytest -q tests", "pytest *", True),
        ("pytest", "pytest", True),
        ("pytest -q; rm -rf ~", "pytest *", False),  # a second command is not a prefix match
        ("ls | wc -l", "ls *", False),
        ("ls | wc -l", "ls | wc -l", True),  # the exact command line
        ("echo $(cat secret)", "echo *", False),
        ("anything && more", "*", True),
        ("make test", "make lint", False),
    ],
)
def test_patterns(command: str, pattern: str, allowed: bool) -> None:
    assert command_matches(command, pattern) is allowed


@pytest.mark.parametrize(
    ("command", "prefix"),
    [("git status --short", "git status"), ("ls -la src", "ls"), ("make", "make")],
)
def test_prefix(command: str, prefix: str) -> None:
    assert command_prefix(command) == prefix


def test_hosts() -> None:
    assert host_matches("docs.python.org", "docs.python.org")
    assert host_matches("a.example.org", "*.example.org")
    assert not host_matches("example.org.evil.net", "*.example.org")
    assert not host_matches("evil.net", "docs.python.org")
    assert host_matches("anything", "*")


def test_without_a_terminal_only_the_lists_allow() -> None:
    consent = Consent(workflow_commands=("make test",))
    assert consent.command("make test").allowed
    refused = consent.command("make deploy")
    assert not refused.allowed and "no terminal" in refused.how
    assert not consent.fetch("example.org", "https://example.org/").allowed


def test_always_covers_the_prefix_in_this_process_only() -> None:
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        return "always"

    consent = Consent(ask=ask)  # type: ignore[arg-type]
    assert consent.command("git status").allowed
    assert consent.command("git status --short").allowed
    assert consent.command("git status; rm -rf ~").allowed is True  # asked again: not simple
    assert len(asked) == 2
    assert Consent().command("git status").allowed is False


@pytest.mark.parametrize(
    ("text", "answer"),
    [("y", "yes"), ("YES", "yes"), ("n", "no"), ("", "no"), ("a", "always"), ("x", None)],
)
def test_answers(text: str, answer: str | None) -> None:
    assert parse_answer(text) == answer


def _spawn(where: Path, script: str) -> pexpect.spawn:
    for name in ("run-command.prompt.md", script):
        shutil.copy(COPILOT / name, where / name)
    (where / "src").mkdir()
    (where / "src" / "a.py").write_text("")
    args = [*FLOW[1:], "run", "run-command.prompt.md", "--recording", script]
    args += ["--progress", "run/progress.md", "--new"]
    return pexpect.spawn(
        FLOW[0], args, cwd=str(where), env=flow_env(), encoding="utf-8", timeout=60
    )


def test_a_terminal_is_asked_per_command(tmp_path: Path) -> None:
    child = _spawn(tmp_path, "run-command.script.yaml")
    child.expect_exact("Run the command `ls src | wc -l`? [y]es / [n]o / [a]lways (this exact")
    child.sendline("n")
    child.expect_exact("Run the command `echo ran >> marker.txt`?")
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (tmp_path / "marker.txt").read_text() == "ran\n"
    run, _ = load_progress(tmp_path / "run" / "progress.md")
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert results[0].is_error and "refused on the terminal" in results[0].content
    assert not results[1].is_error


def test_always_asks_once_for_a_prefix(tmp_path: Path) -> None:
    child = _spawn(tmp_path, "always.script.yaml")
    child.expect_exact("Run the command `git status`? [y]es / [n]o / [a]lways `git status`")
    child.sendline("a")
    # `git status --short` runs without a question; `git log -1` is another prefix.
    child.expect_exact("Run the command `git log -1`?")
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    run, _ = load_progress(tmp_path / "run" / "progress.md")
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert "refused" not in results[0].content and "refused" not in results[1].content
    assert "refused on the terminal" in results[2].content
