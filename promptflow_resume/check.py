"""Checking workflow files without running them: what ``flow check`` reports, for any caller.

Each file is loaded with every problem collected (``workflow.check_workflow``) and becomes one
plan record (``workflow.plan.plan_dict``); a folder stands for the workflow files directly in
it. With ``mcp=True`` (or when a workflow names MCP tools) each plan also lists its MCP
servers and their tools::

    report = check_workflows([Path("workflows")])
    report.exit_code       # 0 all load, 4 a file has errors, 5 a file or folder has none
    report.to_dict()       # the ``flow check --json`` document
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base.errors import EXIT_INVALID_FILE, EXIT_NOT_FOUND, EXIT_OK, FileNotFoundFlowError

if TYPE_CHECKING:
    from .trust import TrustState
    from .workflow.agentfind import FoundAgent

# The workflow and tool modules are imported where they are used: `flow --help` registers the
# check command, which imports this module, without paying for them.


@dataclass
class CheckReport:
    """The plans of the files checked, the folders that held none, and the exit code."""

    #: Every file checked and every empty folder, in the order given.
    plans: list[dict[str, Any]] = field(default_factory=list)
    #: The files alone (an empty folder has a plan record but no file).
    checked: list[dict[str, Any]] = field(default_factory=list)
    #: One message per folder given that holds no workflow file.
    empty_folders: list[str] = field(default_factory=list)
    exit_code: int = EXIT_OK
    #: Whether the working directory's hooks, MCP configuration and agents would run
    #: (``trust.TrustState``; docs/spec.md 10.9), as a run here would find them.
    trust: TrustState | None = None

    @property
    def names_unknown_tools(self) -> bool:
        """True when a checked file names a tool flow does not know (``unknown-tool``)."""
        return any(
            d.get("code") == "unknown-tool" for plan in self.checked for d in plan["diagnostics"]
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``flow check --json`` document: ``ok``, ``workflows`` and the ``tools`` tally."""
        from .workflow.plan import tool_tally

        return {
            "ok": self.exit_code == EXIT_OK,
            "workflows": self.plans,
            "tools": tool_tally(self.checked),
            "trust": self.trust.to_dict() if self.trust is not None else None,
        }


def check_file(
    path: Path,
    *,
    mcp: bool = False,
    mcp_config: Path | None = None,
    agent_dirs: tuple[Path, ...] = (),
) -> tuple[dict[str, Any], int]:
    """One file's plan record and its exit code (0, 4 with errors, 5 when it does not exist);
    ``agent: NAME`` is looked up in ``agent_dirs`` first, then the working directory's and
    the user's agent folders."""
    from .base.errors import FlowError
    from .tools.mcp_check import add_mcp_plan, agent_server_problems, error_diagnostic
    from .tools.mcp_setup import mcp_names
    from .workflow import check_workflow
    from .workflow.plan import plan_dict
    from .workflow.records import Diagnostic

    if path.name == "SKILL.md":
        return check_skill(path)
    if path.suffix == ".json":
        return _check_hooks_file(path)
    try:
        workflow, diagnostics = check_workflow(path, workspace=Path.cwd(), agent_dirs=agent_dirs)
    except FileNotFoundFlowError as error:
        diagnostic = Diagnostic("error", error.message, str(path), code="not-found")
        return plan_dict(str(path), None, [diagnostic]), EXIT_NOT_FOUND
    # Every problem of the file is reported, its agent's MCP servers' too: a folder's check
    # goes on to the next file whatever this one holds.
    servers = agent_server_problems(workflow, Path.cwd()) if workflow is not None else []
    plan = plan_dict(str(path), workflow, [*diagnostics, *servers])
    if workflow is not None and (mcp or mcp_config or mcp_names(workflow) or workflow.mcp_servers):
        try:
            add_mcp_plan(plan, workflow, Path.cwd(), config_path=mcp_config, start=mcp)
        except FlowError as error:
            problem = error_diagnostic(error, workflow)
            if not any(d.field == problem.field and d.message == problem.message for d in servers):
                _add_diagnostic(plan, problem)
    return plan, EXIT_OK if plan["ok"] else EXIT_INVALID_FILE


