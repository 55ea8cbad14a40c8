"""The dashboard's pages as HTML text: the runs list, a run's page, a worktree review.

Every string from a progress file passes ``html.escape`` (the run's own rendering is
``show.html``'s, the same as ``flow show --html``). The pages work without scripts: filters and
sorting are a GET form, actions are POST forms; ``script.js`` only adds live updates.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from html import escape
from pathlib import Path
from urllib.parse import quote, urlencode

from ..base.paths import display_path
from ..base.wording import count
from ..detect.prompt import format_age, format_cost
from ..progress.children import ChildNode
from ..progress.model import Run
from ..progress.state import RunState
from ..show.html import CSS, entries_html, output_block, run_header, run_title
from .actions import Process
from .runs import Row

_EXTRA_CSS = """
nav { display: flex; gap: 1rem; align-items: baseline; border-bottom: 1px solid var(--line);
  padding: .5rem 1.5rem; background: var(--soft); }
nav a { color: var(--accent); text-decoration: none; font-weight: 600; }
main.wide { max-width: 90rem; }
table.runs { width: 100%; font-size: .9rem; }
table.runs th { white-space: nowrap; }
table.runs tr.child td:first-child { padding-left: 1.5rem; }
table.runs tr.batch td { background: var(--soft); font-weight: 600; }
.needs { color: var(--bad); font-weight: 600; white-space: nowrap; }
.gone { color: var(--bad); } .alive { color: var(--ok); }
form.filters { display: flex; gap: .5rem; flex-wrap: wrap; align-items: end; margin: .5rem 0; }
.panel { border: 1px solid var(--line); border-radius: .4rem; padding: .5rem .75rem;
  margin: .75rem 0; background: var(--soft); }
.panel h2 { margin: .25rem 0 .5rem; font-size: 1.1rem; }
.note { border-left: 4px solid var(--accent); padding: .25rem .75rem; background: var(--soft); }
.note.error { border-color: var(--bad); }
textarea { width: 100%; min-height: 5rem; font: inherit; }
button { font: inherit; padding: .2rem .8rem; cursor: pointer; }
"""

#: Entries a run's page shows at first (the latest); a link shows the others.
WINDOW = 300
#: Columns the list sorts by: name → (label, key of a row).
SORTS = ("updated", "status", "workflow", "cost", "tokens", "steps")
#: Statuses the list filters by (effective ones, ``invalid`` for unreadable files).
FILTER_STATUSES = (
    "running",
    "interrupted",
    "awaiting_approval",
    "awaiting_input",
    "needs_review",
    "suspended",
    "failed",
    "budget_exhausted",
    "timeout",
    "paused",
    "completed",
    "invalid",
)


def document(title: str, body: str, *, live: str | None = None, wide: bool = False) -> str:
    """A whole page: the style, a navigation bar, ``body``; with ``live`` (an events URL)
    the script that keeps the page current."""
    script = ""
    if live is not None:
        script = (
            f'<div id="flow-live" hidden data-events="{escape(live)}"></div>'
            '<script src="/static/serve.js" defer></script>'
        )
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)} · flow serve</title>",
            f"<style>{CSS}{_EXTRA_CSS}</style>",
            script,
            '</head><body><nav><a href="/">flow runs</a></nav>',
            f'<main class="{"wide" if wide else ""}">{body}</main></body></html>\n',
        ]
    )


def run_url(key: str) -> str:
    """The run page's URL for a key (each path part quoted)."""
    return "/run/" + quote(key)


def _owner(row: Row) -> str:
    alive = row.summary.state.owner_alive
    if alive is None:
        return "—"
    return '<span class="alive">alive</span>' if alive else '<span class="gone">gone</span>'


def row_html(row: Row, *, child: bool = False) -> str:
    """One run as a table row."""
    s = row.summary
    state = s.state
    need = f'<span class="needs">{escape(row.needs)}</span>' if row.needs else ""
    reason = f" — {escape(state.reason)}" if state.reason else ""
    cls = ' class="child"' if child else ""
    return (
        f'<tr{cls} data-status="{escape(state.status)}" data-key="{escape(row.key)}">'
        f'<td><a href="{escape(run_url(row.key))}">{escape(s.run_id)}</a></td>'
        f"<td>{escape(s.workflow_name or s.workflow_path or '?')}</td>"
        f'<td><span class="status {escape(state.status)}">{escape(state.status)}</span>'
        f"{reason}</td>"
        f'<td class="num steps">{s.steps_done}/{s.steps_total}</td>'
        f'<td class="num">{s.tokens:,}</td><td class="num">{escape(format_cost(s.cost_usd))}</td>'
        f'<td title="{escape(s.updated or "")}">{escape(format_age(s.updated))}</td>'
        f"<td>{_owner(row)}</td><td>{need}</td></tr>"
    )


