"""A run as one self-contained HTML page: no scripts, fonts or images from the network.

The page holds a header with the run's facts, a time line chart of the steps (inline SVG: when
each ran, its turns, tokens and cost), and the conversation: messages rendered from Markdown
(raw HTML in them is shown as text, images as their alt text), tool calls on one line, tool
outputs in ``<details>`` blocks that open on a click, with diffs coloured line by line. Each
entry shows its first ``excerpt.ENTRY_LIMIT`` characters and says what was left out::

    Path("run.html").write_text(html_page(run, source="progress.md"), encoding="utf-8")

Given the progress file's path, a tool result's sidecar is shown too: a PNG, JPEG, GIF or WebP
image (its bytes checked against the recorded sha256 and its format) inline as a ``data:`` URI,
the only kind of image the page's policy allows; any other sidecar (SVG and HTML included,
which could carry scripts) as a link relative to the folder the page is written to.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
from collections.abc import Collection
from html import escape
from pathlib import Path
from typing import Any

from ..progress.model import Entry, Run
from ..progress.render import ROLE_LABELS, one_line
from ..progress.sidecar import read_checked
from ..progress.state import RunState
from ..run.handoffs import chain_line, chain_view
from .excerpt import Excerpt, excerpt, left_out_note
from .timeline import StepRow, duration_text, timeline

#: Tool outputs longer than this many lines start collapsed; shorter ones start open.
OPEN_LINES = 12
_DIFF = re.compile(r"^(?:diff --git |--- \S|@@ -\d)", re.MULTILINE)
#: Images shown inline, by sidecar extension: their media type and how their bytes begin.
#: Nothing else is inlined (an SVG can hold scripts).
INLINE_IMAGES = {
    ".png": ("image/png", (b"\x89PNG\r\n\x1a\n",)),
    ".jpg": ("image/jpeg", (b"\xff\xd8\xff",)),
    ".gif": ("image/gif", (b"GIF87a", b"GIF89a")),
    ".webp": ("image/webp", (b"RIFF",)),
}
#: Larger images are linked, not inlined (the page stays a reasonable size).
MAX_INLINE_BYTES = 4 * 1024 * 1024

_CSS = """
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg: #ffffff; --soft: #f6f8fa;
  --accent: #0969da; --ok: #1a7f37; --warn: #9a6700; --bad: #d1242f; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  color: var(--fg); background: var(--bg); }
main { max-width: 60rem; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
.facts { color: var(--muted); margin: 0 0 1rem; }
.status { font-weight: 600; padding: .1rem .5rem; border-radius: 1rem; background: var(--soft); }
.status.completed { color: var(--ok); } .status.failed, .status.needs_review { color: var(--bad); }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid var(--line); padding: .25rem .6rem; text-align: left;
  vertical-align: top; overflow-wrap: anywhere; }
td.num { text-align: right; white-space: nowrap; }
.chart { width: 100%; height: auto; border: 1px solid var(--line); border-radius: .4rem;
  background: var(--soft); }
