"""A run as Markdown for a pull request comment or a CI job summary (``flow show --summary``).

The page is sized for GitHub: a comment or ``$GITHUB_STEP_SUMMARY`` holds at most 65,536
characters, so every part that grows with the run is capped (steps, inputs, tools, changed
files, approvals) and the whole page is cut at ``SUMMARY_LIMIT`` as a last resort. Its layout
(docs/spec.md 11.1): a heading with the status, what to do next, the steps, the settings the
run used, the files a worktree run changed, and links to the progress file and report::

    text = pr_summary(Path("progress.md"))                 # reads the file only
    text = pr_summary(path, progress_link=url, report_link="run.html")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base.errors import FlowError
from ..progress import load_progress
from ..progress.model import Run, run_models
from ..progress.state import RunState, run_state
from ..run.runview import StepRow, run_facts
from .ghmarkdown import code, text
from .timeline import duration_text

#: The most characters the page may have: GitHub refuses a comment or job summary over
#: 65,536, and a caller may add a line or two around it.
SUMMARY_LIMIT = 60_000
#: Steps shown in the table; a run with more shows the first and last half of them.
MAX_STEP_ROWS = 60
#: Changed files, inputs, tools and held calls listed at most.
MAX_FILES = 50
MAX_ITEMS = 20
#: Characters of one table cell (an input's value, a reason, a preview).
CELL_LIMIT = 200

_ICONS = {
    "completed": "✅",
    "failed": "❌",
    "awaiting_approval": "✋",
    "awaiting_input": "❓",
    "budget_exhausted": "💸",
    "timeout": "⏱️",
    "needs_review": "🔎",
    "suspended": "💤",
    "running": "🏃",
}


def cell(value: object, limit: int = CELL_LIMIT) -> str:
    """``value`` as one Markdown table cell or line of prose: inert on GitHub (no HTML, link,
    image or mention a file could slip in; ``ghmarkdown.text``), cut to ``limit``."""
    return text(value, limit)


def _money(cost: float) -> str:
    return f"${cost:.4f}"


def _next_lines(run: Run, state: RunState, shown: str) -> list[str]:
    """What a person does next, as the exact command or the file line to edit."""
    status = state.status
    if status == "completed":
        if run.worktree is not None and run.worktree.state == "active":
            return [f"Review the changes with `flow review {shown}`, then `flow merge {shown}`."]
        return ["Nothing left to do. To try a step again: `flow fork " + shown + " --at STEP`."]
    if status == "awaiting_approval":
        return _approval_lines(run, shown)
    if status == "awaiting_input":
        from ..run.humananswers import answer_line

        line = answer_line(Path(shown))
        where = f"`{shown}:{line}`" if line else f"`{shown}`"
        return [
            f"Write the answer in {where} (replace the placeholder line), "
            f"then `flow resume {shown}`."
        ]
    if status == "budget_exhausted":
        unpriced = _unpriced_model(run)
        if unpriced is not None:
            return [
                f"Give the price of {code(unpriced, 80)}, which flow does not know, and resume: "
                f"{code(f'flow resume {shown} --price {unpriced}=IN/OUT', 300)} (USD per million "
                "input/output tokens; the action's `prices` input does the same)."
            ]
        return [
            f"Raise the limit that was reached and resume: `flow resume {shown} --max-cost N` "
            "(or `--max-tokens N`, `--max-turns N`)."
        ]
    if status == "timeout":
        return [f"Resume with more time: `flow resume {shown} --timeout SECONDS`."]
    if status == "suspended":
        return [f"Resume when the provider's window opens ({run.until}): `flow resume {shown}`."]
    if status == "needs_review":
        return [f"See why with `flow status {shown}`, then resume with the option it names."]
    if status == "running":
        return ["The run is still going; nothing to do yet."]
    return [f"Resume with `flow resume {shown}`."]


def _unpriced_model(run: Run) -> str | None:
    """The model a cost budget could not be kept on, for want of its price; None otherwise."""
    from ..providers.givenprices import from_record
    from ..providers.pricing import price_for

    if "max_cost_usd" not in run.config.budget:
        return None
    used = next((a.model for a in reversed(run.attempts) if a.model), None)
    model = used or run.config.model
    if model is None or price_for(model, from_record(run.config.prices)) is not None:
        return None
    return model


def _approval_lines(run: Run, shown: str) -> list[str]:
    waiting = [a for a in run.approvals if a.decision == "pending"]
    lines = [f"{len(waiting)} tool call(s) wait for approval:", ""]
    lines += ["| Call | Tool | Arguments | Why |", "|---|---|---|---|"]
    for held in waiting[:MAX_ITEMS]:
        lines.append(
            f"| {code(held.call_id, 60)} | {code(held.tool, 60)} | {code(held.preview)} "
            f"| {cell(held.why)} |"
        )
    if len(waiting) > MAX_ITEMS:
        lines.append(f"| … | {len(waiting) - MAX_ITEMS} more | | |")
    ids = " ".join(f"--call {a.call_id}" for a in waiting[:MAX_ITEMS])
    line = _front_matter_line(Path(shown), "approvals:")
    where = f"`{shown}:{line}`" if line else f"`{shown}`"
    lines += [
        "",
        f"Approve with {code(f'flow approve {shown} {ids}', 2000)} (or `--all`), deny with "
        f"`flow deny {shown} --call ID --reason TEXT`, or set `decision: approved` / "
        f"`denied` under `approvals:` at {where}; then `flow resume {shown}`.",
    ]
    return lines


def _front_matter_line(path: Path, key: str) -> int | None:
    """The 1-based line of a top-level front-matter key, or None."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if line.startswith(key):
                    return number
                if number > 1 and line.rstrip("\r\n") == "---":
                    return None
    except OSError:
        return None
    return None


