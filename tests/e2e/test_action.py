"""The repository's GitHub Action, run as the runner runs it (spec 11.3).

``action.yml`` is parsed, each ``run:`` step's script gets ``${{ ... }}`` substituted the way
the runner does and runs in ``bash -eo pipefail`` with the runner's environment: a
``GITHUB_WORKSPACE`` that is a clone of a repository whose pull request branch is pushed to a
bare ``origin``, a ``GITHUB_OUTPUT`` and ``GITHUB_STEP_SUMMARY`` file, ``RUNNER_TEMP``. The
model is the local OpenAI-protocol server. The first job (a ``pull_request`` event) stops
``awaiting_approval`` and commits the progress file to the branch; the second (a fresh clone,
an ``issue_comment`` event with ``/flow approve``) resumes that file and completes it.

What differs from a runner, and why: the install step's ``pip install`` gets ``PIP_NO_DEPS``
(the package's dependencies are not downloaded here) and the new virtual environment is then
given this environment's installed packages through a ``.pth`` file; the package itself is
built (setuptools and wheel from the configured package index) and installed from the
checkout, as on a runner. ``uses:`` steps (the
artifact upload) are not run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import REPO
from tests.support.flowproc import flow
from tests.support.github import (
    SEAL_KEY,
    STAMP_WORKFLOW,
    comment_event,
    pull_request,
    rest_api,
)
from tests.support.providers_server import (
    Canned,
    ModelServer,
    Received,
    openai_completion,
    openai_tool_call,
    openai_usage,
)

pytestmark = pytest.mark.e2e

ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))

WORKFLOW = STAMP_WORKFLOW
KEY = SEAL_KEY


def _git(*args: str, cwd: Path) -> str:
    identity = ["-c", "user.name=dev", "-c", "user.email=dev@example.com"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=cwd, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    calls = iter(
        [
            Canned(body=openai_completion("", [openai_tool_call("call_1", "stamp", "{}")])),
            Canned(body=openai_completion("Stamped; done.", usage=openai_usage(30, 6))),
        ]
    )

    def respond(received: Received) -> Canned:
        return next(calls)

    with ModelServer() as srv:
        srv.responder = respond
        yield srv


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bare repository with ``main`` and the pull request's branch ``feature``."""
    root = tmp_path_factory.mktemp("action")
    bare = root / "origin.git"
    _git("init", "-q", "--bare", "-b", "main", str(bare), cwd=root)
    seed = root / "seed"
    _git("clone", "-q", str(bare), str(seed), cwd=root)
    (seed / ".github" / "prompts").mkdir(parents=True)
    (seed / ".github" / "prompts" / "stamp.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    _git("checkout", "-q", "-b", "main", cwd=seed)
    _git("add", ".", cwd=seed)
    _git("commit", "-qm", "workflow", cwd=seed)
    _git("push", "-q", "origin", "main", cwd=seed)
    _git("checkout", "-q", "-b", "feature", cwd=seed)
    (seed / "change.txt").write_text("a change\n", encoding="utf-8")
    _git("add", ".", cwd=seed)
    _git("commit", "-qm", "the change", cwd=seed)
    _git("push", "-q", "origin", "feature", cwd=seed)
    return bare


def _substitute(text: str, inputs: dict[str, str], action_path: Path) -> str:
    """``${{ inputs.x }}`` and ``${{ github.action_path }}`` as the runner fills them in."""

    def value(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        if expression.startswith("inputs."):
            return inputs[expression.removeprefix("inputs.")]
        if expression == "github.action_path":
            return str(action_path)
        if expression == "github.token":
            return ""  # no GitHub here: the local origin needs no token
        raise AssertionError(f"the test does not know ${{{{ {expression} }}}}")

    return re.sub(r"\$\{\{(.*?)\}\}", value, text)


def _inputs(given: dict[str, str]) -> dict[str, str]:
    declared: dict[str, Any] = ACTION["inputs"]
    unknown = set(given) - set(declared)
    assert not unknown, f"not inputs of action.yml: {unknown}"
    return {name: given.get(name, str(spec.get("default", ""))) for name, spec in declared.items()}


def _job(
    origin: Path,
    tmp: Path,
    event: dict[str, Any],
    name: str,
    given: dict[str, str],
    base_env: dict[str, str],
    install: bool,
    branch: str = "feature",
) -> tuple[dict[str, str], str, Path, list[int]]:
    """One job: check out ``branch`` in a fresh workspace and run the action's steps."""
    workspace = tmp / name / "workspace"
    runner_temp = tmp / "runner"  # one venv for both jobs: the install is the slow part
    runner_temp.mkdir(exist_ok=True)
    _git("clone", "-q", "-b", branch, str(origin), str(workspace), cwd=tmp)
    event_path = tmp / name / "event.json"
    event_path.write_text(json.dumps(event), encoding="utf-8")
    output, summary = tmp / name / "output.txt", tmp / name / "summary.md"
    output.touch()
    summary.touch()
    env = {
        **base_env,
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_EVENT_NAME": "pull_request" if "pull_request" in event else "issue_comment",
        "GITHUB_HEAD_REF": "feature" if "pull_request" in event else "",
        "GITHUB_REPOSITORY": "team/project",
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_RUN_ID": "4242",
        "RUNNER_TEMP": str(runner_temp),
    }
    inputs = _inputs(given)
    # The action's own checkout, as the runner downloads it (pip builds in it).
    action_path = tmp / "action"
    if not action_path.exists():
        keep = ("action.yml", "pyproject.toml", "README.md", "LICENSE", "promptflow_resume")
        shutil.copytree(
            REPO,
            action_path,
            ignore=lambda folder, names: [
                n for n in names if (Path(folder) == REPO and n not in keep) or n == "__pycache__"
            ],
        )
    env["GITHUB_ACTION_PATH"] = str(action_path)
    codes = []
    for step in ACTION["runs"]["steps"]:
        if "run" not in step or (step["name"] == "Install flow" and not install):
            continue
        assert step["shell"] == "bash"
        step_env = {
            k: _substitute(str(v), inputs, action_path) for k, v in step.get("env", {}).items()
        }
        script = _substitute(step["run"], inputs, action_path)
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=workspace,
            env={**env, **step_env},
            capture_output=True,
            text=True,
            timeout=300,
        )
        codes.append(done.returncode)
        assert done.returncode == 0, f"step {step['name']!r}: {done.stdout}\n{done.stderr}"
        if step["name"] == "Install flow":
            _lend_packages(runner_temp / "flow-venv")
        printed = done.stdout + done.stderr
        assert KEY not in printed and base_env["OPENAI_API_KEY"] not in printed
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return outputs, summary.read_text(encoding="utf-8"), workspace, codes


def _lend_packages(venv: Path) -> None:
    """Give the new virtual environment the packages this one has (what pip would have
    downloaded on a runner)."""
    here = sysconfig.get_paths()["purelib"]
    found = list(venv.glob("lib/python*/site-packages"))
    assert found, f"no site-packages in {venv}"
    (found[0] / "zz_test_dependencies.pth").write_text(here + "\n", encoding="utf-8")


def test_the_action_stops_for_approval_then_a_comment_resumes_the_same_file(
    origin: Path, server: ModelServer, tmp_path: Path
) -> None:
    base_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "PYTHON"))
    }
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").symlink_to(Path(sys.executable).resolve())
    base_env.update(
        PATH=f"{shim}{os.pathsep}{base_env['PATH']}",
        OPENAI_API_KEY="sk-test-secret-value-123456",
        PIP_NO_DEPS="1",
    )
    given = {
        "workflow": ".github/prompts/stamp.prompt.md",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base-url": server.url + "/v1",
        "approve": "stamp",
        "max-cost": "0.50",
        "seal-key": KEY,
    }
    base = _git("rev-parse", "main", cwd=origin).strip()
    head = _git("rev-parse", "feature", cwd=origin).strip()
    opened = {"pull_request": pull_request(7, base_sha=base, head_sha=head), "number": 7}
    outputs, summary, _ws, _ = _job(origin, tmp_path, opened, "job1", given, base_env, True)
    assert outputs["status"] == "awaiting_approval"
    assert outputs["exit-code"] == "15"
    assert outputs["progress-path"] == "flow-runs/pr-7.md"
    assert Path(outputs["report-path"]).is_file()
    assert outputs["run-id"] and float(outputs["cost-usd"]) >= 0 and int(outputs["tokens"]) > 0
    assert summary.startswith("## ✋ flow: stamp — awaiting_approval")
    assert "`flow approve flow-runs/pr-7.md --call call_1`" in summary
    assert "comment `/flow approve`" in summary
    assert "| Provider | openai |" in summary and "| Tools offered | `stamp` |" in summary
    assert "| Budget | max_cost_usd: 0.5 |" in summary
    assert "(https://github.example/team/project/blob/feature/flow-runs/pr-7.md)" in summary
    log = _git("log", "--format=%s", "feature", cwd=origin)
    assert log.splitlines()[0] == f"flow: run {outputs['run-id']} awaiting_approval"
    # Only the run's file is committed: no journal, lock or owner file.
    files = _git("show", "--name-only", "--format=", "feature", cwd=origin).split()
    assert files == ["flow-runs/pr-7.md"]

    # The comment's job works in the base branch; GitHub keeps the head at refs/pull/7/head.
    _git("update-ref", "refs/pull/7/head", "refs/heads/feature", cwd=origin)
    head = _git("rev-parse", "feature", cwd=origin).strip()
    comment = comment_event(7, "/flow approve", login="maintainer", association="MEMBER")
    pulls = {7: pull_request(7, base_sha=base, head_sha=head)}
    with rest_api(pulls) as (api, _):
        base_env["GITHUB_API_URL"] = api
        again, summary2, _, _ = _job(
            origin, tmp_path, comment, "job2", given, base_env, False, branch="main"
        )
    assert again["status"] == "completed", summary2
    assert again["exit-code"] == "0" and again["run-id"] == outputs["run-id"]
    assert summary2.startswith("## ✅ flow: stamp — completed")
    assert "| 1 | main |" in summary2 or "| 1 |" in summary2
    head = _git("show", "feature:flow-runs/pr-7.md", cwd=origin)
    assert "status: completed" in head and "Stamped; done." in head
    assert "sk-test-secret-value-123456" not in head
    assert len(server.requests) == 2