def _add_diagnostic(plan: dict[str, Any], problem: Any) -> None:
    """Add one more problem to a plan record, keeping its counts and ``ok`` right."""
    plan["diagnostics"].append(problem.to_dict())
    key = "errors" if problem.severity == "error" else "warnings"
    plan[key] += 1
    plan["ok"] = plan["errors"] == 0


def _check_hooks_file(path: Path) -> tuple[dict[str, Any], int]:
    """A hooks file's plan record (``kind: hooks``) and its exit code."""
    from .workflow.hookfiles import check_hooks, hooks_plan
    from .workflow.plan import plan_dict
    from .workflow.records import Diagnostic

    try:
        loaded = check_hooks(path, Path.cwd())
    except FileNotFoundFlowError as error:
        diagnostic = Diagnostic("error", error.message, str(path), code="not-found")
        return plan_dict(str(path), None, [diagnostic]), EXIT_NOT_FOUND
    plan = plan_dict(str(path), None, list(loaded.diagnostics))
    plan.update(hooks_plan(loaded))
    return plan, EXIT_OK if plan["ok"] else EXIT_INVALID_FILE


def check_workflows(
    given: Iterable[Path],
    *,
    mcp: bool = False,
    mcp_config: Path | None = None,
    agent_dirs: tuple[Path, ...] = (),
) -> CheckReport:
    """Check workflow files and folders of them; a missing file outranks an invalid one in
    the exit code (nothing could be checked there at all)."""
    from .workflow import workflow_files
    from .workflow.plan import plan_dict
    from .workflow.records import Diagnostic

    report = CheckReport()
    codes: set[int] = set()
    for target in given:
        files = workflow_files(target) + (skills_in(target) if target.is_dir() else [])
        if not files:
            message = f"no *.prompt.md files in the folder {target}."
            diagnostic = Diagnostic("error", message, str(target), code="not-found")
            report.plans.append(plan_dict(str(target), None, [diagnostic]))
            report.empty_folders.append(message)
            codes.add(EXIT_NOT_FOUND)
        for path in files:
            plan, file_code = check_file(
                path, mcp=mcp, mcp_config=mcp_config, agent_dirs=agent_dirs
            )
            report.plans.append(plan)
            report.checked.append(plan)
            codes.add(file_code)
    report.exit_code = next((c for c in (EXIT_NOT_FOUND, EXIT_INVALID_FILE) if c in codes), EXIT_OK)
    from .trust import trust_state

    report.trust = trust_state(Path.cwd())
    return report


def skills_in(folder: Path) -> list[Path]:
    """The ``SKILL.md`` files a folder given to ``flow check`` stands for: its own, its skill
    folders', and those of its ``.github/skills``, ``.claude/skills``, ``.agents/skills``."""
    from .workflow.skillset import WORKSPACE_FOLDERS, skill_files

    found = skill_files(folder)
    for rel in WORKSPACE_FOLDERS:
        found += [p for p in skill_files(folder / rel) if p not in found]
    return found


def check_skill(path: Path) -> tuple[dict[str, Any], int]:
    """A ``SKILL.md`` file's check record (docs/spec.md 1.11) and its exit code."""
    from .workflow.plan import plan_dict
    from .workflow.skillfile import load_skill
    from .workflow.skillset import skill_record

    skill, diagnostics = load_skill(path)
    plan = plan_dict(str(path), None, list(diagnostics))
    if any(d.code == "not-found" for d in diagnostics):
        return plan, EXIT_NOT_FOUND
    plan["kind"] = "skill"
    if skill is not None:
        plan["skill"] = skill_record(skill, Path.cwd())
    return plan, EXIT_OK if plan["ok"] else EXIT_INVALID_FILE


def checked_agents(workspace: Path, extra: Sequence[Path] = ()) -> list[FoundAgent]:
    """The agents ``flow agents`` lists (``workflow.agentfind.find_agents``), each with the
    problems ``flow check`` finds in it, its own MCP servers' included: the two commands
    count the same errors."""
    from .tools.mcp_check import agent_server_problems
    from .workflow.agentfind import find_agents

    found = []
    for agent in find_agents(workspace, extra):
        problems = agent_server_problems(agent.read, workspace) if agent.read is not None else []
        if problems:
            agent = replace(agent, diagnostics=(*agent.diagnostics, *problems), workflow=None)
        found.append(agent)
    return found