def _sort_key(name: str) -> object:
    def key(row: Row) -> object:
        s = row.summary
        return {
            "status": (s.state.status, s.run_id),
            "workflow": ((s.workflow_name or s.workflow_path or "").lower(), s.run_id),
            "cost": -s.cost_usd,
            "tokens": -s.tokens,
            "steps": (-s.steps_done, s.steps_total),
        }.get(name, 0)

    return key


def select_rows(
    rows: Sequence[Row], *, status: str, needs: bool, text: str, sort: str
) -> list[Row]:
    """The rows a list's filters keep, in the order asked (``updated``: the listing's own,
    unfinished first, newest first)."""
    kept = [
        r
        for r in rows
        if (not status or r.summary.state.status == status)
        and (not needs or r.needs is not None)
        and (
            not text
            or text.lower()
            in " ".join(
                [r.summary.run_id, r.summary.workflow_name or "", r.summary.workflow_path or ""]
            ).lower()
        )
    ]
    if sort in SORTS and sort != "updated":
        kept.sort(key=_sort_key(sort))  # type: ignore[arg-type]
    return kept


def _tokens(node: ChildNode) -> int:
    usage = node.total_usage()
    return usage.input_tokens + usage.output_tokens


def rows_html(rows: Sequence[Row]) -> str:
    """The list's table body: batches grouped with their rows, child runs under parents."""
    parts: list[str] = []
    batches: dict[str, list[Row]] = {}
    for row in rows:
        if row.batch is not None:
            batches.setdefault(row.batch, []).append(row)
    shown: set[str] = set()
    for row in rows:
        if row.batch is not None:
            if row.batch in shown:
                continue
            shown.add(row.batch)
            members = batches[row.batch]
            done = sum(1 for m in members if m.summary.status == "completed")
            parts.append(
                f'<tr class="batch"><td colspan="9">batch {escape(row.batch)}: '
                f"{done} of {len(members)} rows completed</td></tr>"
            )
            parts.extend(row_html(m, child=True) for m in members)
            continue
        parts.append(row_html(row))
        for node in row.children:
            parts.append(
                f'<tr class="child"><td>└ {escape(node.run_id or "-")}</td>'
                f"<td>step {escape(node.step)}"
                f"{' › agent ' + escape(node.agent) if node.agent else ''}</td>"
                f'<td><span class="status {escape(node.status)}">{escape(node.status)}</span>'
                f'</td><td class="num">{node.steps_done}/{node.steps_total}</td>'
                f'<td class="num">{_tokens(node):,}</td>'
                f'<td class="num">{escape(format_cost(node.total_usage().cost_usd))}</td>'
                "<td></td><td></td><td></td></tr>"
            )
    if not parts:
        parts.append('<tr><td colspan="9" class="empty">No runs match.</td></tr>')
    return "".join(parts)


def list_page(
    rows: Sequence[Row],
    folders: Sequence[Path],
    *,
    status: str,
    needs: bool,
    text: str,
    sort: str,
    trust: str | None = None,
) -> str:
    """The runs list with its filter form (a GET form: works without scripts); ``trust`` is
    whether the folder resumes run in may run its hooks and MCP servers (spec 10.9)."""
    kept = select_rows(rows, status=status, needs=needs, text=text, sort=sort)
    options = "".join(
        f'<option value="{s}"{" selected" if s == status else ""}>{s}</option>'
        for s in ("", *FILTER_STATUSES)
    )
    sorts = "".join(
        f'<option value="{s}"{" selected" if s == sort else ""}>{s}</option>' for s in SORTS
    )
    waiting = sum(1 for r in rows if r.needs is not None)
    query = urlencode({"status": status, "needs": "1" if needs else "", "q": text, "sort": sort})
    shown = [display_path(f) for f in folders]
    where = ", ".join("this folder" if p == "." else escape(p) for p in shown)
    body = (
        f'<h1>Runs</h1><p class="facts">{escape(count(len(rows), "run"))} in {where}; '
        f'<span id="waiting">{waiting}</span> need a person.</p>'
        + (f'<p class="facts" id="trust">trust: {escape(trust)}</p>' if trust else "")
        + '<form class="filters" method="get" action="/">'
        f'<label>status <select name="status">{options}</select></label>'
        f'<label><input type="checkbox" name="needs" value="1"{" checked" if needs else ""}> '
        "needs a person</label>"
        f'<label>search <input name="q" value="{escape(text)}"></label>'
        f'<label>sort <select name="sort">{sorts}</select></label>'
        "<button>Show</button></form>"
        '<table class="runs"><thead><tr><th>run</th><th>workflow / agent</th><th>status</th>'
        "<th>steps</th><th>tokens</th><th>cost</th><th>updated</th><th>owner</th>"
        f'<th>needs</th></tr></thead><tbody id="runs-body">{rows_html(kept)}</tbody></table>'
    )
    return document("Runs", body, live=f"/events/list?{query}", wide=True)


