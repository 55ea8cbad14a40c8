"""What changed between two versions of a run: ``flow diff`` and its git diff driver.

A progress file is reviewed in pull requests, where a raw line diff of it mixes what matters
(a step completed, entries appended, a message edited by hand, a raised budget) with noise.
``diff_runs`` compares two parsed versions and names each kind of change; ``textconv_text`` prints
one version as stable lines, so that git's own line diff of two of them reads the same way
(``git config diff.flow.textconv "flow diff --textconv"``, docs/spec.md 11.2)::

    change = diff_files(Path("old.md"), Path("progress.md"))
    change.appended            # ids of the entries the newer version added
    change.to_dict()           # the --json document
    print(change.to_markdown())
    change = diff_revision(Path("progress.md"), "HEAD~1")   # against a git revision

Both versions are read as written (``progress.diskio.read_text`` and ``parse``): a journal
not yet folded into a file, or a sidecar file, is not part of what is compared.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base.errors import FlowError, GitError, InputError
from ..progress.model import Entry, Run

#: Lines of an edited entry's text diff kept (the rest is counted).
DIFF_LINES = 200
#: Characters of an appended entry's first line shown.
PREVIEW = 100


@dataclass(frozen=True)
class Version:
    """One side of a diff: where it came from and what it is."""

    label: str
    run_id: str
    status: str
    entries: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "label": self.label,
            "run_id": self.run_id,
            "status": self.status,
            "entries": self.entries,
        }


@dataclass(frozen=True)
class Change:
    """A value that differs: a field path (``config.model``, ``inputs.topic``) and both values
    (None: absent on that side)."""

    field: str
    old: Any
    new: Any

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"field": self.field, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class EntryNote:
    """An entry that was appended, edited or removed."""

    id: int
    role: str
    step: str | None
    tool: str | None
    #: Appended and removed: the first line of the text; edited: a unified diff of the text.
    text: str
    #: Edited: the newer file's digest of the entry no longer matches its text, i.e. a person
    #: changed it and no resume has taken the edit up yet (2.4).
    by_hand: bool = False

    def to_dict(self, key: str) -> dict[str, Any]:
        """A JSON-ready form, the text under ``key`` (``preview``; ``diff`` with ``by_hand``)."""
        data: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "step": self.step,
            "tool": self.tool,
            key: self.text,
        }
        if key == "diff":
            data["by_hand"] = self.by_hand
        return data


@dataclass
class RunDiff:
    """What changed from ``old`` to ``new`` (docs/spec.md 11.2 gives the JSON shape)."""

    old: Version
    new: Version
    #: ``status``, ``reason``, ``cursor``: the run's own state.
    state: list[Change] = field(default_factory=list)
    #: One per step whose status changed (or that appeared or went).
    steps: list[Change] = field(default_factory=list)
    appended: list[EntryNote] = field(default_factory=list)
    edited: list[EntryNote] = field(default_factory=list)
    removed: list[EntryNote] = field(default_factory=list)
    #: Inputs, configuration (provider, model, parameters, budget, allow-lists), workflow.
    settings: list[Change] = field(default_factory=list)
    #: Approvals whose decision changed (``approvals.CALL``).
    approvals: list[Change] = field(default_factory=list)
    #: The new usage minus the old: tokens, cost, turns; and attempts added.
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def same_run(self) -> bool:
        """True when both versions are of one run (the same run id)."""
        return self.old.run_id == self.new.run_id

    @property
    def empty(self) -> bool:
        """True when nothing differs."""
        parts = (self.state, self.steps, self.appended, self.edited, self.removed)
        rest = (self.settings, self.approvals)
        return not any(parts) and not any(rest) and not any(self.usage.values())

    def to_dict(self) -> dict[str, Any]:
        """The ``flow diff --json`` document."""
        return {
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
            "same_run": self.same_run,
            "empty": self.empty,
            "state": [c.to_dict() for c in self.state],
            "steps": [c.to_dict() for c in self.steps],
            "appended": [e.to_dict("preview") for e in self.appended],
            "edited": [e.to_dict("diff") for e in self.edited],
            "removed": [e.to_dict("preview") for e in self.removed],
            "settings": [c.to_dict() for c in self.settings],
            "approvals": [c.to_dict() for c in self.approvals],
            "usage": self.usage,
        }

    def to_markdown(self, *, max_appended: int = 50) -> str:
        """The diff for a person: Markdown that reads in a terminal and on GitHub."""
        lines = [f"# flow diff: {self.old.label} → {self.new.label}", ""]
        if not self.same_run:
            lines += [f"**Different runs:** {self.old.run_id} and {self.new.run_id}.", ""]
        if self.empty:
            return "\n".join([*lines, "No change.", ""])
        for change in self.state:
            lines.append(f"- {change.field}: {_shown(change.old)} → {_shown(change.new)}")
        usage = self.usage
        if any(usage.values()):
            lines.append(
                f"- usage: {usage['tokens']:+,} tokens, {usage['cost_usd']:+.4f} USD, "
                f"{usage['turns']:+} turns, {usage['attempts']:+} attempts"
            )
        lines += _section("Steps", [f"- {c.field}: {c.old} → {c.new}" for c in self.steps])
        lines += _section(
            "Settings", [f"- {c.field}: {_shown(c.old)} → {_shown(c.new)}" for c in self.settings]
        )
        lines += _section(
            "Approvals", [f"- {c.field}: {_shown(c.old)} → {_shown(c.new)}" for c in self.approvals]
        )
        shown = [f"- {_label(e)}: {e.text}" for e in self.appended[:max_appended]]
        if len(self.appended) > max_appended:
            shown.append(f"- … {len(self.appended) - max_appended} more")
        title = f"Appended ({len(self.appended)} entries)" if self.appended else "Appended"
        lines += _section(title, shown)
        for note in self.edited:
            title = "Edited by hand" if note.by_hand else "Edited"
            lines += [
                "",
                f"## {title}: {_label(note)}",
                "",
                "```diff",
                note.text.rstrip("\n"),
                "```",
            ]
        lines += _section("Removed", [f"- {_label(e)}: {e.text}" for e in self.removed])
        return "\n".join([*lines, ""])


def _section(title: str, rows: list[str]) -> list[str]:
    return ["", f"## {title}", "", *rows] if rows else []


def _label(note: EntryNote) -> str:
    where = f" · {note.step}" if note.step else ""
    tool = f" · {note.tool}" if note.tool else ""
    return f"entry {note.id} · {note.role}{where}{tool}"


def _shown(value: Any) -> str:
    return "(none)" if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _preview(entry: Entry) -> str:
    first = next((line for line in entry.content.splitlines() if line.strip()), "")
    return first if len(first) <= PREVIEW else first[: PREVIEW - 1] + "…"


def _note(entry: Entry, text: str) -> EntryNote:
    return EntryNote(entry.id, entry.role, entry.step, entry.tool, text)


def _text_diff(old: Entry, new: Entry) -> str:
    lines = list(
        difflib.unified_diff(
            old.content.splitlines(keepends=True),
            new.content.splitlines(keepends=True),
            f"entry {old.id} (old)",
            f"entry {new.id} (new)",
        )
    )
    if not lines:  # same text: another field changed (its tool, its step, a sidecar)
        before, after = _fields(old), _fields(new)
        changed = [k for k in before if before[k] != after[k]]
        lines = [
            "-" + " ".join(f"{k}={before[k]}" for k in changed) + "\n",
            "+" + " ".join(f"{k}={after[k]}" for k in changed) + "\n",
        ]
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"… {len(lines) - DIFF_LINES} more diff lines\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _fields(entry: Entry) -> dict[str, str]:
    """The entry's fields other than its text, as the diff names them."""
    meta = " ".join(f"{k}={v}" for k, v in entry.meta.fields()) if entry.meta else None
    covers = f"{entry.covers[0]}-{entry.covers[1]}" if entry.covers else None
    return {
        "step": str(entry.step),
        "tool": str(entry.tool),
        "error": str(entry.is_error),
        "sidecar": str(entry.sidecar),
        "covers": str(covers),
        "meta": f"[{meta}]" if meta else "None",
    }


