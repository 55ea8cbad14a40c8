"""A progress file from someone else names the endpoint, or the parameters, of its requests
(docs/spec.md 10.2).

The file's ``config.base_url`` points at a second local server standing in for a stranger's
("evil"); it must receive no request and no key, whichever way the provider is chosen:
``flow resume --provider``, ``--decide``, ``recovery: model`` in the workflow, or ``flow run``
finding the run and resuming it. The endpoint the person names (``--base-url``) is used.
The run is a real one (the scripted provider failing its step), then edited as a stranger
would; every ``flow`` is a real subprocess.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.base.errors import EXIT_INPUT, EXIT_INVALID_FILE, EXIT_OK
from promptflow_resume.progress import load_progress, render
from promptflow_resume.progress.seal import Key, mark_written_here
from tests.support.faults import assert_clean_error, flow, flow_env, snapshot
from tests.support.providers_server import Canned, ModelServer, anthropic_message, openai_completion

KEY = "sk-test-Hostile0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-Hostile0123456789abcdef"

WORKFLOW = """\
---
description: Say hello
provider: scripted
model: gpt-4o-mini
params: {n: 2}
retry: {max_attempts: 1}
---
Say hello.
"""
SCRIPT = """\
replies: ["hello"]
failures:
  0: {transient: false, reason: auth, message: "bad key", times: always}
