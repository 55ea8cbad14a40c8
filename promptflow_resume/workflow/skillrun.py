"""A user-invocable skill run directly: ``flow run path/SKILL.md --task TEXT``.

The skill's body is the run's system instructions, followed by where its folder is and which
files it holds (so the model can read and run them, under the usual consent rules); the task
is the input ``task``, the user message of the one step, as for an agent (1.10). The hashes
cover the skill's digest (``SKILL.md`` and every file of its folder), so a skill changed
between attempts is a changed workflow on resume::

    wf = skill_workflow(Path(".github/skills/release-notes/SKILL.md"))
    wf.kind, [s.id for s in wf.steps]     # ("skill", ["task"])
"""

from __future__ import annotations

from pathlib import Path

from ..base.errors import WorkflowError
from ..base.retrypolicy import RetryPolicy
from .agentfile import TASK_INPUT
from .hashing import digest
from .records import Budget, InputDecl, Step, Workflow
from .skillfile import Skill, load_skill
from .toolnames import BUILTIN_TOOLS

#: The id of a skill run's one step (the task), as an agent's.
TASK_STEP_ID = "task"


def skill_workflow(path: Path) -> Workflow:
    """The skill at ``path`` as a workflow of one step; ``WorkflowError`` (exit 4) for a skill
    with errors (the first, positioned) or one not meant to be run by a person."""
    skill, diagnostics = load_skill(path)
    errors = [d for d in diagnostics if d.severity == "error"]
    if skill is None or errors:
        first = errors[0] if errors else None
        more = f" ({len(errors) - 1} more; run `flow check {path}`.)" if len(errors) > 1 else ""
        raise WorkflowError(
            (first.message if first else "the skill could not be read.") + more,
            path=str(path),
            line=first.line if first else None,
            column=first.column if first else None,
            field=first.field if first else None,
        )
    if not skill.user_invocable:
        raise WorkflowError(
            f"the skill `{skill.name}` says `user-invocable: false`: it is meant to be loaded "
            "by a model, not run by a person.",
            path=str(path),
            field="$.user-invocable",
            hint="Run an agent or prompt file in this workspace: every run offers its skills.",
        )
    context = _instructions(skill)
    template = f"${{input:{TASK_INPUT}}}"
    tools = BUILTIN_TOOLS
    step = Step(
        id=TASK_STEP_ID,
        title="Task",
        index=1,
        kind="prompt",
        body=template,
        # The skill's digest covers every file of its folder: a changed script is a changed
        # step, which a resume reports (4.4).
        hash=digest(
            {"template": template, "context": context, "tools": list(tools), "skill": skill.digest}
        ),
        line=1,
    )
    task = InputDecl(
        name=TASK_INPUT,
        type="string",
        description=skill.argument_hint or "what the skill should do",
        required=True,
    )
    return Workflow(
        path=path,
        name=skill.name,
        description=skill.description,
        front_matter={"name": skill.name, "description": skill.description},
        context=context,
        steps=(step,),
        inputs={TASK_INPUT: task},
        commands={},
        tools=tools,
        provider=None,
        model=None,
        params={},
        budget=Budget(),
        retry=RetryPolicy(),
        hash=digest({"skill": skill.digest, "step": step.hash}),
        diagnostics=tuple(diagnostics),
        kind="skill",
    )


def _instructions(skill: Skill) -> str:
    """The skill's body, then where its folder is and what it holds: the model reads and runs
    those files itself, as a host that loaded the skill would let it."""
    listed = "\n".join(f"- {name}" for name in skill.files) or "- (no other files)"
    return (
        f"{skill.body}\n\n"
        f"This is the skill `{skill.name}`. Its folder is {skill.folder}; paths in it are "
        f"relative to that folder. Its files:\n{listed}"
    )