def same_entry(old: Entry, new: Entry) -> bool:
    """True when ``new`` is ``old`` as it stands now (edited or not), False when it is another
    entry that took its id: a rewind, a retried step or an archive drops entries, and the run
    then records new ones under the same ids. An entry is known by its role, its call id and
    when it was recorded (``at``, format 7 and later); a hand edit changes none of them."""
    when_old = old.meta.at if old.meta is not None else None
    when_new = new.meta.at if new.meta is not None else None
    return (old.role, old.call_id, when_old) == (new.role, new.call_id, when_new)


def flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """``{"a": {"b": 1}}`` under ``x`` as ``{"x.a.b": 1}`` (lists stay values)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            flatten(f"{prefix}.{key}", item, out)
    else:
        out[prefix] = value


def settings_of(run: Run) -> dict[str, Any]:
    """The run's inputs, configuration and workflow as flat ``field: value`` pairs."""
    config = run.config
    flat: dict[str, Any] = {
        "workflow.path": run.workflow.path,
        "workflow.hash": run.workflow.hash,
        "config.provider": config.provider,
        "config.model": config.model,
        "config.models": list(config.models) or None,
        "config.base_url": config.base_url,
        "config.permissions.commands": list(config.permissions.commands) or None,
        "config.permissions.hosts": list(config.permissions.hosts) or None,
    }
    flatten("config.params", config.params, flat)
    flatten("config.budget", config.budget, flat)
    flatten("config.prices", config.prices, flat)
    flatten("inputs", run.inputs, flat)
    for step, digest in run.workflow.steps.items():
        flat[f"workflow.steps.{step}"] = digest
    return {k: v for k, v in flat.items() if v not in (None, {})}


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    keys = list(old) + [k for k in new if k not in old]
    return [Change(k, old.get(k), new.get(k)) for k in keys if old.get(k) != new.get(k)]