def note_html(note: str | None, error: bool = False) -> str:
    """The sentence an action left (what was recorded, or why it was refused)."""
    if not note:
        return ""
    return f'<p class="note{" error" if error else ""}" id="note">{escape(note)}</p>'


def _form(action: str, key: str, csrf: str, inner: str) -> str:
    return (
        f'<form method="post" action="/act/{action}/{escape(quote(key))}">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">{inner}</form>'
    )


def worktree_panel(run: Run, key: str, csrf: str, path: Path) -> str:
    """The run's worktree: review, and merge and discard when flow on this machine made the
    worktree and branch for this file (as ``flow merge`` and ``flow discard`` require), naming
    the folder and branch a discard removes; otherwise why they are refused."""
    from ..base.errors import FlowError
    from ..gitworktree import made_worktree

    tree = run.worktree
    if tree is None or tree.state == "discarded":
        return ""
    try:
        made = made_worktree(tree, run.run_id, path)
    except FlowError:
        made = None
    head = (
        f'<div class="panel" id="worktree"><h2>Worktree ({escape(tree.state)})</h2>'
        f'<p><a href="/review/{escape(quote(key))}">Review the changes</a> of branch '
        f"<code>{escape(tree.branch)}</code></p>"
    )
    if made is None:
        return (
            head + f'<p id="worktree-refused">flow did not make the worktree <code>'
            f"{escape(tree.path)}</code> and the branch <code>{escape(tree.branch)}</code> on "
            "this machine for this run (the file came from elsewhere, or was copied or "
            "moved): merge and discard are refused, as on the command line.</p></div>"
        )
    merge = ""
    if tree.state == "active":
        merge = _form(
            "merge",
            key,
            csrf,
            '<label><input type="checkbox" name="squash" value="1"> squash</label> '
            '<button id="merge">Merge</button>',
        )
    return (
        head
        + merge
        + _form(
            "discard",
            key,
            csrf,
            f'<p id="discard-what">Discard removes the worktree <code>{escape(made.folder)}'
            f"</code> and the branch <code>{escape(made.name)}</code>.</p>"
            '<label><input type="checkbox" name="confirm" value="1"> the changes will be '
            'gone</label> <button id="discard">Discard</button>',
        )
        + "</div>"
    )


def actions_panel(
    run: Run, state: RunState, key: str, csrf: str, process: Process | None, path: Path
) -> str:
    """What a person can do with the run now, as forms (one ``<div id="actions">``)."""
    parts: list[str] = []
    pending = [a for a in run.approvals if a.decision == "pending"]
    if state.status == "awaiting_approval" and pending:
        boxes = "".join(
            f'<p><label><input type="checkbox" name="call" value="{escape(a.call_id)}" checked> '
            f"<code>{escape(a.call_id)}</code> {escape(a.tool)} (step {escape(a.step)}, "
            f"{escape(a.why)})</label><br><code>{escape(a.preview)}</code></p>"
            for a in pending
        )
        reason = '<p><label>reason <input name="reason" size="60"></label></p>'
        parts.append(
            '<div class="panel" id="approvals"><h2>Tool calls waiting for approval</h2>'
            + _form("approve", key, csrf, boxes + reason + '<button id="approve">Approve</button>')
            + _form(
                "deny",
                key,
                csrf,
                "".join(
                    f'<input type="hidden" name="call" value="{escape(a.call_id)}">'
                    for a in pending
                )
                + '<p><label>reason (the model gets it) <input name="reason" size="60" '
                'required></label> <button id="deny">Deny all</button></p>',
            )
            + "</div>"
        )
    if state.status == "awaiting_input":
        parts.append(
            '<div class="panel" id="question"><h2>The run asks a question</h2>'
            "<p>The question is the last message of the conversation below.</p>"
            + _form(
                "answer",
                key,
                csrf,
                '<textarea name="text" required></textarea><button id="answer">Answer</button>',
            )
            + "</div>"
        )
    running_here = process is not None and process.running
    if state.resumable and not running_here:
        parts.append(
            '<div class="panel" id="resume-panel">'
            + _form("resume", key, csrf, '<button id="resume">Resume the run</button>')
            + "</div>"
        )
    parts.append(worktree_panel(run, key, csrf, path))
    parts.append(
        f'<p><a href="/export/{escape(quote(key))}" id="export">Export the HTML report</a></p>'
    )
    parts.append(
        f'<form method="get" action="/compare/{escape(quote(key))}" id="compare">'
        'Compare with git revision <input name="rev" size="12" placeholder="HEAD"> '
        'or another run <input name="with" size="30" placeholder="key from the list"> '
        "<button>Compare</button></form>"
    )
    return f'<div id="actions">{"".join(parts)}{process_html(process)}</div>'


