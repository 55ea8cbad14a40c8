"""The repository's pre-commit hooks (spec 11.4).

A temporary repository holds a good and a broken file of each kind; each hook must pass on the
good file alone and fail on the broken one, naming it. The real ``pre-commit try-repo`` builds
the hooks' virtual environment from a copy of this checkout (pip installs the package and its
dependencies: a minute or two, so those tests are slow ones); the fast tests run each hook's
``entry`` on the files its ``files`` pattern selects, as pre-commit passes them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import REPO
from tests.support.flowproc import FLOW, flow_env

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "workflows" / "examples" / "triage-todos.progress.md"
PRE_COMMIT = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))


def _git(*args: str, cwd: Path) -> None:
    identity = ["-c", "user.name=dev", "-c", "user.email=dev@example.com"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed copy of the checkout (try-repo reads the hooks from a commit)."""
    root = tmp_path_factory.mktemp("hooks") / "flow"
    keep = (".pre-commit-hooks.yaml", "pyproject.toml", "README.md", "promptflow_resume")

    def ignored(folder: str, names: list[str]) -> list[str]:
        top = Path(folder) == REPO
        return [n for n in names if (top and n not in keep) or n == "__pycache__"]

    shutil.copytree(REPO, root, ignore=ignored)
    _git("init", "-q", cwd=root)
    _git("add", ".", cwd=root)
    _git("commit", "-qm", "hooks", cwd=root)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("project")
    (where / "runs" / "bad").mkdir(parents=True)
    shutil.copyfile(EXAMPLE, where / "runs" / "progress.md")
    broken = EXAMPLE.read_text(encoding="utf-8").replace("status: completed", "status: nearly", 1)
    (where / "runs" / "bad" / "progress.md").write_text(broken, encoding="utf-8")
    (where / "good.prompt.md").write_text("---\ndescription: Greet\n---\nHello.\n", "utf-8")
    (where / "bad.prompt.md").write_text("---\ntools: [\n---\nHello.\n", "utf-8")
    (where / "notes.md").write_text("# not a flow file\n", "utf-8")
    # Runs under other names: a `flow share` copy and the action's file, one of them broken.
    shutil.copyfile(EXAMPLE, where / "20261121-232529-release-a1b2.md")
    (where / "flow-runs").mkdir()
    (where / "flow-runs" / "pr-7.md").write_text(broken, encoding="utf-8")
    _git("init", "-q", cwd=where)
    _git("add", ".", cwd=where)
    return where


def _try(hooks: Path, project: Path, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
    home = hooks.parent / "pre-commit-home"
    return subprocess.run(
        [PRE_COMMIT, "try-repo", str(hooks), hook, "--verbose", "--files", *files],
        cwd=project,
        env={**_env(), "PRE_COMMIT_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


@pytest.mark.slow
def test_flow_validate_passes_a_good_progress_file_and_fails_a_broken_one(
    hooks_repo: Path, project: Path
) -> None:
    good = _try(hooks_repo, project, "flow-validate", "runs/progress.md", "notes.md")
    assert good.returncode == 0, good.stdout
    assert "runs/progress.md: valid (completed, 11 entries)" in good.stdout
    bad = _try(hooks_repo, project, "flow-validate", "runs/progress.md", "runs/bad/progress.md")
    assert bad.returncode == 1, bad.stdout
    assert "- exit code: 4" in bad.stdout
    assert "runs/bad/progress.md:" in bad.stdout and "$.status" in bad.stdout
    assert "Traceback" not in bad.stdout


@pytest.mark.slow
def test_flow_check_passes_a_good_prompt_file_and_fails_a_broken_one(
    hooks_repo: Path, project: Path
) -> None:
    good = _try(hooks_repo, project, "flow-check", "good.prompt.md", "notes.md")
    assert good.returncode == 0, good.stdout
    assert "(no files to check)" not in good.stdout and "Passed" in good.stdout
    bad = _try(hooks_repo, project, "flow-check", "good.prompt.md", "bad.prompt.md")
    assert bad.returncode == 1, bad.stdout
    assert "bad.prompt.md: FAILED" in bad.stdout and "invalid YAML" in bad.stdout
    assert "Traceback" not in bad.stdout


HOOKS = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text("utf-8"))}
FILES = [
    "runs/progress.md",
    "runs/bad/progress.md",
    "docs/release.progress.md",
    "20261121-232529-release-a1b2.md",
    "flow-runs/pr-7.md",
    "good.prompt.md",
    "bad.prompt.md",
    ".github/agents/helper.agent.md",
    ".github/skills/tidy/SKILL.md",
    "notes.md",
    "progress.md.lock",
]


@pytest.mark.parametrize(
    ("hook", "selected"),
    [
        # Every Markdown file: the entry itself leaves out those that are not runs.
        ("flow-validate", [f for f in FILES if f.endswith(".md")]),
        (
            "flow-check",
            [
                "good.prompt.md",
                "bad.prompt.md",
                ".github/agents/helper.agent.md",
                ".github/skills/tidy/SKILL.md",
            ],
        ),
    ],
)
def test_each_hook_selects_its_files(hook: str, selected: list[str]) -> None:
    pattern = re.compile(HOOKS[hook]["files"])
    assert [f for f in FILES if pattern.search(f)] == selected
    assert HOOKS[hook]["language"] == "python" and HOOKS[hook]["entry"].startswith("flow ")


def _entry(hook: str, project: Path, *files: str) -> subprocess.CompletedProcess[str]:
    """The hook's entry with the files, as pre-commit runs it (``flow`` is this checkout's)."""
    args = HOOKS[hook]["entry"].split()[1:]
    return subprocess.run(
        [*FLOW, *args, *files], cwd=project, env=flow_env(), capture_output=True, text=True
    )


def test_the_entries_pass_good_files_and_fail_broken_ones(project: Path) -> None:
    good = _entry("flow-validate", project, "runs/progress.md")
    assert good.returncode == 0 and "runs/progress.md: valid" in good.stdout
    bad = _entry("flow-validate", project, "runs/progress.md", "runs/bad/progress.md")
    assert bad.returncode == 4 and "Traceback" not in bad.stdout + bad.stderr
    assert "runs/progress.md: valid" in bad.stdout  # the good one is still checked
    # Runs under any name are checked; other Markdown files are left out, not refused.
    named = _entry("flow-validate", project, "20261121-232529-release-a1b2.md", "notes.md")
    assert named.returncode == 0, named.stderr
    assert named.stdout.splitlines() == [
        "20261121-232529-release-a1b2.md: valid (completed, 11 entries)"
    ]
    action = _entry("flow-validate", project, "flow-runs/pr-7.md", "good.prompt.md")
    assert action.returncode == 4 and "flow-runs/pr-7.md" in action.stderr
    assert "good.prompt.md" not in action.stdout + action.stderr
    checked = _entry("flow-check", project, "good.prompt.md")
    assert checked.returncode == 0, checked.stdout
    broken = _entry("flow-check", project, "good.prompt.md", "bad.prompt.md")
    assert broken.returncode == 4 and "bad.prompt.md: FAILED" in broken.stdout
