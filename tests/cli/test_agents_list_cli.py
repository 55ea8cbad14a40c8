"""``flow agents``: the agents found by name, as a table and as JSON, with the duplicates they
hide and their errors; exit 0 with none found, 4 with errors, 5 for a missing --agents folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests import support
from tests.support.flowproc import flow, flow_env

FIXTURES = support.REPO / "tests" / "fixtures"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def agents(work: Path, home: Path, *args: str) -> tuple[int, str, str]:
    result = flow("agents", *args, cwd=work, env=flow_env(HOME=str(home)))
    assert "Traceback" not in result.stderr
    return result.returncode, result.stdout, result.stderr


def write(where: Path, name: str, text: str) -> Path:
    path = where / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_none_found_says_so(work: Path, home: Path) -> None:
    code, out, _ = agents(work, home)
    assert code == 0
    assert out.startswith("No custom agents found (searched .github/agents, .claude/agents, ")
    code, out, _ = agents(work, home, "--json")
    data = json.loads(out)
    assert (code, data["agents"], data["errors"]) == (0, [], 0)
    assert [(s["source"], s["exists"]) for s in data["searched"]] == [
        ("workspace", False),
        ("workspace", False),
        ("user", False),
        ("user", False),
    ]


def test_lists_every_place_with_shadows(work: Path, home: Path) -> None:
    shutil.copytree(FIXTURES / "agents-claude" / ".claude", work / ".claude")
    write(
        work,
        ".github/agents/reviewer.agent.md",
        "---\ndescription: Reviews\nmodel: GPT-4.1\nuser-invocable: false\nhandoffs:\n"
        "  - label: Fix it\n    agent: structured-debugger\n---\nReview.\n",
    )
    hidden = write(home, ".copilot/agents/reviewer.agent.md", "---\ndescription: Old\n---\nR.\n")
    code, out, _ = agents(work, home, "--agents", str(FIXTURES / "agents"))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "WHERE", "MODEL", "INVOKED", "BY", "HANDOFFS"]
    assert any(
        line.split()[:4] == ["reviewer", "workspace", "openai/gpt-4.1", "agents"]
        and line.endswith("Fix it")
        for line in lines
    )
    assert any(line.startswith("structured-debugger  ") for line in lines)
    assert f"    hides {hidden}" in lines
    assert "    tools: read_file, run_in_terminal, list_files, search_files" in lines
    assert "    MCP servers: custom-mcp" in lines

    code, out, _ = agents(work, home, "--agents", str(FIXTURES / "agents"), "--json")
    data = json.loads(out)
    assert code == 0 and data["errors"] == 0
    by_name = {a["name"]: a for a in data["agents"]}
    assert [a["source"] for a in data["agents"]][:5] == ["--agents"] * 5
    reviewer = by_name["reviewer"]
    assert reviewer["path"] == str(work / ".github/agents/reviewer.agent.md")
    assert (reviewer["user_invocable"], reviewer["model_invocable"]) == (False, True)
    assert reviewer["models"] == ["GPT-4.1"]
    assert (reviewer["provider"], reviewer["model"]) == ("openai", "gpt-4.1")
    assert reviewer["handoffs"] == [
        {"label": "Fix it", "agent": "structured-debugger", "send": False}
    ]
    assert reviewer["shadows"] == [str(hidden)]
    debugger = by_name["structured-debugger"]
    assert debugger["dialect"] == "claude" and debugger["models"] == ["sonnet"]
    assert debugger["tool_names"] == ["read", "execute", "search/fileSearch", "search/textSearch"]
    assert by_name["Debug Mode Instructions"]["warnings"] == 1
    assert set(by_name["Debug Mode Instructions"]["diagnostics"][0]) == {
        "severity",
        "line",
        "column",
        "field",
        "code",
        "message",
    }


def test_an_agent_with_errors_exits_4(work: Path, home: Path) -> None:
    write(
        work,
        ".github/agents/twice.agent.md",
        "---\ndescription: T\nhandoffs:\n  - label: Go\n    agent: a\n"
        "  - label: Go\n    agent: b\n---\nT.\n",
    )
    code, out, err = agents(work, home)
    assert code == 4
    assert "    error: line 6: two handoffs are labelled `Go`" in out
    assert err.strip() == "1 error in the agents above."
    code, out, _ = agents(work, home, "--json")
    assert code == 4 and json.loads(out)["agents"][0]["errors"] == 1


def test_a_missing_agents_folder_exits_5(work: Path, home: Path) -> None:
    code, _, err = agents(work, home, "--agents", "nowhere")
    assert code == 5
    assert "--agents nowhere: no such folder." in err


@pytest.mark.parametrize("folder", ["agents", "agents-claude/.claude/agents"])
def test_flow_check_passes_the_real_agents(work: Path, home: Path, folder: str) -> None:
    result = flow("check", str(FIXTURES / folder), cwd=work, env=flow_env(HOME=str(home)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout and "error" not in result.stdout.lower()
    assert result.stdout.count(": ok (1 step") == len(list((FIXTURES / folder).glob("*.md"))) - (
        1 if folder == "agents" else 0  # the README
    )


def test_flow_check_looks_agents_up_in_agents_dirs(work: Path, home: Path) -> None:
    write(work, "mine/terse.agent.md", "---\ndescription: T\ntools: [read]\n---\nBe terse.\n")
    write(work, "p.prompt.md", "---\nagent: terse\n---\nSay hi.\n")
    env = flow_env(HOME=str(home))
    missing = flow("check", "p.prompt.md", cwd=work, env=env)
    assert missing.returncode == 4
    assert "p.prompt.md:2:8: error: $.agent: no custom agent is called `terse`" in missing.stdout
    found = flow("check", "p.prompt.md", "--agents", "mine", "--json", cwd=work, env=env)
    assert found.returncode == 0, found.stdout
    (plan,) = json.loads(found.stdout)["workflows"]
    assert plan["steps"][0]["tools"] == ["read_file"]
