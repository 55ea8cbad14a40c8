"""``flow skills [DIR] [--skills DIR]... [--json]``: the skills a run in DIR may load.

It lists each skill found (docs/spec.md 1.11) with where it comes from and its hash, names the
ones that cannot be used with their first problem, and those hidden by a skill of the same name
found earlier. It reads files only. Exit 0, or 5 when DIR does not exist.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import typer

from .app import app, err, out, print_json
from .options import SkillsOpt


@app.command("skills")
def skills_command(
    folder: Path = typer.Argument(
        Path("."), metavar="DIR", help="The workspace whose skills to list (default: here)."
    ),
    skills: SkillsOpt = [],  # noqa: B006 - typer copies list defaults
    json_output: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> int:
    """List the skills a run in DIR may load: --skills folders, the workspace's
    .github/skills, .claude/skills, .agents/skills, then ~/.copilot/skills, ~/.claude/skills,
    ~/.agents/skills. `flow check SKILL.md` shows every problem of one skill."""
    from ..base.errors import EXIT_NOT_FOUND
    from ..base.wording import count
    from ..workflow.skillset import find_skills, found_record

    if not folder.is_dir():
        err(f"error: there is no folder {folder}; give the workspace whose skills to list.")
        return EXIT_NOT_FOUND
    found = find_skills(folder, skills)
    record = found_record(found, folder.resolve(), skills)
    if json_output:
        print_json(record)
        return 0
    for item in record["skills"]:
        flags = [] if item["model_invocable"] else ["not offered to the model"]
        if item["user_invocable"]:
            flags.append("user-invocable")
        files = count(len(item["files"]), "file")
        out(f"{item['name']}  ({item['source']}, {item['hash']}, {files} besides SKILL.md)")
        out(f"  {item['path']}" + (f"  [{', '.join(flags)}]" if flags else ""))
        out(textwrap.fill(item["description"], 96, initial_indent="  ", subsequent_indent="  "))
    if not found.skills:
        out("no skills found.")
    for path in record["shadowed"]:
        err(f"note: {path} is hidden by an earlier skill of the same name.")
    for problem in found.diagnostics:
        if problem.severity == "error":
            err(f"skipped: {problem}")
    return 0