def _step_row(index: int, row: StepRow) -> str:
    icon = _ICONS.get(row.status, "·")
    return (
        f"| {index} | {cell(row.step, 60)} | {icon} {row.status} | {duration_text(row.seconds)} "
        f"| {row.turns} | {row.tokens:,} | {_money(row.cost_usd)} |"
    )


def _steps(rows: list[StepRow]) -> list[str]:
    lines = ["### Steps", "", "| # | Step | Status | Time | Turns | Tokens | Cost |"]
    lines.append("|---:|---|---|---:|---:|---:|---:|")
    numbered = list(enumerate(rows, start=1))
    if len(numbered) > MAX_STEP_ROWS:
        half = MAX_STEP_ROWS // 2
        hidden = len(numbered) - 2 * half
        lines += [_step_row(i, r) for i, r in numbered[:half]]
        lines.append(f"| … | {hidden} more steps | | | | | |")
        numbered = numbered[-half:]
    lines += [_step_row(i, r) for i, r in numbered]
    return lines


def _tools(run: Run, path: Path) -> str:
    """The tools the workflow offers the model (from the workflow file the run names)."""
    from ..run.recorded import workflow_for

    try:
        workflow = workflow_for(run, path, None)
    except FlowError:
        return f"unknown (workflow {cell(run.workflow.path, 100)} not readable here)"
    names = list(workflow.tools)
    names += [t for t in run.attempts[-1].mcp_tools if t not in names] if run.attempts else []
    if not names:
        return "none"
    shown = ", ".join(code(n, 60) for n in names[:MAX_ITEMS])
    return shown + (f" and {len(names) - MAX_ITEMS} more" if len(names) > MAX_ITEMS else "")


def _pairs(values: dict[str, Any]) -> str:
    if not values:
        return "none"
    items = [f"{cell(k, 40)}: {cell(v, 60)}" for k, v in list(values.items())[:MAX_ITEMS]]
    more = f", and {len(values) - MAX_ITEMS} more" if len(values) > MAX_ITEMS else ""
    return ", ".join(items) + more


def _allowed(listed: list[str], given: list[str], flag: str) -> str:
    """What the workflow's list and the person's flag allowed, each said where it came from."""
    parts = [f"{code(p, 60)} (workflow)" for p in listed[:MAX_ITEMS]]
    parts += [f"{code(p, 60)} ({flag})" for p in given[:MAX_ITEMS]]
    return ", ".join(parts) or "none"


