"""``load_skill {name}``: a skill's instructions and the list of its files, on demand.

The run's first entry tells the model each offered skill's name and description
(``workflow.skills.skills_block``); loading one returns its ``SKILL.md`` body, read afresh,
after a first line naming the skill and the digest of what was read, so the recorded call says
exactly which version the model saw (a resumed run compares it with the skill now). The
skill's files are then readable with the read tools at the paths shown, even when the skill
lives outside the workspace (the user's skills folder); its scripts run through
``run_in_terminal`` under the usual consent rules.

Loading changes nothing, so the tool is idempotent: a call in flight at a crash runs again.
"""

from __future__ import annotations

from typing import Any

from ..chat import ToolSpec
from ..workflow.skillfile import load_skill
from ..workflow.skillset import LOAD_TOOL, loaded_line, shown_path
from .builtin import error_result, validate_arguments
from .tool import Standalone, ToolContext, ToolResult


class LoadSkill(Standalone):
    """The built-in tool that loads one of the run's skills by name."""

    idempotent = True
    #: Changes no file: no snapshot after its calls (docs/spec.md 12).
    read_only = True
    spec = ToolSpec(
        name=LOAD_TOOL,
        description=(
            "Load a skill listed under 'Skills' in your instructions: returns its instructions "
            "and the files in its folder (read them with read_file at the paths shown; run "
            "its scripts with run_in_terminal). Load a skill before doing a task it covers."
        ),
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string", "description": "The skill's name."}},
            "required": ["name"],
            "additionalProperties": False,
        },
    )

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """The named skill's body and files, read now; an error result for an unknown name."""
        problem = validate_arguments(self.spec.parameters, arguments)
        if problem is not None:
            return error_result(f'{problem}. Expected: {LOAD_TOOL}(name), e.g. {{"name": "x"}}.')
        name = arguments["name"]
        offered = [s for s in ctx.skills if s.model_invocable]
        found = next((s for s in offered if s.name == name), None)
        if found is None:
            names = ", ".join(f"`{s.name}`" for s in offered) or "none"
            return error_result(f"there is no skill named `{name}`; the skills here are: {names}")
        skill, diagnostics = load_skill(found.path, source=found.source)
        if skill is None or skill.name != name:
            why = "; ".join(d.message for d in diagnostics if d.severity == "error")
            return error_result(f"the skill `{name}` cannot be loaded now: {why or 'renamed'}")
        folder = shown_path(skill.folder, ctx.workspace)
        parts = [loaded_line(skill, ctx.workspace), "", skill.body or "(the skill has no body)"]
        if skill.files:
            parts += [
                "",
                f"Files in the skill's folder `{folder}` (relative to it; read one with "
                f"read_file at `{folder}/<file>`, run a script with run_in_terminal):",
                *[f"- {rel}" for rel in skill.files],
            ]
        return ToolResult("\n".join(parts))
