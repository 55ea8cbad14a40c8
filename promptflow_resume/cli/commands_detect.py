"""``flow list`` (runs as a table) and ``flow detect`` (what ``flow run`` would offer)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .app import app, out, print_json
from .options import InputOpt, InputsFileOpt, WorkflowArg

if TYPE_CHECKING:
    from rich.console import Console

    from ..detect import Detection, RunSummary, RunTree
    from ..progress import ChildNode


def _console() -> Console:
    """A rich console on stdout; lines are never folded when output goes to a file or pipe."""
    from ..base.printing import console as people_console

    console = people_console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        # A file or pipe has no width: never fold a line (scripts grep these).
        console = people_console(highlight=False, width=100_000, no_color=True)
    return console


@app.command("list")
def list_command(
    dirs: list[Path] = typer.Argument(
        None,
        help="Folders (or progress files) to list; default: .flow/runs of this directory.",
        show_default=False,
        metavar="DIR",
    ),
    all_: bool = typer.Option(False, "--all", "-a", help="Include completed runs."),
    status: str | None = typer.Option(
        None,
        "--status",
        "-s",
        help="Only runs with this status (e.g. interrupted, failed).",
        metavar="STATUS",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the runs as JSON."),
) -> int:
    """List runs, unfinished ones first: id, workflow, status, steps, cost, last update, path."""
    from ..detect import list_run_trees

    runs = list_run_trees(dirs or (), include_completed=all_, status=status)
    if as_json:
        print_json([listed.to_dict() for listed in runs])
        return 0
    if not runs:
        where = ", ".join(str(d) for d in dirs) if dirs else ".flow/runs"
        more = "" if all_ or status else " unfinished"
        hint = "" if all_ or status else " (--all includes completed runs)"
        out(f"No{more} runs in {where}{hint}.")
        return 0
    _print_runs(runs)
    return 0


#: Longer reasons are cut in the table so one long message does not push the paths away.
_REASON_WIDTH = 48


def _status_cell(summary: RunSummary) -> str:
    # The effective state (a dead owner's "running" run is "interrupted"), as status and log
    # say it; --json has the whole reason.
    return summary.state.text(width=_REASON_WIDTH)


def _print_runs(listed: list[RunTree]) -> None:
    from rich.table import Table
    from rich.text import Text

    from ..base.paths import display_path
    from ..detect.prompt import format_age, format_cost, progress_bar

    console = _console()
    unicode = _unicode_ok(console)
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (
        ("id", "left"),
        ("workflow", "left"),
        ("status", "left"),
        ("steps", "left"),
        ("cost", "right"),
        ("updated", "left"),
        ("path", "left"),
    ):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    trees = any(run.summary.worktree_json for run in listed)
    if trees:
        table.add_column("worktree", overflow="fold")
    for run in listed:
        s = run.summary
        steps = f"{s.steps_done}/{s.steps_total} " + progress_bar(
            s.steps_done, s.steps_total, unicode=unicode
        )
        style = "dim" if s.status == "completed" else ("red" if s.error else "")
        table.add_row(
            Text(s.run_id),
            Text(s.workflow_name or s.workflow_path or "?"),
            Text(_status_cell(s)),
            Text(steps),
            Text(format_cost(s.cost_usd)),
            Text(format_age(s.updated)),
            Text(display_path(s.path)),
            *([Text(_worktree_cell(s))] if trees else []),
            style=style,
        )
        _child_rows(table, run.children, "  ", unicode)
    console.print(table)


def _worktree_cell(summary: RunSummary) -> str:
    """``.flow/worktrees/<id> (active)`` for a run made with ``--worktree``, else empty."""
    tree = summary.worktree
    if tree is None:
        return ""
    return f"{tree.get('path', '?')} ({tree.get('state', 'active')})"


def _child_rows(table: Any, nodes: list[ChildNode], indent: str, unicode: bool) -> None:
    """Child runs indented under their parent's row: step, workflow run id, status, cost."""
    from rich.text import Text

    from ..base.paths import display_path
    from ..detect.prompt import format_cost, progress_bar, status_text

    for node in nodes:
        steps = f"{node.steps_done}/{node.steps_total} " + progress_bar(
            node.steps_done, node.steps_total, unicode=unicode
        )
        mark = "└ " if unicode else "- "
        table.add_row(
            Text(f"{indent}{mark}{node.run_id or '-'}"),
            Text(f"step {node.step}" + (f" › agent {node.agent}" if node.agent else "")),
            Text(status_text(node.status, node.reason)),
            Text(steps),
            Text(format_cost(node.total_usage().cost_usd)),
            Text(""),
            Text(display_path(node.path)),
            style="dim",
        )
        _child_rows(table, node.children, indent + "  ", unicode)


