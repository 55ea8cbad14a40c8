"""Providers, tools and ``flow`` commands: one registry shape, flow's own entries registered
the way another package registers its own, imported only when used."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from promptflow_resume.base.registry import Registry
from promptflow_resume.cli import COMMANDS
from promptflow_resume.cli.app import app
from promptflow_resume.providers import REGISTRY as PROVIDERS
from promptflow_resume.tools import TOOLS
from promptflow_resume.workflow import load_workflow
from promptflow_resume.workflow.toolnames import BUILTIN_TOOLS
from tests.support.flowproc import flow_env

#: A provider, a command and what registers them, as another package would write them.
PLUGIN = '''
from promptflow_resume.cli.app import app, out
from promptflow_resume.providers.provider import Reply, ReplyUsage


class Shouty:
    """Answers every request with its last message in capitals."""

    name = "shouty"

    def __init__(self, settings):
        self.settings = settings

    def complete(self, request, on_text=None):
        text = request.messages[-1].content.upper()
        return Reply(content=text, usage=ReplyUsage(), model="shouty", finish_reason="stop")


@app.command("hello")
def hello() -> int:
    """Say hello."""
    out("hello from a plugin")
    return 0
'''

#: Registers the plugin's entries, then runs ``flow ARGS`` in this process.
RUN_FLOW = """
import json, sys
from promptflow_resume.cli import COMMANDS, main
from promptflow_resume.providers import REGISTRY
REGISTRY.register("shouty", "flow_plugin:Shouty")
COMMANDS.register("hello", "flow_plugin:hello")
sys.exit(main(json.loads(sys.argv[1])))
"""

WORKFLOW = """---
description: One step
---
Say hello to the reviewers.
"""


def _flow_with_plugin(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "flow_plugin.py").write_text(PLUGIN, encoding="utf-8")
    env = flow_env()
    env["PYTHONPATH"] = f"{env['PYTHONPATH']}:{tmp_path}"
    return subprocess.run(
        [sys.executable, "-c", RUN_FLOW, json.dumps(list(args))],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_provider_another_package_registers_runs_a_workflow_and_is_offered_in_help(
    tmp_path: Path,
) -> None:
    (tmp_path / "w.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    progress = tmp_path / "run" / "progress.md"
    done = _flow_with_plugin(
        tmp_path, "run", "w.prompt.md", "--provider", "shouty", "--progress", str(progress)
    )
    assert done.returncode == 0, done.stderr
    assert "SAY HELLO TO THE REVIEWERS." in progress.read_text(encoding="utf-8")
    help_text = _flow_with_plugin(tmp_path, "run", "--help").stdout
    assert "openai, anthropic, replay, echo, scripted or shouty." in " ".join(help_text.split())


def test_a_command_another_package_registers_runs_and_is_listed(tmp_path: Path) -> None:
    done = _flow_with_plugin(tmp_path, "hello")
    assert (done.returncode, done.stdout) == (0, "hello from a plugin\n")
    assert "hello" in _flow_with_plugin(tmp_path, "--help").stdout


def test_every_built_in_tool_is_registered_and_made_by_its_entry(tmp_path: Path) -> None:
    (tmp_path / "w.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    workflow = load_workflow(tmp_path / "w.prompt.md")
    assert set(TOOLS) == set(BUILTIN_TOOLS)
    for name in TOOLS:
        tool = TOOLS.load(name)(workflow, tmp_path)
        assert tool.spec.name == name
        assert isinstance(tool.idempotent, bool)


def test_every_command_entry_names_the_function_flow_runs_for_it() -> None:
    for name in COMMANDS:
        COMMANDS.load(name)
    callbacks = {info.name: info.callback for info in app.registered_commands}
    assert {name: COMMANDS.load(name) for name in COMMANDS} == {
        name: callbacks[name] for name in COMMANDS
    }


def test_every_provider_entry_names_a_provider_class() -> None:
    for name in PROVIDERS:
        factory = PROVIDERS.load(name)
        assert isinstance(factory, type)
        assert callable(getattr(factory, "complete", None)), name


def test_a_registry_refuses_a_second_entry_for_a_name_and_a_target_without_an_attribute() -> None:
    registry: Registry[object] = Registry("thing")
    registry.register("a", "json:dumps")
    with pytest.raises(ValueError, match="the thing 'a' is already registered as 'json:dumps'"):
        registry.register("a", "json:loads")
    with pytest.raises(ValueError, match=r"a target is 'package\.module:attribute'"):
        registry.register("b", "json.dumps")
    assert (list(registry), registry.load("a")) == (["a"], json.dumps)


def test_help_imports_no_provider_and_no_sdk(tmp_path: Path) -> None:
    probe = textwrap.dedent(
        """
        import atexit, json, sys
        from promptflow_resume.cli import main
        watched = ("openai", "anthropic", "httpx", "promptflow_resume.providers.openai",
                   "promptflow_resume.providers.anthropic", "promptflow_resume.tools")
        atexit.register(lambda: print(json.dumps([m for m in watched if m in sys.modules])))
        main(json.loads(sys.argv[1]))
        """
    )
    for args in (["--help"], ["run", "--help"], ["resume", "--help"]):
        done = subprocess.run(
            [sys.executable, "-c", probe, json.dumps(args)],
            env=flow_env(),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(done.stdout.splitlines()[-1]) == [], args
