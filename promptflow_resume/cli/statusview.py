"""How ``flow status`` (and ``flow resume --plan``) prints one run: a line per fact, each
led by its label (``run``, ``status``, ``progress``, ``usage`` …, then what resume would do).

The ``--json`` document is the status's own ``to_dict()``; these lines are its reading for a
person::

    return print_status(run_status(path, RunOptions()), as_json=False)
"""

from __future__ import annotations

from typing import Any

from ..base.wording import count
from .app import out, print_json


def print_status(status: Any, as_json: bool, *, plan: bool = False) -> int:
    """Print where a run stands (``--json``: the status document); ``plan`` adds what
    ``--plan`` shows (what is reused, what runs, the next request's size). Returns 0."""
    data = status.to_dict()
    if as_json:
        print_json(data)
        return 0
    _print_progress(data)
    _print_tree(data)
    chain = status.chain_text()
    if chain:
        out(f"handoffs {chain}")
    _print_workflow(data)
    _print_context(status, data)
    _print_choices(status, data)
    _print_resume(status, data, plan)
    if data["last_error"]:
        out(f"error    {data['last_error']['type']}: {data['last_error']['message']}")
    return 0


def _print_progress(data: dict[str, Any]) -> None:
    """The run, its state, its steps, its usage and what it waits for."""
    from ..detect.prompt import progress_bar

    bar = progress_bar(data["steps_done"], data["steps_total"], width=20)
    out(f"run      {data['run_id']}")
    out(f"status   {data['state']}")
    out(
        f"progress {bar} {data['percent']}% "
        f"({data['steps_done']}/{data['steps_total']} steps; at step {data['step_index']}"
        f"{' ' + data['step'] if data['step'] else ''})"
    )
    usage = data["usage"]
    # A run of models without a price shows tokens only: its $0 is unknown, not free.
    cost = f"${usage['cost_usd']:.4f}, " if data["priced"] or usage["cost_usd"] else ""
    out(
        f"usage    {usage['input_tokens']:,} in / {usage['output_tokens']:,} out tokens, "
        f"{count(usage['turns'], 'turn')}, {cost}{count(data['attempts'], 'attempt')}"
    )
    for reply in data["incomplete_replies"]:
        out(f"reply    step {reply['step']}: its reply (entry {reply['entry']}) {reply['why']}")
    for held in data["approvals"]:
        by = f" by {held['by']}" if held.get("by") else ""
        out(f"approval {held['call_id']} {held['tool']} ({held['why']}): {held['decision']}{by}")
    if data["until"]:
        out(
            f"until    {data['until']}: the provider's quota window opens then "
            f"(suspension {data['suspensions']}); `flow resume --wait` waits and continues"
        )


def _print_workflow(data: dict[str, Any]) -> None:
    """Whether the workflow changed since the checkpoint, and in which steps."""
    if data["workflow_error"]:
        out(f"workflow {data['workflow_error']}")
    elif data["workflow_changed"]:
        changed = (
            ", ".join(
                f"{c['step']} ({c['kind']}{', started' if c['started'] else ''})"
                for c in data["changed_steps"]
            )
            or "no step changed (shared parts only)"
        )
        out(f"workflow changed since the checkpoint: {changed}")
    else:
        out("workflow unchanged since the checkpoint")


def _print_context(status: Any, data: dict[str, Any]) -> None:
    """The context's size, the worktree, hand edits and warnings."""
    finished = status.run.status == "completed"
    if status.context is not None and (status.context.count or not finished):
        # A completed run sends no next request: only its compactions are worth a line.
        out(f"context  {status.context.text(status.run.config.model, next_request=not finished)}")
    tree = data.get("worktree")
    if tree:
        missing = "" if tree["exists"] or tree["state"] == "discarded" else ", folder missing"
        out(
            f"worktree {tree['path']} on branch {tree['branch']} from {tree['base'][:12]} "
            f"({tree['state']}{missing})"
        )
    if data["edited_entries"]:
        out(f"edited   {status.edited_entries_text()}")
    for change in data["edited_inputs"]:
        out(f"edited   input edited by hand: {change} (used by every prompt not answered yet)")
    for warning in data["warnings"]:
        out(f"warning  {warning}")


