"""``flow hooks [WORKFLOW] [--hooks FILE]... [--no-hooks] [--json]``: the hooks a run would use.

Every hooks file a run in the working directory reads (``.github/hooks/``, Claude Code's
``.claude/settings.json``, each ``--hooks FILE``; with WORKFLOW, the ``hooks:`` of its agent),
where each comes from, whether the folder's trust lets it run, and each hook: its event as
written and the moment of flow it runs at, its matcher and command. It reads files only
(docs/spec.md 4.15). Exit 0, 4 when a file has errors, 5 when WORKFLOW or a ``--hooks`` file
does not exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from .app import app, err, out, print_json
from .options import AgentsDirOpt, HooksOpt, NoHooksOpt, TrustWorkspaceOpt


@app.command("hooks")
def hooks_command(
    workflow: str | None = typer.Argument(
        None,
        metavar="[WORKFLOW]",
        help="A prompt file, an agent or an agent's name: its agent's own hooks are listed too.",
    ),
    hooks: HooksOpt = [],  # noqa: B006 - typer copies list defaults
    no_hooks: NoHooksOpt = False,
    agents: AgentsDirOpt = [],  # noqa: B006 - typer copies list defaults
    trust_workspace: TrustWorkspaceOpt = False,
    as_json: bool = typer.Option(False, "--json", help="Print the hooks as JSON."),
) -> int:
    """List the hooks a run here would use: each file, where it comes from, whether the
    folder's trust lets it run (`flow trust`), and each hook's event, matcher and command.
    Runs nothing."""
    from ..base.errors import EXIT_INVALID_FILE, FileNotFoundFlowError
    from ..base.truststore import TRUST_FLAG, Trust
    from ..run.hooks import hooks_listing
    from ..run.runoptions import RunOptions
    from ..workflow import load_workflow
    from ..workflow.byname import target

    root = Path.cwd()
    for extra in hooks:
        if not extra.is_file():
            raise FileNotFoundFlowError(f"hooks file not found: {extra}", path=extra)
    options = RunOptions(
        hooks=not no_hooks,
        hook_files=tuple(hooks),
        agent_dirs=tuple(agents),
        trust=Trust.entire(root, TRUST_FLAG) if trust_workspace else None,
    )
    wf = None
    if workflow is not None:
        wf = load_workflow(target(workflow, root, tuple(agents)), agent_dirs=tuple(agents))
    listing = hooks_listing(root, options, wf)
    errors = sum(1 for f in listing["files"] for d in f["diagnostics"] if d["severity"] == "error")
    if as_json:
        print_json({**listing, "errors": errors})
        return EXIT_INVALID_FILE if errors else 0
    if not listing["files"]:
        out("no hooks: no .github/hooks/*.json, .claude/settings.json or agent hooks here.")
    for record in listing["files"]:
        out(_file_line(record))
        for hook in record["hooks"]:
            out(_hook_line(hook))
        for problem in record["diagnostics"]:
            line = f"line {problem['line']}: " if problem["line"] else ""
            out(f"    {problem['severity']}: {line}{problem['message']}")
    if errors:
        err(f"{errors} error{'s' if errors != 1 else ''} in the hooks files above.")
    return EXIT_INVALID_FILE if errors else 0


def _file_line(record: dict[str, Any]) -> str:
    origin = {"workspace": "the workspace", "claude-settings": "Claude Code's settings"}.get(
        record["origin"], record["origin"]
    )
    if record["origin"] == "agent":
        origin = "the agent's hooks:"
    if record["runs"]:
        state = "runs"
    elif record["trust"] not in (None, "trusted", "outside the folder"):
        state = f"does not run: {record['trust']} (flow trust DIR)"
    else:
        state = "does not run: it has errors"
    return f"{record['path']}  ({origin}; {state})"


def _hook_line(hook: dict[str, Any]) -> str:
    event = hook["written"]
    if event != hook["event"]:
        event += f" → {hook['event']}"
    matcher = f" [{hook['matcher']}]" if hook["matcher"] else ""
    return f"  {event}{matcher}: {hook['command']}  (timeout {hook['timeout']:g} s)"
