"""A run in the terminal: a header, the step time line, and the conversation rendered as
Markdown with tool outputs collapsed to their first lines (rich)::

    console.print(terminal_view(run, result_lines=5))
"""

from __future__ import annotations

import re

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ..base.printing import visible
from ..progress.filesnapshots import FileSnapshot
from ..progress.model import Entry, Run, attempt_models_text
from ..progress.render import ROLE_LABELS, one_line
from ..progress.state import RunState
from ..run.handoffs import chain_line, chain_view
from .excerpt import excerpt, left_out_note
from .timeline import duration_text, timeline

#: Width of the bars in the time line column.
BAR_WIDTH = 20


def safe(text: str) -> str:
    """``text`` with the characters a terminal would act on made visible (``printing``): a
    progress file may come from anyone, and this view may be printed by any console."""
    return visible(text)


_ROLE_STYLES = {
    "system": "magenta",
    "user": "cyan",
    "assistant": "green",
    "tool_call": "yellow",
    "tool_result": "yellow",
    "note": "blue",
    "compaction": "blue",
    "decision": "red",
}


def _bar(offset: float | None, seconds: float | None, span: float) -> str:
    """The step's place on the run's time line: spaces before, blocks while it ran."""
    if offset is None or seconds is None:
        return ""
    if span <= 0:  # every step within the same second
        return "█"
    start = min(BAR_WIDTH - 1, int(offset / span * BAR_WIDTH))
    length = max(1, round(seconds / span * BAR_WIDTH))
    return " " * start + "█" * min(length, BAR_WIDTH - start)


def timeline_table(run: Run, run_status: str | None = None) -> Table:
    """The steps with their status (as shown for a run in ``run_status``, its effective
    status), time, turns, tool calls, tokens and cost."""
    rows = timeline(run, run_status)
    span = max(((r.offset or 0) + (r.seconds or 0) for r in rows), default=0.0)
    table = Table(title="Steps", title_justify="left", expand=False)
    table.add_column("Step", overflow="fold")
    table.add_column("Status", no_wrap=True)
    for name in ("Start", "Time", "Turns", "Tools", "Tokens", "Cost"):
        table.add_column(name, justify="right", no_wrap=True)
    # The bar gives way first on a narrow terminal (cut at its right end).
    table.add_column("Timeline", no_wrap=True, overflow="crop")
    for r in rows:
        table.add_row(
            safe(r.step),
            r.status,
            "—" if r.offset is None else f"+{duration_text(r.offset)}",
            duration_text(r.seconds),
            str(r.turns),
            str(r.tool_calls),
            f"{r.tokens:,}",
            f"${r.cost_usd:.4f}",
            _bar(r.offset, r.seconds, span),
        )
    return table


#: An edit's diff is shown whole up to this many lines (other outputs: ``--lines``), since
#: the change is what a reader of an edit wants to see.
DIFF_LINES = 200
# The edit tools end their result with a ``diff`` code block (tools/edit.py).
_DIFF_FENCE = re.compile(r"^`{3,}diff$", re.MULTILINE)
_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("+", "green"), ("-", "red"), ("@@", "cyan"))


def _diff_style(line: str) -> str:
    return next((style for start, style in _DIFF_STYLES if line.startswith(start)), "")


#: Characters of one line of tool output shown (the rest: an ellipsis).
LINE_CHARS = 200


def output_line(line: str, limit: int = LINE_CHARS) -> str:
    """One line of tool output as the terminal shows it: every space kept (indentation is
    what code and JSON read by), tabs as spaces to the next multiple of 4, the characters a
    terminal would act on made visible, cut at ``limit`` characters with an ellipsis."""
    text = safe(line[:1000].rstrip("\r").expandtabs(4)).rstrip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _collapsed(content: str, lines: int, *, diff: bool = False) -> RenderableType:
    """The first ``lines`` lines of a tool output, and how many were left out; a ``diff``'s
    lines are coloured (added green, removed red)."""
    if not content:
        return Text("(no output)", style="italic dim")
    # Only the lines shown are split off (and each cut to 200 characters), so a long output
    # costs one count of its line ends; at most ENTRY_LIMIT characters of it are shown.
    total = content.count("\n") + (0 if content.endswith("\n") else 1)
    part = excerpt(content).text
    head = part.split("\n", lines)[:lines]
    if len(head) > part.count("\n") + (0 if part.endswith("\n") else 1):
        head.pop()  # the empty "line" after the last line end
    if diff:
        text = Text(no_wrap=True, overflow="ellipsis")
        for n, line in enumerate(head):
            if n:
                text.append("\n")
            start = len(text)
            text.append(output_line(line))
            text.stylize(_diff_style(line), start, len(text))
    else:
        shown = "\n".join(output_line(line) for line in head)
        text = Text(shown, style="dim", no_wrap=True, overflow="ellipsis")
    hidden = total - len(head)
    if hidden > 0:
        text.append(f"\n… {hidden:,} more line{'s' if hidden != 1 else ''}", style="italic")
    return text


