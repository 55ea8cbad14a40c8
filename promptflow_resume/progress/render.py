"""Writing a ``Run`` as ``progress.md``: YAML front matter plus a readable Markdown body.

The body opens with a short note for readers (a blockquote), then four sections, each opened by
an HTML comment marker that GitHub does not show: execution metadata, configuration,
conversation and execution state, then an end marker. Only the conversation is read back; the
other sections are generated from the front matter. Each transcript entry is a marker comment
(its id, role, fields and digest), a heading, and its content in one of these forms:

- *raw*: a message written as Markdown (its headings, lists and code blocks render as such),
  unless it would break the file's structure or not read back exactly (``rawtext``);
- *one line*: an empty message, a tool call whose arguments fit on one line, an empty result;
- *fenced*: a backtick fence longer than any backtick run inside (tool outputs, and messages
  that cannot be raw);
- *escaped*: a fence of JSON string literals, one per line, for content no fence can carry
  exactly (CR, other control characters, lone surrogates, U+2028/U+2029).

``parse(render(run)) == run`` holds for every run (property-tested)::

    text = render(run)
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from typing import Any
from urllib.parse import quote

from ..base import yamlio
from ..base.textnorm import without_surrogates
from .digest import Chain, entry_digest
from .frontmatter import front_matter
from .model import Entry, Run, Usage, attempt_models_text
from .rawtext import EMPTY_MESSAGE, outline_safe, structure_safe

ROLE_LABELS: dict[str, str] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool_call": "tool call",
    "tool_result": "tool result",
    "note": "note from flow",
    "compaction": "compaction summary",
    "decision": "recovery decision",
}
TOOL_ROLES = frozenset({"tool_call", "tool_result"})
ESCAPED_INFO = "flow-escaped"
#: Tool-call arguments up to this long, on one line, are shown on the call's line.
INLINE_ARGUMENTS_LIMIT = 200
#: What a tool call's line says after ``… with`` when its arguments follow in a fence.
FENCED_ARGUMENTS = " these arguments:"
#: What follows the result line of a tool that printed nothing.
EMPTY_RESULT = "_(no output)_"
SECTION_NOTES: dict[str, str] = {
    "metadata": "generated from the front matter; edits here have no effect",
    "configuration": "generated from the front matter; edits here have no effect",
    "conversation": (
        "read back on resume: edit the text of an entry to change what the model sees next; "
        "keep the flow:entry lines"
    ),
    "state": "generated from the front matter; edits here have no effect",
}
CONVERSATION_HEADING = "## Conversation"
EMPTY_CONVERSATION = "_No entries yet._"

# Characters a fence cannot carry exactly: CR and other controls (a CommonMark parser or an
# editor would treat them as line ends or drop them), C1 controls, Unicode line/paragraph
# separators, and lone surrogates (not encodable as UTF-8).
_NEEDS_ESCAPE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_BACKTICKS = re.compile(r"`+")
_DISPLAY_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]+")
# Marker values keep these characters as they are; everything else is percent-encoded.
_MARKER_SAFE = "_.:/~+@,"
# A value made only of characters ``quote`` keeps (letters, digits, "-" and the safe ones)
# is written as it is, unless it holds "--".
_MARKER_PLAIN = re.compile(r"[A-Za-z0-9_.:/~+@,\-]*")


def needs_escape(content: str) -> bool:
    """True when ``content`` holds characters only the escaped form carries exactly."""
    return _NEEDS_ESCAPE.search(content) is not None


def raw_ok(content: str) -> bool:
    """True when ``content`` can be written as plain Markdown and read back unchanged."""
    return _NEEDS_ESCAPE.search(content) is None and structure_safe(content)


def inline_arguments_ok(content: str, limit: int = INLINE_ARGUMENTS_LIMIT) -> bool:
    """True when tool-call arguments fit in one code span on the call's line, exactly."""
    return (
        0 < len(content) <= limit
        and content.isprintable()
        and "`" not in content
        and content == content.strip()
    )


def escape_lines(content: str) -> list[str]:
    """``content`` as JSON string literals, one per line of the original (newline kept)."""
    pieces = re.findall(r"[^\n]*\n|[^\n]+", content)
    out = []
    for piece in pieces:
        text = json.dumps(piece, ensure_ascii=False)
        out.append(_NEEDS_ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))
    return out


def fence_block(content: str, info: str) -> str:
    """``content`` in a backtick fence (escaped form when needed); no trailing newline."""
    if needs_escape(content):
        body = "\n".join(escape_lines(content))
        info = ESCAPED_INFO
    else:
        body = content
    longest = max(map(len, _BACKTICKS.findall(body))) if "`" in body else 0
    fence = "`" * max(3, longest + 1)
    if not body:
        return f"{fence}{info}\n{fence}"
    return f"{fence}{info}\n{body}\n{fence}"