def _unicode_ok(console: Console) -> bool:
    try:
        "█░".encode(console.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


@app.command("detect")
def detect_command(
    workflow: WorkflowArg,
    input_: InputOpt = [],  # noqa: B006 - typer copies list defaults
    inputs_file: InputsFileOpt = None,
    dirs: list[Path] = typer.Option(
        [],
        "--dir",
        help="Also look in this folder (repeatable); .flow/runs always.",
        metavar="DIR",
    ),
    time_limit: float = typer.Option(
        0.2,
        "--time-limit",
        help="Seconds the check may take, as in flow run; 0 for no limit.",
        metavar="SECONDS",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> int:
    """Show what `flow run WORKFLOW` would offer to resume, with scores and matched keywords."""
    from ..api import prepare_inputs
    from ..detect import detect
    from ..detect.prompt import would_do
    from ..front import parse_assignments
    from ..workflow import load_workflow

    wf = load_workflow(workflow)
    values = prepare_inputs(wf, parse_assignments(input_, "--input"), inputs_file, None)
    detection = detect(wf, values, folders=dirs, time_limit=time_limit or None)
    if as_json:
        print_json({**detection.to_dict(), "would": would_do(detection)})
        return 0
    _print_detection(detection)
    return 0


#: The matched-keywords cell lists what fits; the rest is counted (``--json`` has them all).
_MATCHED_WIDTH = 40


def _matched_cell(matched: Sequence[str]) -> str:
    shown: list[str] = []
    for number, word in enumerate(matched):
        more = len(matched) - number
        tail = f", +{more - 1} more" if more > 1 else ""
        if shown and len(", ".join([*shown, word]) + tail) > _MATCHED_WIDTH:
            return ", ".join(shown) + f", +{more} more"
        shown.append(word)
    return ", ".join(shown) or "-"


def _print_detection(detection: Detection) -> None:
    from rich.table import Table
    from rich.text import Text

    from ..base.paths import display_path
    from ..detect.prompt import format_age, format_cost, progress_bar, would_do

    console = _console()
    console.print(Text("keywords: " + (", ".join(detection.keywords) or "(none)")))
    if detection.skipped_reason:
        console.print(Text(f"check skipped: {detection.skipped_reason}"))
    elif detection.candidates:
        unicode = _unicode_ok(console)
        table = Table(box=None, pad_edge=False, header_style="bold")
        for name in ("#", "id", "score", "similar", "recency", "matched", "status", "steps"):
            table.add_column(name, overflow="fold")
        for name in ("cost", "updated", "path"):
            table.add_column(name, overflow="fold")
        for number, c in enumerate(detection.candidates, start=1):
            table.add_row(
                Text(str(number)),
                Text(c.run_id + (" (exact)" if c.exact else "")),
                Text(f"{c.score:.2f}"),
                Text(f"{c.similarity:.2f}"),
                Text(f"{c.recency:.2f}"),
                Text(_matched_cell(c.matched)),
                Text(c.status),
                Text(
                    f"{c.steps_done}/{c.steps_total} "
                    + progress_bar(c.steps_done, c.steps_total, unicode=unicode)
                ),
                Text(format_cost(c.cost_usd)),
                Text(format_age(c.updated)),
                Text(display_path(c.path)),
            )
        console.print(table)
    console.print(Text(f"flow run would {would_do(detection)}. ({detection.elapsed_ms:.0f} ms)"))