def _settings(run: Run, path: Path) -> list[str]:
    config = run.config
    used = next((a.model for a in reversed(run.attempts) if a.model), None)
    models = run_models(run)
    model = used or (models[0] if models else "the provider's default")
    rows = [
        ("Provider", cell(config.provider, 60)),
        ("Model", cell(model, 80) + (f" (list: {cell(', '.join(models))})" if models[1:] else "")),
        ("Parameters", _pairs(config.params)),
        ("Budget", _pairs(config.budget)),
        ("Tools offered", _tools(run, path)),
        (
            "Commands allowed",
            _allowed(
                config.permissions.commands, config.permissions.given_commands, "--allow-commands"
            ),
        ),
        (
            "Hosts allowed",
            _allowed(config.permissions.hosts, config.permissions.given_hosts, "--allow-fetch"),
        ),
        ("Inputs", _pairs(run.inputs)),
        ("Attempts", str(len(run.attempts))),
    ]
    if config.base_url:
        rows.insert(2, ("Endpoint", cell(config.base_url, 100)))
    lines = ["### Settings used", "", "| Setting | Value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return lines


def _changed_files(path: Path) -> list[str]:
    """The files a worktree run changed, with their line counts (nothing for other runs)."""
    from ..worktree import review_run

    try:
        review = review_run(path)
    except FlowError as error:
        return ["### Changed files", "", f"Not available here: {cell(error.message, 300)}"]
    lines = [
        "### Changed files",
        "",
        f"Branch {code(review.tree.branch, 100)} against {code(review.tree.base[:12], 40)}: "
        f"{len(review.files)} file(s), +{review.insertions} −{review.deletions}, "
        f"{review.commits} commit(s).",
        "",
        "| File | + | − |",
        "|---|---:|---:|",
    ]
    for change in review.files[:MAX_FILES]:
        added = "bin" if change.insertions is None else str(change.insertions)
        removed = "bin" if change.deletions is None else str(change.deletions)
        lines.append(f"| {code(change.path, 150)} | {added} | {removed} |")
    if len(review.files) > MAX_FILES:
        lines.append(f"| … {len(review.files) - MAX_FILES} more files | | |")
    return lines


def _links(shown: str, progress_link: str | None, report_link: str | None) -> list[str]:
    lines = ["### Files", "", f"- Progress file: [{cell(shown, 200)}]({progress_link or shown})"]
    if report_link:
        lines.append(f"- Report: [HTML report]({report_link})")
    lines.append(f"- Resume anywhere: `flow resume {shown}`")
    return lines


def summary_text(
    run: Run,
    state: RunState,
    path: Path,
    *,
    progress_link: str | None = None,
    report_link: str | None = None,
    comments: bool = False,
) -> str:
    """The summary page of a loaded run (see the module's docstring); ``comments``: the run
    is decided by ``/flow`` comments on a pull request (``flow ci``), said under Next."""
    shown = str(path)
    facts = run_facts(run, state)
    total = facts.steps_total
    icon = _ICONS.get(state.status, "⏸️")
    title = run.title()
    usage = facts.usage
    lines = [
        f"## {icon} flow: {cell(title, 100)} — {state.status}",
        "",
        f"Run {code(run.run_id, 80)} · step {run.cursor.index} of {total} · {usage.turns} turns · "
        f"{usage.total_tokens:,} tokens · {_money(usage.cost_usd)}",
    ]
    if state.reason:
        lines += ["", f"**Why it stopped:** {cell(state.reason, 500)}"]
    if run.last_error is not None and state.status != "completed":
        lines += ["", f"**Last error:** {cell(run.last_error.message, 500)}"]
    first, *rest = _next_lines(run, state, shown)
    lines += ["", "**Next:** " + first, *rest]
    if comments and state.status in ("awaiting_approval", "needs_review", "budget_exhausted"):
        lines += [
            "",
            "On the pull request: comment `/flow approve` (or `/flow deny REASON`) to decide the "
            "held calls and resume, or `/flow resume` after a change to the budget or the file.",
        ]
    lines += ["", *_steps(facts.steps), "", *_settings(run, path)]
    if run.worktree is not None:
        lines += ["", *_changed_files(path)]
    lines += ["", *_links(shown, progress_link, report_link), ""]
    page = "\n".join(lines)
    if len(page) > SUMMARY_LIMIT:
        cut = page.rfind("\n", 0, SUMMARY_LIMIT - 200)
        page = page[:cut] + f"\n\n… summary cut at {SUMMARY_LIMIT:,} characters; see `{shown}`.\n"
    return page


def pr_summary(
    path: Path,
    *,
    progress_link: str | None = None,
    report_link: str | None = None,
    comments: bool = False,
) -> str:
    """``flow show PROGRESS --summary``: the run at ``path`` as PR-sized Markdown (reads only)."""
    run, _report = load_progress(path)
    state = run_state(path, run.status, run.reason)
    return summary_text(
        run, state, path, progress_link=progress_link, report_link=report_link, comments=comments
    )
