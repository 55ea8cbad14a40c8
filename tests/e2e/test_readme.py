"""The README's quick-start commands work as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests import support
from tests.support.flowproc import flow, transcript

ROOT = support.REPO


def quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quick start\s+```bash\n(.*?)```", text, re.S)
    assert block is not None, "README.md must have a Quick start bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_quick_start_installs_only_what_the_example_needs() -> None:
    install, example = quick_start()
    # The first command is flow alone: no test tools, browsers or clusters (issue 43).
    assert install == "pip install -e ."
    assert example.startswith("flow run workflows/")
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    development = re.search(r"```bash\n(pip install -e '\.\[dev\]'.*?)```", text, re.S)
    assert development is not None and "pytest" in development.group(1)
    # CI installs in the same steps: flow alone, the example, then the development extras.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    first, dev = ci.index("pip install -q -e .\n"), ci.index("pip install -q -e '.[dev]'")
    assert first < ci.index("## Quick start") < dev < ci.index("pytest")


def test_the_example_runs_end_to_end_offline(tmp_path: Path) -> None:
    _, example = quick_start()
    # No file snapshots: the workspace is this repository itself.
    args = [*shlex.split(example)[1:], "--progress", str(tmp_path / "progress.md")]
    args.append("--no-snapshots")
    result = flow(*args, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("completed: 2/2 steps")
    entries = transcript(tmp_path / "progress.md")
    results = [content for role, _, tool, content in entries if role == "tool_result"]
    assert "inventory.py:" in results[0] and "TODO" in results[0]  # the grep tool really ran
    assert entries[-1][0] == "assistant" and "Task list" in entries[-1][3]


def test_the_agent_example_follows_its_handoff_offline(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"`(flow run workflows/agents/[^`]+)`", text)
    assert found is not None, "README.md must show the offline agent example"
    args = [*shlex.split(found.group(1))[1:], "--progress", str(tmp_path / "progress.md")]
    args.append("--no-snapshots")  # the workspace is this repository itself
    result = flow(*args, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("completed: 2/2 steps")
    entries = transcript(tmp_path / "progress.md")
    systems = [content for role, _, _, content in entries if role == "system"]
    # Each agent's body is the system text of its part; the planner's search really ran.
    assert systems[0].startswith("You plan work from the TODO comments")
    assert systems[1].startswith("You review plans written by another agent")
    results = [content for role, _, tool, content in entries if role == "tool_result"]
    assert "inventory.py" in results[0]
    assert entries[-1][0] == "assistant" and entries[-1][3].startswith("Riskiest: item 1")