def process_html(process: Process | None) -> str:
    """The output of the last ``flow resume`` started here for the run."""
    if process is None:
        return ""
    how = "running" if process.running else f"exit code {process.exit_code}"
    text = "\n".join(process.lines[-200:])
    return (
        f'<div class="panel" id="process"><h2>flow resume ({escape(how)})</h2>'
        f"<pre>{escape(text)}</pre></div>"
    )


def family_html(
    parent: str | None, children: Sequence[ChildNode], key_of: Callable[[Path], str | None]
) -> str:
    """Links to the run's parent (for a child run) and to its child runs (sub-workflows'
    steps and subagents, docs/spec.md 4.10 and 4.14), each child's own children under it."""
    parts: list[str] = []
    if parent is not None:
        parts.append(
            f'<p class="facts" id="parent">child of <a href="{escape(run_url(parent))}">'
            "the parent run</a></p>"
        )

    def items(nodes: Sequence[ChildNode]) -> str:
        out = []
        for node in nodes:
            key = key_of(node.path)
            name = escape(node.run_id or node.path.name)
            link = f'<a href="{escape(run_url(key))}">{name}</a>' if key else name
            what = f"step {escape(node.step)}" + (
                f" › agent {escape(node.agent)}" if node.agent else ""
            )
            out.append(
                f'<li>{link} — {what}: <span class="status {escape(node.status)}">'
                f"{escape(node.status)}</span> {node.steps_done}/{node.steps_total}"
                f"{'<ul>' + items(node.children) + '</ul>' if node.children else ''}</li>"
            )
        return "".join(out)

    if children:
        parts.append(f'<h2>Child runs</h2><ul id="children">{items(children)}</ul>')
    return "".join(parts)


def run_page(
    run: Run,
    state: RunState,
    *,
    key: str,
    path: Path,
    csrf: str,
    process: Process | None,
    note: str | None,
    error: bool,
    start: int | None = None,
    family: str = "",
    edited: Collection[int] = (),
) -> str:
    """A run's page: the same rendering as ``flow show --html`` with the actions above it,
    kept current by the events stream (``/events/run/KEY?from=N``). The conversation shows
    its last ``WINDOW`` entries (from ``start`` when given), with a link to the others."""
    total = len(run.transcript)
    first = max(0, total - WINDOW) if start is None else min(max(start, 0), total)
    earlier = ""
    if first:
        earlier = (
            f'<p class="cut" id="earlier">'
            f"{escape(count(first, 'earlier entry', 'earlier entries'))} not shown: "
            f'<a href="{escape(run_url(key))}?start=0">show them all</a>.</p>'
        )
    body = "".join(
        [
            note_html(note, error),
            run_header(run, state),
            family,
            actions_panel(run, state, key, csrf, process, path),
            "<h2>Conversation</h2>",
            earlier,
            '<div id="conversation">',
            entries_html(run, source=path.name, progress=path, start=first, edited=edited),
            "</div>",
            f"<footer>{escape(path.name)} · resume from a terminal with <code>flow resume "
            f"{escape(str(path))}</code></footer>",
        ]
    )
    events = f"/events/run/{quote(key)}?from={len(run.transcript)}"
    return document(f"{run_title(run)} · run {run.run_id}", body, live=events)


def review_page(key: str, title: str, stat: str, diff: str, facts: str) -> str:
    """``flow review`` as a page: the stat and the diff, coloured."""
    body = (
        f'<h1>Review: {escape(title)}</h1><p class="facts">{escape(facts)}</p>'
        f'<p><a href="{escape(run_url(key))}">back to the run</a></p>'
        f"<pre>{escape(stat)}</pre>{output_block(diff) if diff else '<p>no changes</p>'}"
    )
    return document(f"Review {title}", body)


def compare_page(key: str, title: str, markdown: str) -> str:
    """``flow diff`` as a page: its Markdown rendered as the report renders messages."""
    from ..show.html import markdown_html

    body = (
        f"<h1>Compare: {escape(title)}</h1>"
        f'<p><a href="{escape(run_url(key))}">back to the run</a></p>'
        f'<div id="diff">{markdown_html(markdown)}</div>'
    )
    return document(f"Compare {title}", body)


def message_page(title: str, text: str) -> str:
    """A page saying one thing (a refusal, a missing run)."""
    return document(title, f"<h1>{escape(title)}</h1>{note_html(text, True)}")