def test_a_broken_input_fails_the_step_with_one_paragraph(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    output = tmp_path / "out.txt"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))},
        "PYTHONPATH": str(REPO),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(output),
        "INPUT_MAX_COST": "lots",
        "INPUT_SEAL_KEY": "c2VjcmV0",
    }
    done = flow("ci", cwd=workspace, env=env)
    assert done.returncode == 9
    assert "max-cost" in done.stderr and "Traceback" not in done.stderr
    env["INPUT_MAX_COST"] = ""
    done = flow("ci", cwd=workspace, env=env)
    assert done.returncode == 9 and "seal-key" in done.stderr and "c2VjcmV0" not in done.stderr
    env["INPUT_SEAL_KEY"] = ""
    done = flow("ci", cwd=workspace, env=env)
    assert done.returncode == 9 and "input workflow is empty" in done.stderr
    assert shutil.which("git")


WRITER = """\
---
description: Write notes, then stamp the build
commands:
  stamp:
    description: Stamp the build
    argv: ["true"]
tools: [create_file, stamp]
---
Write notes.txt, stamp the build, then say that it is done.
"""


def test_a_worktree_run_commits_its_branch_and_the_next_job_resumes_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``flow ci`` in this process (the action's step without the install): a worktree run's
    changed files are in the summary, its branch is pushed, and a new clone resumes it."""
    from promptflow_resume.ci import run_ci

    args = json.dumps({"path": "notes.txt", "content": "written by the run\n"})
    turns = iter(
        [
            Canned(body=openai_completion("", [openai_tool_call("c1", "create_file", args)])),
            Canned(body=openai_completion("", [openai_tool_call("c2", "stamp", "{}")])),
            Canned(body=openai_completion("Notes written and stamped.")),
        ]
    )
    bare = tmp_path / "origin.git"
    _git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    seed = tmp_path / "seed"
    _git("clone", "-q", str(bare), str(seed), cwd=tmp_path)
    _git("checkout", "-q", "-b", "main", cwd=seed)
    (seed / "writer.prompt.md").write_text(WRITER, encoding="utf-8")
    _git("add", ".", cwd=seed)
    _git("commit", "-qm", "workflow", cwd=seed)
    _git("push", "-q", "origin", "main", cwd=seed)
    _git("checkout", "-q", "-b", "feature", cwd=seed)
    (seed / "change.txt").write_text("a change\n", encoding="utf-8")
    _git("add", ".", cwd=seed)
    _git("commit", "-qm", "the change", cwd=seed)
    _git("push", "-q", "origin", "feature", cwd=seed)
    base = _git("rev-parse", "main", cwd=seed).strip()
    pulls: dict[int, dict[str, Any]] = {}
    with ModelServer() as server, rest_api(pulls) as (api, _):
        server.responder = lambda received: next(turns)
        results = []
        for job, branch in enumerate(["feature", "main"]):
            head = _git("rev-parse", "feature", cwd=bare).strip()
            _git("update-ref", "refs/pull/3/head", head, cwd=bare)
            pull = pull_request(3, base_sha=base, head_sha=head)
            event = (
                {"number": 3, "pull_request": pull}
                if job == 0
                else comment_event(3, "/flow approve", login="lead", association="OWNER")
            )
            pulls[3] = pull
            workspace = tmp_path / f"job{job}" / "ws"
            _git("clone", "-q", "-b", branch, str(bare), str(workspace), cwd=tmp_path)
            (tmp_path / f"job{job}" / "event.json").write_text(json.dumps(event), "utf-8")
            env = {
                "GITHUB_WORKSPACE": str(workspace),
                "GITHUB_EVENT_PATH": str(tmp_path / f"job{job}" / "event.json"),
                "RUNNER_TEMP": str(tmp_path / f"job{job}" / "temp"),
                "INPUT_WORKFLOW": "writer.prompt.md",
                "INPUT_PROVIDER": "openai",
                "INPUT_MODEL": "gpt-4o-mini",
                "INPUT_BASE_URL": server.url + "/v1",
                "INPUT_APPROVE": "stamp",
                "INPUT_WORKTREE": "yes",
                "INPUT_SHARE": "yes",
                "INPUT_SEAL_KEY": KEY,
                "OPENAI_API_KEY": "sk-test",
                "GITHUB_API_URL": api,
                "GITHUB_REPOSITORY": "team/project",
            }
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            monkeypatch.chdir(workspace)
            results.append(run_ci(env, set_env=monkeypatch.setenv, log=lambda text: None))
    first, second = results
    assert first.status == "awaiting_approval" and first.step_exit == 0
    assert "### Changed files" in first.summary and "| `notes.txt` | 1 | 0 |" in first.summary
    branch = f"flow/{first.run_id}"
    assert _git("show", f"{branch}:notes.txt", cwd=bare) == "written by the run\n"
    assert second.status == "completed" and second.resumed and second.run_id == first.run_id
    assert "| `notes.txt` | 1 | 0 |" in second.summary
    assert "`flow review flow-runs/pr-3.md`, then `flow merge flow-runs/pr-3.md`" in second.summary


def test_the_example_workflow_gives_only_inputs_the_action_declares() -> None:
    example = yaml.safe_load((REPO / "docs" / "examples" / "flow-pr.yml").read_text("utf-8"))
    steps = example["jobs"]["flow"]["steps"]
    ours = [s for s in steps if str(s.get("uses", "")).split("@")[0].endswith("/promptflow-resume")]
    assert len(ours) == 1
    assert set(ours[0]["with"]) <= set(ACTION["inputs"])
    # The outputs a later step reads exist.
    later = " ".join(str(s.get("run", "")) for s in steps)
    for name in re.findall(r"steps\.flow\.outputs\.([a-z-]+)", later):
        assert name in ACTION["outputs"]
    # Both triggers: pushes to the pull request, and /flow comments.
    assert set(example[True] if True in example else example["on"]) == {
        "pull_request",
        "issue_comment",
    }


def test_a_command_without_a_run_writes_outputs_and_the_error_then_exits_9(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptflow_resume.base.errors import InputError
    from promptflow_resume.ci import run_ci

    workspace = tmp_path / "ws"
    workspace.mkdir()
    _git("init", "-q", "-b", "main", cwd=workspace)
    (workspace / "README.md").write_text("a project\n", encoding="utf-8")
    _git("add", ".", cwd=workspace)
    _git("commit", "-qm", "base", cwd=workspace)
    head = _git("rev-parse", "HEAD", cwd=workspace).strip()
    event = tmp_path / "event.json"
    approve = comment_event(5, "/flow approve", login="lead", association="MEMBER")
    event.write_text(json.dumps(approve))
    output, summary = tmp_path / "output.txt", tmp_path / "summary.md"
    env = {
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_EVENT_NAME": "issue_comment",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_REPOSITORY": "team/project",
    }
    monkeypatch.chdir(workspace)
    with rest_api({5: pull_request(5, base_sha=head, head_sha=head)}) as (api, _):
        env["GITHUB_API_URL"] = api
        with pytest.raises(InputError) as raised:
            run_ci(env, set_env=monkeypatch.setenv, log=lambda text: None)
    assert "`/flow approve` found no run at flow-runs/pr-5.md" in str(raised.value)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert outputs["exit-code"] == "9" and outputs["status"] == ""
    assert outputs["progress-path"] == "flow-runs/pr-5.md"
    assert summary.read_text().startswith("## ❌ flow: the run did not go on\n\n")
    merge = comment_event(5, "/flow merge", login="lead", association="MEMBER")
    event.write_text(json.dumps(merge))
    with pytest.raises(InputError, match="the commands are /flow approve"):
        run_ci(env, set_env=monkeypatch.setenv, log=lambda text: None)
    # A comment that commands nothing does nothing, and the step ends well.
    chatter = comment_event(5, "Looks good", login="lead", association="MEMBER")
    event.write_text(json.dumps(chatter))
    quiet = run_ci(env, set_env=monkeypatch.setenv, log=lambda text: None)
    assert quiet.skipped is not None and quiet.step_exit == 0
