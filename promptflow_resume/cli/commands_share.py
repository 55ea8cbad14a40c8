"""``flow share``, ``flow fork``, ``flow rewind``, ``flow log`` and ``flow clean``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..base.wording import count
from .app import app, err, out, print_json
from .options import ProgressArg, SummaryJson

if TYPE_CHECKING:
    from ..filerestore import RestorePlan
    from ..sharing.restore import FilesChoice, FilesRestored

_YES = typer.Option(
    False, "--yes", "-y", help="Restore the files without asking (needed without a terminal)."
)
_FORCE = typer.Option(
    False,
    "--force",
    help="Also overwrite or delete files changed since the run last touched them.",
)
_NO_FILES = typer.Option(
    False, "--no-files", help="Move the conversation only; leave the files as they are."
)


def _files_choice(yes: bool, force: bool, no_files: bool, as_json: bool) -> FilesChoice:
    """What rewind and fork do with the files: ask on a terminal unless ``--yes``; without
    one (or with ``--json``), go on only with ``--yes``."""
    from ..sharing.restore import FilesChoice

    def confirm(plan: RestorePlan, root: Path) -> bool:
        if yes:
            return True
        if as_json or sys.stdin is None or not sys.stdin.isatty():
            return False
        _show_plan(plan, root)
        return bool(typer.confirm("Restore these files?", default=False, err=True))

    return FilesChoice(restore=not no_files, force=force, confirm=confirm)


def _show_plan(plan: RestorePlan, root: Path) -> None:
    """Every path the restore writes or removes, and what it really is when that differs
    from what its name says (a link: only the link goes; a folder in the way: with what is
    in it)."""
    err(f"files of {root} to restore to snapshot {plan.target[:12]}:")

    def notes(path: str) -> str:
        said = []
        if path in plan.conflicts:
            said.append("changed since the run last touched it")
        if path in plan.links:
            said.append(f"a symbolic link to {plan.links[path]}: only the link itself goes")
        return f"  ({'; '.join(said)})" if said else ""

    for path in plan.write:
        err(f"  write   {path}{notes(path)}")
    for path in plan.delete:
        err(f"  delete  {path}{notes(path)}")
    for path, what in plan.cleared.items():
        err(f"  remove  {path}  ({what}, in the way)")
    for path in plan.kept:
        err(f"  keep    {path}  (not the run's)")


def _say_files(files: FilesRestored | None) -> None:
    if files is None:
        return
    commit = (files.snapshot.commit or "")[:12]
    at = f"snapshot {commit} (entry {files.snapshot.entry})"
    out(f"files: {files.summary()} — {files.root} as at {at}")


def _size(n: int) -> str:
    """``532 B``, ``4.1 KB``, ``12.0 MB`` (decimal units, as ``du -h --si`` prints)."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"  # pragma: no cover - the loop returns at GB


def _time(text: str | None, since: str | None = None) -> str:
    """``2026-11-21 23:25:29``; only the time when ``since`` is on the same day."""
    if not text:
        return "…"
    shown = text.replace("T", " ").removesuffix("Z")
    return shown[11:] if since and since[:10] == text[:10] else shown