def marker_value(value: str) -> str:
    """A field value as written inside an entry marker (no spaces, no ``--``, no ``>``)."""
    if _MARKER_PLAIN.fullmatch(value) and "--" not in value:
        return value  # what quote() returns for it, without its per-call set-up
    encoded = quote(value.encode("utf-8", "surrogatepass"), safe=_MARKER_SAFE + "-")
    while "--" in encoded:
        encoded = encoded.replace("--", "-%2D")
    return encoded


def entry_marker(entry: Entry, digest: str) -> str:
    """The ``<!-- flow:entry ... -->`` line that carries an entry's fields and digest."""
    fields = ""
    if entry.step is not None:
        fields += f" step={marker_value(entry.step)}"
    if entry.call_id is not None:
        fields += f" call={marker_value(entry.call_id)}"
    if entry.tool is not None:
        fields += f" tool={marker_value(entry.tool)}"
    if entry.is_error:
        fields += " error"
    if entry.sidecar is not None:
        fields += f" sidecar={marker_value(entry.sidecar)}"
    if entry.sidecar_sha256 is not None:
        fields += f" sha256={marker_value(entry.sidecar_sha256)}"
    if entry.sidecar_bytes is not None:
        fields += f" bytes={entry.sidecar_bytes}"
    if entry.covers is not None:
        fields += f" covers={entry.covers[0]}-{entry.covers[1]}"
    if entry.meta is not None:
        for key, value in entry.meta.fields():
            fields += f" {key}={marker_value(value)}"
    return f"<!-- flow:entry {entry.id} {entry.role}{fields} d={digest} -->"


def one_line(text: str, limit: int = 160) -> str:
    """``text`` squeezed onto one display line (controls and newlines become spaces), cut
    at a word boundary when it is longer than ``limit``."""
    flat = _DISPLAY_CONTROL.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit * 2 // 3:  # a word boundary not too far back: never half a word
        cut = cut[:space].rstrip(" ,;")
    return cut + "…"