def _print_choices(status: Any, data: dict[str, Any]) -> None:
    """What was chosen or must be: a ``--decide`` decision, skipped steps, trust, permissions."""
    decision = data.get("decision")
    if decision:
        refused = f" (refused: {decision['refused']})" if decision["refused"] else ""
        out(f"decision {decision['choice']}{refused} — {decision['reason']}")
        out(f"         situation: {decision['description']}")
        if decision["choice"] == "ask":
            out("         not applied (--plan); resuming with --decide stops for review")
        else:
            out("         not applied (--plan); `flow resume --decide` asks again and applies")
    if data.get("skip_steps"):
        out(f"skip     steps skipped: {', '.join(data['skip_steps'])}")
    trust = status.trust
    if trust is not None and (trust.files or trust.refused):
        out(f"trust    {trust.line()}")
    perms = data.get("permissions_change")
    if perms:
        needs = "; resume asks, or takes --accept-permissions" if perms["widened"] else ""
        out(f"perms    {perms['change']}{needs}")


def _print_resume(status: Any, data: dict[str, Any], plan: bool) -> None:
    """What resume would do: nothing, go on from a step (and what runs again), or why not."""
    if status.nothing_to_do:
        out("resume   nothing to do: the run is completed")
    elif data["can_resume"]:
        out(f"resume   can resume from step {data['resume_from']}")
        if data["reset_steps"]:
            out(f"         steps that run again: {', '.join(data['reset_steps'])}")
        agents = data.get("resume_agents") or []
        again = [c for c in data["retry_tools"] if c not in agents]
        if again:
            out(f"         tool calls run again (idempotent): {', '.join(again)}")
        if agents:
            out(f"         subagent calls resumed inside their runs: {', '.join(agents)}")
        if plan and status.plan is not None:
            p = status.plan
            reused, to_run = ", ".join(p.reuse) or "nothing", ", ".join(p.rerun) or "nothing"
            out(f"         reused: {reused}; to run: {to_run}")
            out(f"         next request ≈ {data['estimated_input_tokens']:,} input tokens")
    else:
        out(f"resume   blocked: {data['blocked']}")


def _print_tree(data: dict[str, Any]) -> None:
    """The sub-workflow runs under a run, indented, and the usage they add (spec 4.10)."""
    parent = data.get("parent")
    if parent:
        out(
            f"parent   step {parent.get('step')} of run {parent.get('run_id')} "
            f"({parent.get('path')}); resume that run"
        )

    def lines(children: list[dict[str, Any]], indent: str) -> None:
        for child in children:
            usage = child["usage"]
            # An invalid child says why (a broken file, a link back to a run above it).
            why = child["reason"] or child.get("error")
            reason = f" — {why}" if why else ""
            # A subagent's child is named by its agent within the step that called it.
            who = (
                f"{child['step']} › agent {child['agent']}" if child.get("agent") else child["step"]
            )
            out(
                f"{indent}{who}: {child['status']}{reason} · "
                f"{child['steps_done']}/{child['steps_total']} steps · "
                f"{count(usage['turns'], 'turn')}, ${usage['cost_usd']:.4f} · {child['path']}"
            )
            lines(child["children"], indent + "  ")

    if data.get("children"):
        out("children")
        lines(data["children"], "  ")
        total = data["usage_total"]
        if total != data["usage"]:
            out(
                f"total    {total['input_tokens']:,} in / {total['output_tokens']:,} out tokens, "
                f"{count(total['turns'], 'turn')}, ${total['cost_usd']:.4f} with the children"
            )