@app.command("share")
def share_command(
    progress: ProgressArg,
    # Text, not Path: a trailing slash (docs/runs/) says OUT is a folder, and Path drops it.
    output: str | None = typer.Option(
        None,
        "--output",
        "-o",
        metavar="OUT",
        help="Where to write the copy: a .md file, or a folder (created when missing).",
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing copy at OUT."),
    scrub_home: bool = typer.Option(
        False, "--scrub-home", help="Also replace your home folder's path with ~ in the text."
    ),
    as_json: SummaryJson = False,
) -> int:
    """Write a copy of a run that is safe to commit to a pull request and resume elsewhere.

    Secrets are redacted again (sidecar files too), paths are rewritten relative to the copy,
    sidecar files are bundled in OUT's own <name>.files/ folder, the child runs of workflow
    steps are shared with it into <name>.steps/, and a comment header says how to resume.
    The original is not changed. Default OUT: ./<run-id>.md.
    """
    from ..sharing import share

    result = share(progress, output, force=force, scrub_home=scrub_home)
    if as_json:
        print_json(result.to_dict())
        return 0
    bundled = f", {count(len(result.bundled), 'file')} bundled beside it" if result.bundled else ""
    out(f"shared: {result.output} (run {result.run_id}{bundled})")
    out(f"workflow: {result.workflow_path} (relative to the copy)")
    if result.children:
        out(f"child runs shared with it: {', '.join(result.children)}")
    out(f"redacted again: {count(result.redacted, 'secret value')}")
    if result.home_paths:
        out(f"home folder replaced by ~: {count(result.home_paths, 'time')}")
    if result.edited_entries:
        edited = ", ".join(map(str, result.edited_entries))
        out(f"hand edits kept as edits: entries {edited}")
    for warning in result.warnings:
        err(f"warning: {warning}")
    out(f"Resume it (in any clone) with: flow resume {result.output}")
    return 0


@app.command("fork")
def fork_command(
    progress: ProgressArg,
    at: str = typer.Option(
        ..., "--at", metavar="STEP", help="The step to start from (id or number)."
    ),
    output: str | None = typer.Option(
        None,
        "--output",
        "-o",
        metavar="NEW",
        help="Where to write the new run: a .md file, or a folder (created when missing); "
        "default: beside the original.",
    ),
    yes: bool = _YES,
    force: bool = _FORCE,
    no_files: bool = _NO_FILES,
    as_json: SummaryJson = False,
) -> int:
    """Start a new run from the checkpoint at the start of a step; the original is unchanged.

    The new run has its own id, the transcript before that step, the step and every later one
    pending, and a parent reference (file, run id, step) in its front matter. The child runs
    of the steps it keeps (sub-workflows) are copied with it; a run in a git worktree gets a
    worktree and branch of its own, made from the original's branch at the start of that step.
    """
    from ..sharing import fork

    result = fork(progress, at, output, files=_files_choice(yes, force, no_files, as_json))
    if as_json:
        print_json(result.to_dict())
        return 0
    out(
        f"forked: {result.output} (run {result.run_id}) from run {result.parent_run_id} at step "
        f"{result.step}; {result.copied_entries} entries copied; pending: "
        + ", ".join(result.pending)
    )
    if result.children:
        out(f"child runs copied: {', '.join(result.children)}")
    if result.worktree is not None:
        out(f"worktree: {result.worktree} (branch {result.branch}, its own)")
    for warning in result.warnings:
        err(f"warning: {warning}")
    out(f"Continue it with: flow resume {result.output}")
    return 0


@app.command("rewind")
def rewind_command(
    progress: ProgressArg,
    to: str = typer.Option(
        ...,
        "--to",
        metavar="STEP",
        help="The step to go back to (id or number), or entry:N to go back to just before "
        "entry N, a model reply.",
    ),
    yes: bool = _YES,
    force: bool = _FORCE,
    no_files: bool = _NO_FILES,
    as_json: SummaryJson = False,
) -> int:
    """Move a run back to the start of a step, in place, keeping a backup of the file.

    That step and every later one become pending; their transcript entries are archived in the
    run's sidecar folder and the attempt history notes where. Refused while the run is live.
    A run with file snapshots (in a git repository) gets its files back as they were at the
    start of that step: the plan is shown and confirmed first (--yes without a terminal); a
    file changed since the run last touched it is refused unless --force.
    """
    from ..sharing import rewind

    result = rewind(progress, to, files=_files_choice(yes, force, no_files, as_json))
    if as_json:
        print_json(result.to_dict())
        return 0
    if not result.changed:
        out(f"already at the start of step {result.step}: nothing changed — {result.path}")
        return 0
    out(f"rewound {result.path} to the start of step {result.step}")
    if result.archive:
        first, last = result.archived_entries[0], result.archived_entries[-1]
        span = str(first) if first == last else f"{first}-{last}"
        out(f"archived: entries {span} → {result.archive}")
    if result.reset:
        out(f"pending again: {', '.join(result.reset)}")
    _say_files(result.files)
    out(f"backup: {result.backup}")
    out(f"Continue with: flow resume {result.path}")
    return 0


@app.command("log")
def log_command(
    progress: ProgressArg,
    as_json: bool = typer.Option(False, "--json", help="Print the history as JSON."),
) -> int:
    """The attempt history: each attempt's start, end, status, reason, usage and notes,
    including the hand edits detected between attempts."""
    from ..sharing import read_log

    log = read_log(progress)
    if as_json:
        print_json(log.to_dict())
        return 0
    state = log.state.text() if log.state else log.status
    out(f"run {log.run_id}: {state}")
    if log.parent:
        p = log.parent
        out(
            f"forked from {p.get('path', '?')} (run {p.get('run_id', '?')}) "
            f"at step {p.get('step', '?')}"
        )
    if not log.attempts:
        out("no attempts yet")
    for a in log.attempts:
        if a.seconds is not None:
            took = f" ({a.seconds}s)"
        else:  # only the last attempt can still be going
            took = _open_attempt(log) if a is log.attempts[-1] else " (end not recorded)"
        why = f" — {a.reason}" if a.reason else ""
        span = f"{_time(a.started)} → {_time(a.ended, a.started)}{took}"
        by = f"  (flow {a.flow})" if a.flow else ""
        out(f"#{a.n}  {span}  {a.status or '?'}{why}{by}")
        u = a.usage
        out(
            f"    {count(u.turns, 'turn')} · {u.input_tokens:,} in / {u.output_tokens:,} out tokens"
            + (f" · ${u.cost_usd:.4f}" if log.priced or u.cost_usd else "")
        )
        if a.model:
            out(f"    model: {a.model}")
        for refused in a.refused:
            out(f"    refused model {refused['model']}: {refused['message']}")
        for note in a.notes:
            out(f"    {'edit' if note in a.edits else 'note'}: {note}")
    if log.pending_edits:
        entries = ", ".join(map(str, log.pending_edits))
        out(f"edited by hand since the last attempt (used at the next resume): entries {entries}")
    for change in log.pending_inputs:
        out(f"input edited by hand since the last attempt (used at the next resume): {change}")
    u = log.usage
    cost = f" · ${u.cost_usd:.4f}" if log.priced or u.cost_usd else ""
    out(
        f"total: {count(u.turns, 'turn')} · {u.input_tokens:,} in / {u.output_tokens:,} out tokens"
        f"{cost} over {count(len(log.attempts), 'attempt')}"
    )
    for warning in log.warnings:
        err(f"warning: {warning}")
    return 0


def _ask_worktrees(items: list[Any]) -> bool:
    """On a terminal: whether the worktrees and branches of these runs go with them."""
    err("these runs have a worktree and branch that flow made here; they would go with them:")
    for item in items:
        err(f"  {item.run_id}: worktree {item.worktree.folder}, branch {item.worktree.name}")
    question = "Remove these worktrees and branches too (their changes are lost)?"
    return bool(typer.confirm(question, default=False, err=True))


def _open_attempt(log: Any) -> str:
    """How an attempt without an end is shown: still running, or its process gone."""
    alive = log.state.owner_alive if log.state else None
    if alive:
        return " (still running)"
    return " (not ended: its process is gone)" if alive is False else " (not ended)"


@app.command("clean")
def clean_command(
    folder: Path | None = typer.Argument(
        None, metavar="DIR", help="Where to look for runs (default .flow/runs)."
    ),
    older_than: str = typer.Option(
        "30d",
        "--older-than",
        metavar="AGE",
        help="Only runs not updated for this long: 30d, 12h, 2w, 0 (a bare number is days).",
    ),
    status: list[str] = typer.Option(
        ["completed"],
        "--status",
        metavar="STATUS",
        help="Only runs with this status (repeatable; 'all' for any).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Only list what would be deleted."),
    worktrees: bool = typer.Option(
        False,
        "--worktrees",
        help="Also remove the worktree and branch flow made here for a run (their changes "
        "are lost); without it a terminal asks, and elsewhere such runs are kept.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> int:
    """Delete old runs: list what goes and the space it frees.

    What goes: each matching run's own files (its folder in .flow/runs, or its progress file
    with the files flow keeps beside it), and the snapshot ref flow made here for it.

    What is kept: live runs; files that cannot be read as a run; a run whose worktree and
    branch flow/<run-id> flow made here, unless --worktrees (or a yes on a terminal) lets
    them go with it; and everything a run's file names that flow on this machine did not make
    for it (a worktree, branch or snapshot ref of a run from elsewhere), with a line saying so.
    """
    from ..sharing import clean_runs

    ask = not (worktrees or dry_run or as_json) and sys.stdin is not None and sys.stdin.isatty()
    report = clean_runs(
        folder, older_than, status, dry_run, worktrees=_ask_worktrees if ask else worktrees
    )
    if as_json:
        print_json(report.to_dict())
        return 0
    verb = "would delete" if dry_run else "deleted"
    out(
        f"{verb} {count(len(report.items), 'run')}, freeing {_size(report.freed_bytes)}"
        + (" (dry run: nothing was deleted)" if dry_run else "")
    )
    for item in report.items:
        days = f"{item.age_days:.0f}d" if item.age_days >= 1 else f"{item.age_days * 24:.0f}h"
        out(f"  {item.status:<16} {days:>5} {_size(item.bytes):>9}  {item.run_id}")
        for target in item.targets:
            out(f"      {target}")
        if item.worktree is not None:
            out(f"      worktree {item.worktree.folder} and branch {item.worktree.name}")
        if item.snapshots_ref is not None:
            out(f"      snapshot ref {item.snapshots_ref}")
        for line in item.left:
            out(f"      left: {line}")
        if item.worktree_problem:
            err(f"warning: run {item.run_id}: {item.worktree_problem}")
    for path, why in report.skipped:
        err(f"skipped {path}: {why}")
    if report.kept:
        out(f"kept {count(report.kept, 'run')} whose status or age does not match")
    return 0