"""


def _env(**extra: str) -> dict[str, str]:
    env = flow_env(OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=ANTHROPIC_KEY, **extra)
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "AZURE_OPENAI_ENDPOINT"):
        if name not in extra:
            env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the workflow and a real run of it that failed in its only step."""
    where = tmp_path_factory.mktemp("failed")
    (where / "hello.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (where / "hello.script.yaml").write_text(SCRIPT, encoding="utf-8")
    result = flow("run", "hello.prompt.md", "--recording", "hello.script.yaml", cwd=where)
    assert result.returncode == 10, result.stderr
    return where


@pytest.fixture
def evil() -> Iterator[ModelServer]:
    """The stranger's server: answers anything, and must never be asked."""
    with ModelServer() as server:
        server.responder = lambda request: Canned(body=openai_completion("stolen"))
        yield server


@pytest.fixture
def good() -> Iterator[ModelServer]:
    """The server the person names themselves."""
    with ModelServer() as server:
        yield server


def _plant(failed: Path, where: Path, *, sealed: bool = False, **config: Any) -> Path:
    """Copy the failed run into ``where`` with ``config`` written into its front matter
    (``sealed``: as if flow on this machine wrote it, and the edit came later)."""
    source = next(failed.glob(".flow/runs/*/progress.md"))
    run, _ = load_progress(source)
    for key, value in config.items():
        setattr(run.config, key, value)
    run.seal = None
    if sealed:
        mark_written_here(run, Key.ensure())
    target = where / source.relative_to(failed)
    target.parent.mkdir(parents=True)
    target.write_text(render(run), encoding="utf-8", newline="")
    for name in ("hello.prompt.md", "hello.script.yaml"):
        (where / name).write_bytes((failed / name).read_bytes())
    return target


def _header(request: Any, name: str) -> str | None:
    return {k.lower(): v for k, v in request.headers.items()}.get(name)


def _refused(result: Any, evil: ModelServer, where: Path, before: dict[str, bytes]) -> None:
    assert_clean_error(result, EXIT_INPUT, "$.config.base_url", "--base-url", evil.url)
    assert evil.requests == []
    assert snapshot(where) == before


@pytest.mark.parametrize(
    ("args", "recovery"),
    [
        (["--provider", "openai"], False),
        (["--provider", "openai", "--decide"], False),
        (["--provider", "openai"], True),
        (["--provider", "anthropic", "--decide"], False),
    ],
    ids=["provider", "decide", "recovery-model", "anthropic-decide"],
)
def test_the_server_a_file_names_gets_no_request_and_no_key(
    failed: Path, tmp_path: Path, evil: ModelServer, args: list[str], recovery: bool
) -> None:
    # replay sends nothing, so the file's endpoint looked harmless until --provider changed it.
    progress = _plant(failed, tmp_path, provider="replay", base_url=evil.url + "/v1")
    if recovery:
        text = (tmp_path / "hello.prompt.md").read_text(encoding="utf-8")
        (tmp_path / "hello.prompt.md").write_text(
            text.replace("retry:", "recovery: model\nretry:"), encoding="utf-8"
        )
    before = snapshot(tmp_path)
    result = flow("resume", str(progress), *args, cwd=tmp_path, env=_env())
    _refused(result, evil, tmp_path, before)


def test_flow_run_finding_the_run_does_not_resume_it_towards_the_file_s_server(
    failed: Path, tmp_path: Path, evil: ModelServer
) -> None:
    # The person's own run (sealed here), its endpoint changed in a pull request: the run's
    # seal covers its endpoint, so flow run no longer takes it for its own and starts afresh.
    official = "https://api.openai.com/v1"
    progress = _plant(failed, tmp_path, sealed=True, provider="openai", base_url=official)
    text = progress.read_text(encoding="utf-8")
    progress.write_text(text.replace(official, evil.url + "/v1"), encoding="utf-8")
    before = progress.read_bytes()
    result = flow("run", "hello.prompt.md", "--provider", "openai", cwd=tmp_path, env=_env())
    assert "was not written by flow on this machine" in result.stderr
    assert evil.requests == []
    assert progress.read_bytes() == before


def test_flow_run_does_not_resume_an_identical_run_written_elsewhere(
    failed: Path, tmp_path: Path, evil: ModelServer
) -> None:
    planted = _plant(failed, tmp_path, provider="openai", base_url=evil.url + "/v1")
    before = planted.read_bytes()
    result = flow("run", "hello.prompt.md", "--provider", "openai", cwd=tmp_path, env=_env())
    assert "was not written by flow on this machine" in result.stderr
    assert evil.requests == []
    assert planted.read_bytes() == before


def test_a_variable_naming_another_server_does_not_confirm_the_file_s(
    failed: Path, tmp_path: Path, evil: ModelServer, good: ModelServer
) -> None:
    progress = _plant(failed, tmp_path, provider="openai", base_url=evil.url + "/v1")
    before = snapshot(tmp_path)
    env = _env(OPENAI_BASE_URL=good.url + "/v1")
    _refused(flow("resume", str(progress), cwd=tmp_path, env=env), evil, tmp_path, before)
    assert good.requests == []


def test_the_server_the_person_names_is_used_and_the_file_s_is_not(
    failed: Path, tmp_path: Path, evil: ModelServer, good: ModelServer
) -> None:
    progress = _plant(failed, tmp_path, provider="replay", base_url=evil.url + "/v1")
    good.push(Canned(body=anthropic_message("hello")))
    result = flow(
        "resume",
        str(progress),
        "--provider",
        "anthropic",
        "--base-url",
        good.url,
        cwd=tmp_path,
        env=_env(),
    )
    assert result.returncode == EXIT_OK, result.stderr
    assert evil.requests == []
    assert len(good.requests) == 1
    assert any(ANTHROPIC_KEY in value for value in good.requests[0].headers.values())


def test_a_server_the_person_set_in_the_environment_is_used(
    failed: Path, tmp_path: Path, good: ModelServer
) -> None:
    progress = _plant(failed, tmp_path, provider="openai", base_url=good.url + "/v1/")
    good.push(Canned(body=openai_completion("hello")))
    env = _env(OPENAI_BASE_URL=good.url + "/v1")
    result = flow("resume", str(progress), cwd=tmp_path, env=env)
    assert result.returncode == EXIT_OK, result.stderr
    assert [_header(r, "authorization") for r in good.requests] == [f"Bearer {KEY}"]


@pytest.mark.parametrize(
    ("provider", "url", "ok"),
    [
        ("openai", "https://api.openai.com/v1", True),
        ("openai", "https://models.github.ai/inference", True),
        ("openai", "https://models.inference.ai.azure.com", True),
        ("openai", "https://my-resource.openai.azure.com/", True),
        ("openai", "https://my-resource.openai.azure.com:443/", True),
        ("openai", "github", True),
        ("openai", "http://my-resource.openai.azure.com/", False),
        ("openai", "https://my-resource.openai.azure.com:8443/", False),
        ("openai", "http://api.openai.com/v1", False),
        ("openai", "https://api.openai.com.evil.test/v1", False),
        ("openai", "https://api.openai.com@evil.test/v1", False),
        ("openai", "http://localhost:8000/v1", False),
        ("openai", "https://api.anthropic.com", False),
        ("anthropic", "https://api.anthropic.com", True),
        ("anthropic", "https://api.openai.com/v1", False),
        ("anthropic", "ollama", False),
        ("replay", "http://evil.test/v1", True),
    ],
)
def test_which_recorded_endpoints_may_receive_a_key(provider: str, url: str, ok: bool) -> None:
    from promptflow_resume.providers.endpoints import trusted

    assert trusted(provider, url, given=None, env={}) is ok


# --- parameters ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"temperature": 0.2, "n": 100}, "n"),
        ({"extra_headers": {"X-Leak": "1"}}, "extra_headers"),
        ({"base_url": "http://evil.test/v1"}, "base_url"),
        ({"max_tokens": 10_000_000}, "max_tokens"),
        ({"temperature": 9}, "temperature"),
    ],
    ids=["n", "headers", "base-url", "huge-max-tokens", "temperature-out-of-range"],
)
def test_parameters_from_the_file_that_flow_does_not_send_are_refused(
    failed: Path, tmp_path: Path, good: ModelServer, params: dict[str, Any], field: str
) -> None:
    progress = _plant(failed, tmp_path, provider="openai", params=params)
    before = snapshot(tmp_path)
    result = flow("resume", str(progress), "--base-url", good.url + "/v1", cwd=tmp_path, env=_env())
    last = assert_clean_error(result, EXIT_INVALID_FILE, f"$.config.params.{field}", "params:")
    assert f"{progress}:" in last  # the file, with the line of the parameter
    assert good.requests == []
    assert snapshot(tmp_path) == before


