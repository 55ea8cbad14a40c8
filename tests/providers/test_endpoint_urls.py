"""A base URL that names no endpoint is refused before any request (exit 10, no run made):
``http://127.0.0.1:/v1`` (an empty port) once cost five connection attempts and 24 s of
back-off before the run failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_PROVIDER, ProviderSetupError
from promptflow_resume.providers.anthropic import resolve_credentials
from promptflow_resume.providers.endpoints import url_problem
from promptflow_resume.providers.openaiendpoint import resolve_endpoint
from promptflow_resume.providers.provider import ProviderSettings
from tests.support.flowproc import flow, flow_env


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:/v1", "port is empty"),
        ("http://[::1]:/v1", "port is empty"),
        ("http://127.0.0.1:0/v1", "not a number from 1 to 65535"),
        ("http://127.0.0.1:99999/v1", "not a number from 1 to 65535"),
        ("http://127.0.0.1:ab/v1", "not a number from 1 to 65535"),
        ("http://:8080/v1", "names no host"),
        ("localhost:8080/v1", "does not start with http"),
        ("ftp://example.org/v1", "does not start with http"),
    ],
)
def test_urls_that_name_no_endpoint(url: str, problem: str) -> None:
    assert problem in (url_problem(url) or "")
    with pytest.raises(ProviderSetupError, match="cannot be used"):
        resolve_endpoint(ProviderSettings(name="openai", base_url=url), {})
    with pytest.raises(ProviderSetupError, match="cannot be used"):
        resolve_credentials(
            ProviderSettings(name="anthropic", base_url=url), {"ANTHROPIC_API_KEY": "k"}
        )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "https://api.openai.com/v1",
        "http://[::1]:11434/v1",
        "http://u:p@h:1/",
    ],
)
def test_urls_of_endpoints_pass(url: str) -> None:
    assert url_problem(url) is None


def test_an_empty_port_stops_flow_run_before_a_run_exists(tmp_path: Path) -> None:
    (tmp_path / "hi.prompt.md").write_text(
        "---\nprovider: openai\nmodel: gpt-4o\n---\nSay hi.\n", encoding="utf-8"
    )
    done = flow(
        "run",
        "hi.prompt.md",
        "--base-url",
        "http://127.0.0.1:/v1",
        "--progress",
        "run/progress.md",
        "--new",
        cwd=tmp_path,
        env=flow_env(OPENAI_API_KEY="k"),
    )
    assert done.returncode == EXIT_PROVIDER, done.stderr
    assert "'http://127.0.0.1:/v1' cannot be used: its port is empty" in done.stderr
    assert "retry" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()