.chart text { font: 12px sans-serif; fill: var(--fg); }
.chart .time { fill: var(--accent); } .chart .tokens { fill: #8250df; }
.entry { border: 1px solid var(--line); border-radius: .4rem; margin: .75rem 0; }
.entry > h3 { margin: 0; padding: .35rem .75rem; font-size: .9rem; background: var(--soft);
  border-bottom: 1px solid var(--line); border-radius: .4rem .4rem 0 0; }
.entry .body { padding: .25rem .75rem; overflow-x: auto; }
.entry.assistant > h3 { color: var(--ok); } .entry.user > h3 { color: var(--accent); }
.entry.tool_call > h3, .entry.tool_result > h3 { color: var(--warn); }
.entry.error > h3 { color: var(--bad); }
.entry.decision > h3 { color: var(--bad); } .entry.compaction > h3 { color: #8250df; }
pre { background: var(--soft); padding: .5rem .75rem; border-radius: .3rem; overflow-x: auto;
  font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 90%; }
details > summary { cursor: pointer; color: var(--muted); margin: .4rem 0; }
.diff .add { color: var(--ok); } .diff .del { color: var(--bad); }
.diff .hunk { color: var(--accent); }
.empty, .cut { color: var(--muted); font-style: italic; }
.entry.edited { border: 2px dashed var(--warn); }
.sidecar img { max-width: 100%; height: auto; border: 1px solid var(--line); }
footer { color: var(--muted); font-size: .85rem; margin-top: 2rem; }
"""


@functools.lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # Raw HTML is shown as text and images as their text: the page loads nothing.
    return MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")


def markdown_html(text: str) -> str:
    """``text`` rendered from Markdown as the report renders a message: raw HTML as text,
    images as their text."""
    return str(_markdown().render(text))


def _lines(content: str) -> list[str]:
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _line_count(content: str) -> int:
    """``len(_lines(content))`` without splitting a long output."""
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)


def _cut_note(part: Excerpt, entry: Entry, source: str) -> str:
    if not part.left_out_chars:
        return ""
    return f'<p class="cut">{escape(left_out_note(part, entry.id, source))}</p>'


def _output_block(content: str) -> str:
    """A tool output as a ``<pre>``, diffs coloured per line."""
    if _DIFF.search(content):
        rows = []
        for line in _lines(content):
            cls = ""
            if line.startswith("+") and not line.startswith("+++"):
                cls = "add"
            elif line.startswith("-") and not line.startswith("---"):
                cls = "del"
            elif line.startswith("@@"):
                cls = "hunk"
            text = escape(line)
            rows.append(f'<span class="{cls}">{text}</span>' if cls else text)
        return '<pre class="diff">' + "\n".join(rows) + "</pre>"
    return "<pre>" + escape(content) + "</pre>"


def output_block(content: str) -> str:
    """A tool output (or any diff) as an escaped ``<pre>``, diffs coloured per line."""
    return _output_block(content)


class _Sidecars:
    """Where a page finds sidecars (beside ``progress``) and links them (from ``out_dir``)."""

    def __init__(self, progress: Path, out_dir: Path | None) -> None:
        self.progress = progress
        self.out_dir = out_dir

    def html(self, entry: Entry) -> str:
        """The entry's sidecar as an inline image, or a link to it."""
        assert entry.sidecar is not None
        name = entry.sidecar.rsplit("/", 1)[-1]
        ext = os.path.splitext(name)[1].lower()
        size = entry.sidecar_bytes
        image = INLINE_IMAGES.get(ext)
        if image is not None and (size is None or size <= MAX_INLINE_BYTES):
            data, _ = read_checked(self.progress, entry)
            media_type, magic = image
            if data is not None and data.startswith(magic):
                uri = f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
                alt = f"image {name} returned by {entry.tool or 'a tool'} ({len(data):,} bytes)"
                return f'<p class="sidecar"><img src="{uri}" alt="{escape(alt)}"></p>'
        target = self.progress.parent / entry.sidecar
        href = os.path.relpath(target, self.out_dir) if self.out_dir else entry.sidecar
        href = Path(href).as_posix()
        what = f"{size:,} bytes" if size is not None else "size unknown"
        return (
            f'<p class="sidecar">sidecar: <a href="{escape(href)}">{escape(name)}</a> ({what})</p>'
        )


def _entry(
    entry: Entry, source: str, sidecars: _Sidecars | None = None, edited: bool = False
) -> str:
    label = f"{entry.id} · {ROLE_LABELS.get(entry.role, entry.role)}"
    if entry.step:
        label += f" · {one_line(entry.step, 80)}"
    if edited:
        # Its text no longer matches the digest flow recorded: a person changed it.
        label += " · edited by hand"
    covers = ""
    if entry.covers is not None:
        first, last = entry.covers
        # Linked, so a reader goes straight to what the summary stands for.
        covers = (
            f' · stands for entries <a href="#entry-{first}">{first}</a>–'
            f'<a href="#entry-{last}">{last}</a> in requests'
        )
    classes = ["entry", entry.role] + (["error"] if entry.is_error else [])
    classes += ["edited"] if edited else []
    if entry.role == "tool_call":
        args = escape(one_line(entry.content[:2000], 300)) if entry.content else ""
        body = f"<p>→ <code>{escape(entry.tool or '?')}</code>(<code>{args}</code>)</p>"
        if entry.content and "\n" in entry.content.strip():
            part = excerpt(entry.content)
            body += (
                f"<details><summary>arguments</summary>{_output_block(part.text)}"
                f"{_cut_note(part, entry, source)}</details>"
            )
    elif entry.role == "tool_result":
        count = _line_count(entry.content)
        what = "error output" if entry.is_error else "output"
        if entry.sidecar:
            what += f" (preview; full output in {escape(entry.sidecar)})"
        if not count:
            body = f'<p class="empty">← {escape(entry.tool or "?")}: no output</p>'
        else:
            opened = " open" if count <= OPEN_LINES else ""
            summary = (
                f"← <code>{escape(entry.tool or '?')}</code> {what}: {count:,} "
                f"line{'s' if count != 1 else ''}"
            )
            part = excerpt(entry.content)
            body = f"<details{opened}><summary>{summary}</summary>"
            body += _output_block(part.text) + _cut_note(part, entry, source) + "</details>"
        if entry.sidecar and sidecars is not None:
            body += sidecars.html(entry)
    elif entry.content:
        part = excerpt(entry.content)
        body = markdown_html(part.text) + _cut_note(part, entry, source)
    else:
        body = '<p class="empty">(no text)</p>'
    return (
        f'<section class="{" ".join(classes)}" id="entry-{entry.id}" data-role="{entry.role}">'
        f'<h3>{escape(label)}{covers}</h3><div class="body">{body}</div></section>'
    )


def _chart(rows: list[StepRow]) -> str:
    """Steps on a time line (top bar: when and how long) with their tokens (lower bar)."""
    if not rows:
        return ""
    width, left, row_h = 900, 150, 46
    plot = width - left - 230
    span = max(((r.offset or 0) + (r.seconds or 0) for r in rows), default=0.0)
    most = max((r.tokens for r in rows), default=0) or 1
    height = row_h * len(rows) + 30
    parts = [
        f'<svg class="chart" id="timeline" viewBox="0 0 {width} {height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="Steps on a time line">'
    ]
    for i, r in enumerate(rows):
        y = 10 + i * row_h
        if r.offset is not None and r.seconds is not None:
            x = left + (r.offset / span * plot if span > 0 else 0)
            w = max(3.0, r.seconds / span * plot if span > 0 else plot)
        else:
            x, w = left, 0.0
        tw = max(2.0, r.tokens / most * plot) if r.tokens else 0.0
        facts = (
            f"{duration_text(r.seconds)} · {r.turns} turn{'s' if r.turns != 1 else ''} · "
            f"{r.tokens:,} tokens · ${r.cost_usd:.4f}"
        )
        parts.append(
            f'<g class="step" data-step="{escape(r.step)}" data-status="{escape(r.status)}">'
            f"<title>{escape(r.step)}: {escape(r.status)}, {escape(facts)}</title>"
            f'<text x="8" y="{y + 14}">{escape(one_line(r.step, 20))}</text>'
            f'<text x="8" y="{y + 30}" fill="#59636e">{escape(r.status)}</text>'
            f'<rect class="time" x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="16" rx="3"/>'
            f'<rect class="tokens" x="{left}" y="{y + 22}" width="{tw:.1f}" height="8" rx="2"/>'
            f'<text x="{left + plot + 12}" y="{y + 20}">{escape(facts)}</text></g>'
        )
    axis_y = height - 8
    parts.append(
        f'<text x="{left}" y="{axis_y}" fill="#59636e">0s</text>'
        f'<text x="{left + plot}" y="{axis_y}" text-anchor="end" fill="#59636e">'
        f"{duration_text(span)} · blue: time, purple: tokens</text></svg>"
    )
    return "".join(parts)


def _chain(run: Run) -> str:
    """The handoff chain in one line (docs/spec.md 4.13); "" for a run without one."""
    chain = chain_view(run)
    if chain is None:
        return ""
    return f'<p class="facts" id="handoffs">handoffs: {escape(chain_line(chain))}</p>'


def _steps_table(rows: list[StepRow]) -> str:
    head = (
        "<tr><th>Step</th><th>Status</th><th>Start</th><th>Time</th><th>Turns</th>"
        "<th>Tool calls</th><th>Tokens</th><th>Cost</th></tr>"
    )
    body = "".join(
        f"<tr><td>{escape(r.step)}</td><td>{escape(r.status)}</td>"
        f'<td class="num">{"—" if r.offset is None else "+" + duration_text(r.offset)}</td>'
        f'<td class="num">{duration_text(r.seconds)}</td><td class="num">{r.turns}</td>'
        f'<td class="num">{r.tool_calls}</td><td class="num">{r.tokens:,}</td>'
        f'<td class="num">${r.cost_usd:.4f}</td></tr>'
        for r in rows
    )
    return f'<table id="steps">{head}{body}</table>'


#: The report's policy: nothing may load from anywhere, the page is one file, readable offline.
REPORT_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
#: The page's style sheet, for pages that embed a run (``flow serve``).
CSS = _CSS


def run_header(run: Run, state: RunState | None = None) -> str:
    """The run's title, status, facts, handoff chain, last error and steps (chart and table):
    the part of the page that changes as a run goes on, in one ``<div id="run-head">``."""
    status, why = (state.status, state.reason) if state is not None else (run.status, run.reason)
    title = run_title(run)
    u = run.usage
    rows = timeline(run, status)
    facts = (
        f"step {run.cursor.index} of {run.step_counts()[1]} · {u.turns:,} turns · "
        f"{u.input_tokens:,} input + {u.output_tokens:,} output tokens · ${u.cost_usd:.4f} · "
        f"{len(run.transcript):,} entries · created {run.created} · updated {run.updated}"
    )
    reason = f" — {escape(one_line(why, 300))}" if why else ""
    error = ""
    if run.last_error is not None:
        e = run.last_error
        error = (
            f'<p class="status failed">last error: {escape(e.type)}: '
            f"{escape(one_line(e.message, 500))}</p>"
        )
    return "".join(
        [
            '<div id="run-head">',
            f"<h1>{escape(title)} · run {escape(run.run_id)}</h1>",
            f'<p class="facts"><span class="status {escape(status)}" id="status">'
            f"{escape(status)}</span>{reason}</p>",
            f'<p class="facts" id="facts">{escape(facts)}</p>',
            _chain(run),
            error,
            "<h2>Steps</h2>" + _chart(rows) + _steps_table(rows) if rows else "",
            "</div>",
        ]
    )


def run_title(run: Run) -> str:
    """The run's workflow name (or its file name), as the page's title shows it."""
    return run.title()


def entries_html(
    run: Run,
    *,
    source: str = "progress.md",
    progress: Path | None = None,
    out_dir: Path | None = None,
    start: int = 0,
    edited: Collection[int] = (),
) -> str:
    """The conversation's entries from ``start`` on, one ``<section>`` each; the entries
    whose ids are in ``edited`` (``LoadReport.edited_entries``) are marked as edited by hand
    (see ``html_page`` for ``progress`` and ``out_dir``)."""
    sidecars = _Sidecars(progress, out_dir) if progress is not None else None
    marked = frozenset(edited)
    return "".join(_entry(e, source, sidecars, e.id in marked) for e in run.transcript[start:])


def run_body(
    run: Run,
    *,
    source: str = "progress.md",
    state: RunState | None = None,
    progress: Path | None = None,
    out_dir: Path | None = None,
    edited: Collection[int] = (),
) -> str:
    """The page's content without the document around it: header, steps and conversation,
    for a page that embeds a run (``flow serve``); ``html_page`` wraps it in a document."""
    return "".join(
        [
            run_header(run, state),
            '<h2>Conversation</h2><div id="conversation">',
            entries_html(run, source=source, progress=progress, out_dir=out_dir, edited=edited),
            "</div>",
        ]
    )


def html_page(
    run: Run,
    *,
    source: str = "progress.md",
    state: RunState | None = None,
    progress: Path | None = None,
    out_dir: Path | None = None,
    edited: Collection[int] = (),
) -> str:
    """The whole page for ``run``; ``source`` names the progress file in the footer.

    ``state`` is its effective state (``progress.state``); without it the recorded status.
    With ``progress`` (the file's path) sidecars are shown: images inline, others linked
    relative to ``out_dir`` (the page's folder; the progress file's folder when None).
    Entries whose ids are in ``edited`` are marked as edited by hand.
    """
    status = state.status if state is not None else run.status
    meta = json.dumps({"run_id": run.run_id, "status": status}).replace("<", "\\u003c")
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{REPORT_POLICY}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(run_title(run))} · run {escape(run.run_id)}</title>",
            f"<style>{_CSS}</style></head><body><main>",
            run_body(
                run, source=source, state=state, progress=progress, out_dir=out_dir, edited=edited
            ),
            f"<footer>Generated by <code>flow show --html</code> from {escape(source)}; "
            f"resume the run with <code>flow resume {escape(source)}</code>.</footer>",
            f'<script type="application/json" id="flow-run">{meta}</script>',
            "</main></body></html>\n",
        ]
    )