def test_sampling_parameters_and_those_the_workflow_gives_are_sent(
    failed: Path, tmp_path: Path, good: ModelServer
) -> None:
    params = {"temperature": 0.3, "max_tokens": 50, "stop": ["END"], "n": 2}
    progress = _plant(failed, tmp_path, provider="openai", params=params)
    # n is no sampling parameter, but the workflow gives n: 2 itself: sent as written.
    good.push(Canned(body=openai_completion("hello")))
    result = flow("resume", str(progress), "--base-url", good.url + "/v1", cwd=tmp_path, env=_env())
    assert result.returncode == EXIT_OK, result.stderr
    body = good.requests[0].body
    assert {k: body[k] for k in params} == params


def test_a_batch_file_s_endpoint_gets_no_request_for_rows_not_started(
    tmp_path: Path, evil: ModelServer
) -> None:
    from promptflow_resume.batch.checkpoint import load_batch, save_batch

    (tmp_path / "hello.prompt.md").write_text(
        "---\nprovider: echo\nmodel: gpt-4o-mini\ninputs: {who: {type: string}}\n---\n"
        "Say hello to ${input:who}.\n",
        encoding="utf-8",
    )
    (tmp_path / "rows.csv").write_text("who\nAda\nBob\n", encoding="utf-8")
    started = flow("batch", "hello.prompt.md", "--data", "rows.csv", "--out", "out", cwd=tmp_path)
    assert started.returncode == EXIT_OK, started.stderr
    # As a stranger would hand it over: the second row not started, an endpoint of its own.
    path = tmp_path / "out" / "batch.md"
    batch = load_batch(path)
    batch.provider, batch.base_url = "openai", evil.url + "/v1"
    batch.rows[1].status = "pending"
    save_batch(path, batch)
    for leftover in sorted((tmp_path / "out" / "rows").glob("*2/**/*"), reverse=True):
        leftover.unlink() if leftover.is_file() else leftover.rmdir()
    (tmp_path / "out" / "rows" / "0002").rmdir()
    before = snapshot(tmp_path)
    result = flow("resume", "out/batch.md", cwd=tmp_path, env=_env())
    assert_clean_error(result, EXIT_INPUT, "$.config.base_url", "--base-url", evil.url)
    assert evil.requests == []
    assert snapshot(tmp_path) == before


def test_an_endpoint_this_machine_recorded_needs_no_confirming(
    failed: Path, tmp_path: Path, good: ModelServer
) -> None:
    """The person's own run on a local server resumes as it was; the same file with its
    endpoint changed afterwards (a pull request, a hand edit) does not."""
    progress = _plant(failed, tmp_path, sealed=True, provider="openai", base_url=good.url + "/v1")
    good.push(Canned(body=openai_completion("hello")))
    result = flow("resume", str(progress), cwd=tmp_path, env=_env())
    assert result.returncode == EXIT_OK, result.stderr
    assert len(good.requests) == 1

    moved = _plant(failed, tmp_path / "moved", sealed=True, provider="openai", base_url=good.url)
    text = moved.read_text(encoding="utf-8")
    moved.write_text(text.replace(good.url, good.url + "/v1"), encoding="utf-8")
    before = snapshot(tmp_path / "moved")
    refused = flow("resume", str(moved), cwd=tmp_path / "moved", env=_env())
    assert_clean_error(refused, EXIT_INPUT, "$.config.base_url", "--base-url")
    assert snapshot(tmp_path / "moved") == before
    assert len(good.requests) == 1