def entries_phrase(ids: list[int]) -> str:
    """``entry 3``, ``entries 3 and 5``, ``entries 3, 5 and 8``: ids as a reader says them."""
    if len(ids) == 1:
        return f"entry {ids[0]}"
    return "entries " + ", ".join(map(str, ids[:-1])) + f" and {ids[-1]}"


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(text: str, limit: int = 160) -> str:
    """``text`` as an inline code span that survives any backticks inside."""
    if (
        0 < len(text) <= limit
        and "`" not in text
        and text.isprintable()
        and text[0] != " "
        and text[-1] != " "
    ):
        # Printable text has no controls, and the only printable whitespace is " ", so
        # one_line() would return it unchanged and one backtick suffices.
        return f"`{text}`"
    flat = one_line(text, limit)
    longest = max((len(m) for m in _BACKTICKS.findall(flat)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def cell(text: str, limit: int = 160) -> str:
    """``text`` safe inside a Markdown table cell."""
    return _html(one_line(text, limit)).replace("|", "\\|")


@functools.lru_cache(maxsize=1024)
def heading_label(role: str, step: str | None) -> str:
    """What an entry's heading says after its id: ``assistant · inspect``."""
    label = ROLE_LABELS.get(role, role)
    return label if step is None else f"{label} · {_html(one_line(step, 80))}"


def heading(entry: Entry) -> str:
    """The heading line of an entry: ``### 12 · assistant · inspect``."""
    return f"### {entry.id} · {heading_label(entry.role, entry.step)}"


def tool_line(entry: Entry) -> str:
    """The generated line above a tool call's arguments or a tool result's output."""
    before, after = tool_line_around_call(
        entry.role, entry.tool, entry.is_error, entry.sidecar, entry.sidecar_bytes
    )
    return f"{before}{code(entry.call_id or '?', 80)}{after}"


def tool_line_around_call(
    role: str, tool: str | None, is_error: bool, sidecar: str | None, sidecar_bytes: int | None
) -> tuple[str, str]:
    """``tool_line`` of a tool entry without its call id: the text before and after the call
    id's code span. Entries of one tool share it, so a reader builds it once per run."""
    tool_code = code(tool or "?", 80)
    if role == "tool_call":
        return "Call ", f" to {tool_code} with{FENCED_ARGUMENTS}"
    after = " · **error**" if is_error else ""
    if sidecar is not None:
        link = quote(sidecar, safe="/._-~")
        size = f"{sidecar_bytes:,} bytes" if sidecar_bytes is not None else "size ?"
        after += (
            f" · full output in [{_html(one_line(sidecar, 120))}]({link})"
            f" ({size}); the text below is a preview"
        )
    return f"Result of {tool_code} for call ", f"{after}:"


def call_line(entry: Entry) -> str | None:
    """The one line that shows a tool call whole, or None when its arguments need a fence."""
    if entry.content and not inline_arguments_ok(entry.content):
        return None
    head = call_head(entry)
    return f"{head} `{entry.content}`." if entry.content else f"{head} no arguments."


def call_head(entry: Entry) -> str:
    """The start of a tool call's line: ``Call `id` to `tool` with``."""
    return f"Call {code(entry.call_id or '?', 80)} to {code(entry.tool or '?', 80)} with"


def _result_info(content: str) -> str:
    """The fence language of a tool's output: ``json`` when it is a JSON document."""
    if content[:1] in "{[" and content[-1:] in "}]":
        try:
            json.loads(content)
        except ValueError:
            return "text"
        return "json"
    return "text"


def entry_block(entry: Entry, digest: str) -> str:
    """One transcript entry as written in the body (ends with a blank line)."""
    role = entry.role
    content = entry.content
    if role == "tool_call":
        line = call_line(entry)
        text = line if line is not None else f"{tool_line(entry)}\n\n{fence_block(content, 'json')}"
    elif role == "tool_result":
        if content:
            text = f"{tool_line(entry)}\n\n{fence_block(content, _result_info(content))}"
        else:
            text = f"{tool_line(entry)} {EMPTY_RESULT}"
    elif not content:
        text = EMPTY_MESSAGE
    elif raw_ok(content) and (role != "system" or outline_safe(content)):
        # An agent's instructions with `# Workflow` headings would sit at the level of the
        # run's own sections: fenced, the file's outline stays the run's.
        text = content
    else:
        text = fence_block(content, "markdown")
    return f"{entry_marker(entry, digest)}\n{heading(entry)}\n\n{text}\n\n"


def _number(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _usage_text(u: Usage) -> str:
    return (
        f"{u.input_tokens:,} input · {u.output_tokens:,} output · {u.cached_tokens:,} cached tokens"
        f" · ${u.cost_usd:.4f} · {u.turns:,} turns"
    )


def _section(name: str, body: str) -> str:
    digest = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"<!-- flow:section {name} d={digest} ({SECTION_NOTES[name]}) -->\n{body}"


def section_digest(body: str) -> str:
    """The digest a generated section's marker records for its text."""
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _metadata(run: Run) -> str:
    title = run.workflow.name or run.workflow.path.rsplit("/", 1)[-1]
    rows = [("Status", cell(run.status + (f" — {run.reason}" if run.reason else ""), 300))]
    workflow = f"[{cell(title, 80)}]({quote(run.workflow.path, safe='/._-~')})"
    if run.workflow.description:
        workflow += f" — {cell(run.workflow.description, 200)}"
    rows.append(("Workflow", workflow))
    rows.append(("Workflow hash", code(run.workflow.hash, 40)))
    rows.append(("Run", code(run.run_id)))
    rows.append(("Created", run.created))
    rows.append(("Updated", run.updated))
    where = f"step {run.cursor.index} of {run.cursor.total}"
    if run.cursor.step is not None:
        where += f": {cell(run.cursor.step, 80)}"
    rows.append(("Progress", where))
    rows.append(("Usage", _usage_text(run.usage)))
    rows.append(("Attempts", str(len(run.attempts))))
    rows.append(("Transcript", f"{len(run.transcript):,} entries"))
    if run.keywords:
        # All of them: a table cell wraps, so nothing is cut mid-word.
        rows.append(("Keywords", cell(", ".join(run.keywords), 10_000)))
    sub = run.parent is not None and run.parent.get("kind") == "workflow"
    if run.parent is not None and sub:
        rows.append(
            (
                "Part of",
                f"step {cell(run.parent.get('step', ''), 80)} of run "
                f"{cell(run.parent.get('run_id', ''), 80)} "
                f"({cell(run.parent.get('path', ''), 300)})",
            )
        )
    elif run.parent is not None:
        rows.append(
            ("Forked from", cell(", ".join(f"{k} {v}" for k, v in run.parent.items()), 300))
        )
    if run.worktree is not None:
        tree = run.worktree
        rows.append(
            (
                "Worktree",
                f"{code(tree.path, 300)} on branch {code(tree.branch, 200)} from "
                f"{code(tree.base[:12])} ({tree.state})",
            )
        )
    if run.status != "completed":
        # A sub-workflow's run is resumed through its parent (docs/spec.md 4.10).
        what = "its parent's progress file" if sub else "this file"
        rows.append(("Resume", f"run `flow resume` on {what}"))
    table = "\n".join(f"| **{k}** | {v} |" for k, v in rows)
    head = f"# {cell(title, 120)} · run {cell(run.run_id)}\n\n"
    return f"{head}| Field | Value |\n|---|---|\n{table}\n\n"


def _configuration(run: Run) -> str:
    rows = [("Provider", cell(run.config.provider))]
    if run.config.models:
        order = " → ".join(m or "(default)" for m in run.config.model_order())
        rows.append(("Models", cell(order, 300) + " (tried in order)"))
    else:
        rows.append(("Model", cell(run.config.model) if run.config.model else "_default_"))
    if run.config.base_url:
        rows.append(("Base URL", cell(run.config.base_url)))
    if run.config.recording:
        rows.append(("Recording", cell(run.config.recording)))
    for key, value in run.config.params.items():
        rows.append((f"param {cell(str(key))}", cell(_number(value))))
    for key, value in run.config.budget.items():
        rows.append((f"budget {cell(str(key))}", cell(_number(value))))
    for key, values in (
        ("allow-commands", run.config.permissions.commands),
        ("allow-fetch", run.config.permissions.hosts),
    ):
        if values:
            rows.append((key, ", ".join(code(v, 200).replace("|", "\\|") for v in values)))
    text = "## Configuration\n\n| Setting | Value |\n|---|---|\n"
    text += "\n".join(f"| {k} | {v} |" for k, v in rows) + "\n\n"
    if run.inputs:
        text += f"{INPUT_TABLE_HEADER}\n|---|---|\n" + "\n".join(input_rows(run.inputs)) + "\n\n"
    return text


#: The header row of the Configuration section's table of inputs.
INPUT_TABLE_HEADER = "| Input | Value |"


def input_rows(inputs: dict[str, Any]) -> list[str]:
    """The rows of the Configuration section's table of inputs, one per input."""
    return [f"| {cell(str(k))} | {cell(_number(v), 200)} |" for k, v in inputs.items()]


def _state(run: Run) -> str:
    text = "## Execution state\n\n"
    where = f"Cursor: step {run.cursor.index} of {run.cursor.total}"
    where += f", {code(run.cursor.step, 80)}." if run.cursor.step is not None else "."
    text += where + "\n\n"
    if run.steps:
        text += (
            "| Step | Status | Attempts | Turns | Output | Tokens | Cost | Started | Finished |\n"
        )
        text += "|---|---|---:|---:|---|---:|---:|---|---|\n"
        for sid, s in run.steps.items():
            output = f"entry {s.output_entry}" if s.output_entry is not None else ""
            text += (
                f"| {cell(sid, 80)} | {s.status} | {s.attempts} | {s.turns} | {output} "
                f"| {s.usage.total_tokens:,} | ${s.usage.cost_usd:.4f} "
                f"| {cell(s.started or '')} | {cell(s.finished or '')} |\n"
            )
        text += "\n"
        children = [(sid, s.child) for sid, s in run.steps.items() if s.child]
        if children:
            text += "Sub-workflow runs (progress files relative to this one):\n\n"
            text += "".join(f"- step {code(sid, 80)}: {code(p, 300)}\n" for sid, p in children)
            text += "\n"
        agents = [(sid, c, a) for sid, s in run.steps.items() for c, a in s.agents.items()]
        if agents:
            text += "Subagent runs (progress files relative to this one):\n\n"
            text += "".join(
                f"- step {code(sid, 80)}, call {code(c, 80)}: agent {code(a.agent, 80)}, "
                f"{code(a.child, 300)}\n"
                for sid, c, a in agents
            )
            text += "\n"
    if run.in_flight:
        text += "Tool calls in flight (started, result not recorded):\n\n"
        for f in run.in_flight:
            safe = "idempotent" if f.idempotent else "not idempotent"
            text += (
                f"- {code(f.call_id, 80)} {code(f.tool, 80)} in step {code(f.step, 80)}, "
                f"entry {f.entry}, started {cell(f.started)}, {safe}\n"
            )
        text += "\n"
    if run.approvals:
        text += _approvals(run)
    if run.last_error is not None:
        e = run.last_error
        step = f" in step {code(e.step, 80)}" if e.step else ""
        text += f"Last error: {code(e.type, 80)} at {cell(e.at)}{step}: {cell(e.message, 500)}\n\n"
    if run.attempts:
        text += "| Attempt | Started | Ended | Status | Reason | Tokens | Cost | Notes |\n"
        text += "|---:|---|---|---|---|---:|---:|---|\n"
        for a in run.attempts:
            text += (
                f"| {a.n} | {cell(a.started)} | {cell(a.ended or '')} | {cell(a.status or '')} "
                f"| {cell(a.reason or '', 200)} | {a.usage.total_tokens:,} "
                f"| ${a.usage.cost_usd:.4f} "
                f"| {cell('; '.join(filter(None, [attempt_models_text(a), *a.notes])), 300)} |\n"
            )
        text += "\n"
    if run.redactions.count or run.redactions.where:
        where = ", ".join(run.redactions.where)
        text += f"Redactions: {run.redactions.count} secret value(s) replaced"
        text += f" ({cell(where, 300)}).\n\n" if where else ".\n\n"
    return text


def _approvals(run: Run) -> str:
    """The calls held for a person's decision, and how to decide (docs/spec.md 4.17)."""
    text = "Tool calls waiting for approval (decide, then `flow resume` this file):\n\n"
    for a in run.approvals:
        decided = ""
        if a.decision != "pending":
            by = f" by {cell(a.by, 80)}" if a.by else ""
            host = f" on {cell(a.host, 80)}" if a.host else ""
            decided = f" — **{a.decision}**{by}{host}"
        text += (
            f"- {code(a.call_id, 80)} {code(a.tool, 80)} in step {code(a.step, 80)}, entry "
            f"{a.entry}: {code(a.preview, 200)} ({cell(a.why, 80)}){decided}\n"
        )
    pending = [a for a in run.approvals if a.decision == "pending"]
    if pending:
        ids = " ".join(f"--call {a.call_id}" for a in pending)
        text += (
            f"\nApprove: `flow approve PROGRESS {cell(ids, 300)}` (or `--all`); deny: `flow deny "
            "PROGRESS --call ID --reason TEXT`; or by hand, in the front matter's `approvals:`, "
            "change a call's `decision: pending` to `decision: approved` or `decision: denied` "
            "(a denial's `reason:` is what the model is told).\n"
        )
    return text + "\n"


def conversation_preamble(empty: bool) -> str:
    """The generated text between the conversation marker and the first entry."""
    return f"{CONVERSATION_HEADING}\n\n" + (f"{EMPTY_CONVERSATION}\n\n" if empty else "")


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return without_surrogates(value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    return value


def render_document(
    run: Run, fm: dict[str, Any], digests: list[str], *, blocks: list[str] | None = None
) -> str:
    """The whole file for ``run`` given its front matter dict and entry digests (and, when
    the caller has them, the entries' ``entry_block`` texts)."""
    if blocks is None:
        blocks = [entry_block(e, d) for e, d in zip(run.transcript, digests, strict=True)]
    return document_head(run, fm) + "".join(blocks) + document_tail(run)


def document_head(run: Run, fm: dict[str, Any]) -> str:
    """The file up to its first entry: front matter, generated sections, conversation heading."""
    try:
        fm_text = yamlio.dump(fm)
    except UnicodeEncodeError:
        # A lone surrogate in a front matter string (say, a provider's error message) cannot
        # be written as UTF-8 YAML; the transcript keeps such text exactly, the front matter
        # gets U+FFFD instead.
        fm_text = yamlio.dump(_without_surrogates(fm))
    if fm_text.endswith("\n...\n"):
        # PyYAML ends a document holding a keep-chomped block scalar (``|+``) with ``...``;
        # GitHub would take that line as the end of the front matter. The last key is always
        # ``transcript``, so the marker is redundant here.
        fm_text = fm_text[:-4]
    parts = ["---\n", fm_text, "---\n\n"]
    parts.append(_section("metadata", _metadata(run)))
    parts.append(_section("configuration", _configuration(run)))
    parts.append(f"<!-- flow:section conversation ({SECTION_NOTES['conversation']}) -->\n")
    parts.append(conversation_preamble(not run.transcript))
    return "".join(parts)


def document_tail(run: Run) -> str:
    """The file after its last entry: the state section and the end marker."""
    return _section("state", _state(run)) + f"<!-- flow:end seq={run.journal_seq} -->\n"


def render(run: Run) -> str:
    """The complete ``progress.md`` text for ``run``."""
    digests = [entry_digest(e) for e in run.transcript]
    chain = Chain(zip((e.id for e in run.transcript), digests, strict=True))
    fm = front_matter(run, entries=len(run.transcript), digest=chain.root())
    return render_document(run, fm, digests)
