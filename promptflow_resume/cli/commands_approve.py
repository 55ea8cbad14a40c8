"""``flow approve``, ``flow deny`` and ``flow answer``: a person's answers to a paused run.

Each writes the decision or the answer into the progress file (docs/spec.md 4.17); ``flow
resume`` then continues, on this machine or another.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app, err, out, print_json
from .options import ProgressArg

_CallOpt = typer.Option(
    [],
    "--call",
    metavar="ID",
    help="A held tool call's id (as flow status and the file's approvals: list show it); "
    "repeat for several.",
)
_JsonOpt = typer.Option(False, "--json", help="Print what was recorded as JSON.")


@app.command("approve")
def approve_command(
    progress: ProgressArg,
    call: list[str] = _CallOpt,
    every: bool = typer.Option(False, "--all", help="Approve every call that waits."),
    reason: str | None = typer.Option(None, "--reason", metavar="TEXT", help="A remark kept."),
    json_output: bool = _JsonOpt,
) -> None:
    """Approve tool calls a run holds for a person's yes (status awaiting_approval). The
    decision (who, when, which machine) is written into the file; flow resume then runs
    exactly the approved calls, once, if this machine recorded them."""
    _decide(progress, call, approve=True, every=every, reason=reason, as_json=json_output)


@app.command("deny")
def deny_command(
    progress: ProgressArg,
    call: list[str] = _CallOpt,
    reason: str = typer.Option(
        ..., "--reason", metavar="TEXT", help="Why: the model gets it as the call's result."
    ),
    json_output: bool = _JsonOpt,
) -> None:
    """Deny tool calls a run holds for approval; flow resume gives the model the reason as
    each call's (error) result instead of running it."""
    _decide(progress, call, approve=False, every=False, reason=reason, as_json=json_output)


def _decide(
    progress: Path,
    calls: list[str],
    *,
    approve: bool,
    every: bool,
    reason: str | None,
    as_json: bool,
) -> None:
    from ..api import decide_calls

    decided = decide_calls(str(progress), calls, approve=approve, every=every, reason=reason)
    if as_json:
        print_json(decided.to_dict())
        return
    for item in decided.calls:
        out(f"{decided.decision}: {item.call_id} ({item.tool}, step {item.step})")
    if decided.pending:
        err(f"Still waiting: {', '.join(decided.pending)}.")
    else:
        err(f"Continue with: flow resume {decided.path}")


@app.command("answer")
def answer_command(
    progress: ProgressArg,
    text: str = typer.Option(
        ..., "--text", metavar="TEXT|@FILE", help="The answer, or @FILE to read it from a file."
    ),
    json_output: bool = _JsonOpt,
) -> None:
    """Answer the question a run waits for (status awaiting_input): the text takes the place
    of the answer placeholder in the file, as a hand edit would; flow resume continues."""
    from ..api import answer_question

    where = answer_question(progress, text)
    if json_output:
        print_json({"path": str(progress), "answered_in": str(where)})
        return
    out(f"answered in {where}")
    err(f"Continue with: flow resume {progress}")