def _entries(diff: RunDiff, old: Run, new: Run, by_hand: frozenset[int]) -> None:
    before = {e.id: e for e in old.transcript}
    kept = set()
    for entry in new.transcript:
        was = before.get(entry.id)
        if was is None or not same_entry(was, entry):
            # New, or a new entry under the id of one that was dropped (listed as removed).
            diff.appended.append(_note(entry, _preview(entry)))
            continue
        kept.add(entry.id)
        if was != entry:
            note = _note(entry, _text_diff(was, entry))
            diff.edited.append(replace(note, by_hand=entry.id in by_hand))
    diff.removed = [_note(e, _preview(e)) for e in old.transcript if e.id not in kept]


def diff_runs(
    old: Run,
    new: Run,
    *,
    old_label: str = "old",
    new_label: str = "new",
    edited_by_hand: frozenset[int] = frozenset(),
) -> RunDiff:
    """What changed from ``old`` to ``new``, two parsed versions of a run; ``edited_by_hand``:
    the ids of entries the newer file reports edited by hand (``LoadReport.edited_entries``)."""
    diff = RunDiff(
        old=Version(old_label, old.run_id, old.status, len(old.transcript)),
        new=Version(new_label, new.run_id, new.status, len(new.transcript)),
    )
    state_old = {"status": old.status, "reason": old.reason, "cursor": old.cursor.step}
    state_new = {"status": new.status, "reason": new.reason, "cursor": new.cursor.step}
    diff.state = _changes(state_old, state_new)
    diff.steps = _changes(
        {k: s.status for k, s in old.steps.items()}, {k: s.status for k, s in new.steps.items()}
    )
    diff.settings = _changes(settings_of(old), settings_of(new))
    diff.approvals = _changes(
        {f"approvals.{a.call_id}": a.decision for a in old.approvals},
        {f"approvals.{a.call_id}": a.decision for a in new.approvals},
    )
    _entries(diff, old, new, edited_by_hand)
    diff.usage = {
        "tokens": new.usage.total_tokens - old.usage.total_tokens,
        "cost_usd": round(new.usage.cost_usd - old.usage.cost_usd, 6),
        "turns": new.usage.turns - old.usage.turns,
        "attempts": len(new.attempts) - len(old.attempts),
    }
    return diff


def read_run(path: Path) -> tuple[Run, frozenset[int]]:
    """A progress file's run as written (no journal, no sidecar check) and the ids of the
    entries it reports edited by hand; FlowError if broken."""
    from ..progress.diskio import read_text
    from ..progress.parse import parse

    run, report = parse(read_text(path), path=path)
    return run, frozenset(report.edited_entries)