def files_line(snap: FileSnapshot) -> str:
    """What one call did to the files, for people: ``files: +new.txt ~a.txt -old.txt
    a.txt→b.txt (+3 -1) · snapshot 1a2b3c4d5e6f``."""
    if snap.commit is None:
        return "files: snapshot due (taken when the run resumes)"
    names = [
        *(f"+{p}" for p in snap.added),
        *(f"~{p}" for p in snap.modified),
        *(f"-{p}" for p in snap.deleted),
        *(f"{a}→{b}" for a, b in snap.renamed),
    ]
    if snap.more:
        names.append(f"and {snap.more} more")
    listed = " ".join(names) if names else "none changed"
    stat = f" ({snap.stat})" if snap.stat else ""
    late = " (taken late, on resume)" if snap.late else ""
    return f"files: {listed}{stat} · snapshot {snap.commit[:12]}{late}"


def entry_view(
    entry: Entry,
    *,
    result_lines: int = 5,
    source: str = "the progress file",
    snapshot: FileSnapshot | None = None,
) -> RenderableType:
    """One transcript entry: a rule naming it, then its content (its first ``ENTRY_LIMIT``
    characters and a line saying what was left out; ``source`` names the file); a tool
    result with a file ``snapshot`` adds the files its call changed."""
    label = f"{entry.id} · {ROLE_LABELS.get(entry.role, entry.role)}"
    if entry.step:
        label += f" · {one_line(entry.step, 60)}"
    if entry.covers is not None:
        label += f" · stands for entries {entry.covers[0]}–{entry.covers[1]} in requests"
    rule = Rule(Text(label, style=f"bold {_ROLE_STYLES.get(entry.role, '')}"), align="left")
    if entry.role == "tool_call":
        args = one_line(entry.content[:1000], 160) if entry.content else ""
        body: RenderableType = Text.assemble(
            ("→ ", "yellow"), (safe(entry.tool or "?"), "bold"), (f"({args})", "")
        )
    elif entry.role == "tool_result":
        head = Text.assemble(("← ", "yellow"), (safe(entry.tool or "?"), "bold"))
        if entry.is_error:
            head.append(" error", style="bold red")
        if entry.sidecar:
            head.append(f" · full output in {safe(entry.sidecar)}", style="italic")
        diff = not entry.is_error and _DIFF_FENCE.search(entry.content) is not None
        shown = max(result_lines, DIFF_LINES) if diff else result_lines
        body = Group(head, _collapsed(entry.content, shown, diff=diff))
        if snapshot is not None:
            body = Group(body, Text(safe(one_line(files_line(snapshot), 2000)), style="cyan"))
    elif entry.content:
        part = excerpt(entry.content)
        body = Markdown(safe(part.text))
        if part.left_out_chars:
            note = Text(left_out_note(part, entry.id, source), style="italic")
            body = Group(body, note)
    else:
        body = Text("(no text)", style="italic dim")
    return Group(rule, body)


def terminal_view(
    run: Run,
    *,
    result_lines: int = 5,
    state: RunState | None = None,
    source: str = "the progress file",
) -> RenderableType:
    """The whole run for a terminal: header, step time line, conversation. ``state`` is the
    run's effective state (``progress.state``); without it the recorded status is shown.
    ``source`` names the progress file where a cut entry is whole."""
    header = Text(safe(f"{run.title()} · run {run.run_id}"), style="bold")
    done = run.status == "completed"
    status = Text("status: ", style="bold green" if done else "bold yellow")
    if state is not None:
        status.append(safe(one_line(state.text(), 300)))
    else:
        status.append(run.status)
        if run.reason:
            status.append(f" — {one_line(run.reason, 200)}", style="")
    u = run.usage
    total = run.step_counts()[1]
    facts = Text(
        f"step {run.cursor.index} of {total} · {u.turns:,} turns · "
        f"{u.input_tokens:,} input + {u.output_tokens:,} output tokens · ${u.cost_usd:.4f} · "
        f"{len(run.transcript):,} entries · {len(run.attempts)} attempt"
        f"{'s' if len(run.attempts) != 1 else ''}"
    )
    parts: list[RenderableType] = [header, status, facts]
    chain = chain_view(run)
    if chain is not None:
        parts.append(Text(safe(f"handoffs: {one_line(chain_line(chain), 600)}")))
    if run.config.models:
        parts.append(Text(safe(one_line(_models_line(run), 600))))
    parts.append(Text())
    if run.steps:
        parts += [timeline_table(run, state.status if state else None), Text()]
    parts.append(Rule(Text("Conversation", style="bold")))
    # A call's record (one without a call holds the files as an attempt found them).
    calls = run.snapshots.calls if run.snapshots is not None else []
    snaps = {s.entry: s for s in calls if s.call_id is not None}
    parts += [
        entry_view(e, result_lines=result_lines, source=source, snapshot=snaps.get(e.id))
        for e in run.transcript
    ]
    if run.last_error is not None:
        e = run.last_error
        message = f"last error: {one_line(e.type, 80)}: {one_line(e.message, 300)}"
        parts.append(Text(message, style="red"))
    return Group(*parts)


def _models_line(run: Run) -> str:
    """The run's models in the order tried, and what each attempt did with them."""
    line = "models: " + " → ".join(m or "(default)" for m in run.config.model_order())
    done = [
        f"attempt {a.n}: {attempt_models_text(a)}" for a in run.attempts if a.model or a.refused
    ]
    return line + (" · " + " · ".join(done) if done else "")