def revision_text(path: Path, rev: str) -> str:
    """The text of ``path`` at git revision ``rev`` (a GitError when git cannot give it)."""
    from ..gitworktree import git

    if not rev or rev.startswith("-") or any(c.isspace() or not c.isprintable() for c in rev):
        # git would read a revision starting with "-" as an option (`--output=FILE` writes).
        raise InputError(
            f"--rev {rev!r} is not a git revision: a revision is a branch, tag, commit or "
            "expression such as HEAD~1, without spaces and not starting with '-'.",
            hint="Name the revision, e.g. --rev HEAD~1 or --rev main.",
        )
    folder = path.resolve().parent
    done = git(["show", f"{rev}:./{path.name}"], folder, check=False)
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise GitError(
            f"git has no {path.name} at revision {rev!r} in {folder}: "
            f"{reason[-1] if reason else 'git failed'}.",
            path=path,
            hint="Name a revision where the file is committed, e.g. --rev HEAD~1 or --rev main.",
        )
    return done.stdout


def diff_files(old: Path, new: Path) -> RunDiff:
    """``flow diff OLD NEW``: what changed between two progress files."""
    before, _ = read_run(old)
    after, by_hand = read_run(new)
    return diff_runs(before, after, old_label=str(old), new_label=str(new), edited_by_hand=by_hand)


def diff_revision(path: Path, rev: str) -> RunDiff:
    """``flow diff PROGRESS --rev REV``: what changed since ``path`` as committed at ``rev``."""
    from ..progress.parse import parse

    new, by_hand = read_run(path)  # its errors come first: the file named is the one to fix
    old, _ = parse(revision_text(path, rev), path=f"{path}@{rev}")
    return diff_runs(
        old, new, old_label=f"{path}@{rev}", new_label=str(path), edited_by_hand=by_hand
    )


def _indented(text: str) -> list[str]:
    return ["    " + line for line in text.splitlines()] or ["    "]


def textconv_lines(run: Run) -> list[str]:
    """One version of a run as stable lines for git's diff driver (see ``textconv_text``).

    Each fact is one line named by what it is, so a line git marks as changed reads as that
    change: ``status:``, ``step NAME:``, ``config.…``/``inputs.…``, ``usage:``, ``approval``;
    then every entry under a head line, its text indented.
    """
    usage = run.usage
    lines = [
        f"flow run {run.run_id} (a view of the progress file; `flow diff` compares two)",
        f"status: {run.status}" + (f" ({run.reason})" if run.reason else ""),
        f"cursor: step {run.cursor.index} of {run.cursor.total}"
        + (f" ({run.cursor.step})" if run.cursor.step else ""),
    ]
    lines += [f"{k}: {_shown(v)}" for k, v in settings_of(run).items()]
    lines.append(
        f"usage: {usage.total_tokens} tokens ({usage.input_tokens} in, {usage.output_tokens} "
        f"out, {usage.cached_tokens} cached), {usage.cost_usd:.6f} USD, {usage.turns} turns, "
        f"{len(run.attempts)} attempts"
    )
    for sid, step in run.steps.items():
        lines.append(
            f"step {sid}: {step.status} ({step.turns} turns, {step.usage.total_tokens} tokens, "
            f"{step.usage.cost_usd:.6f} USD)"
        )
    lines += [f"approval {a.call_id}: {a.decision} ({a.tool})" for a in run.approvals]
    for entry in run.transcript:
        head = f"entry {entry.id} · {entry.role}"
        head += "".join(f" · {part}" for part in (entry.step, entry.tool) if part)
        lines.append(head + (f" (sidecar {entry.sidecar})" if entry.sidecar else ""))
        lines += _indented(entry.content)
    return lines


def textconv_text(path: Path) -> str:
    """``flow diff --textconv FILE``: the text git diffs for a progress file. A file that does
    not parse (broken, or not a progress file) is given back as it is, so git still diffs it."""
    try:
        run, _ = read_run(path)
    except FlowError:
        try:
            return path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return ""
    return "\n".join(textconv_lines(run)) + "\n"
