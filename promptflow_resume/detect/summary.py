"""What the detector and ``flow list`` know about one progress file, read from its front matter.

Only the front matter is read (the body can be megabytes), and of it only the keys a summary
needs, by the fast scanner in ``scan`` (the YAML loader reads whatever the scanner does not)::

    summary = read_summary(Path(".flow/runs/r1/progress.md"))
    summary.status, summary.steps_done, summary.steps_total
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from ..base import yamlio
from ..base.errors import FlowError, SpecialFileError
from ..base.safeopen import open_regular
from ..progress.model import RESUMABLE_STATUSES, RUN_STATUSES, step_counts
from ..progress.owner import owner_alive as _owner_alive
from ..progress.state import RunState, run_state
from .keywords import Vocabulary, normalize_words
from .scan import Spec, Unsupported, scan

#: Front matter larger than this is not a checkpoint we wrote; the file is listed as invalid.
MAX_FRONT_MATTER = 1024 * 1024
_FIRST_READ = 16 * 1024  # front matter is usually 1-4 KiB; the body is never needed

#: The status a summary gets when its file cannot be read as a progress file.
INVALID = "invalid"

#: Reads the front matter text of a progress file; None when it has none. Injectable for tests.
Reader = Callable[[Path], str | None]


class UnreadableProgress(Exception):
    """A progress file whose front matter cannot be read; the message says why in a few words."""


@dataclass(frozen=True)
class RunSummary:
    """One progress file as ``flow list`` and the detector see it."""

    path: Path
    run_id: str
    #: One of the run statuses, or ``invalid`` when the front matter cannot be read.
    status: str
    reason: str | None = None
    workflow_name: str | None = None
    #: The workflow path as written in the file (relative to the progress file's folder).
    workflow_path: str | None = None
    description: str | None = None
    workflow_hash: str | None = None
    steps_done: int = 0
    steps_total: int = 0
    cost_usd: float = 0.0
    created: str | None = None
    updated: str | None = None
    #: Normalized keywords (stored ones, or derived from the workflow file); empty if unknown.
    keywords: tuple[str, ...] = ()
    #: The run's inputs as canonical JSON, for the exact-match test.
    inputs_json: str = "{}"
    #: For ``running`` runs: whether the owning process is alive on this host; else None.
    owner_alive: bool | None = None
    #: Why the file could not be read, for ``invalid`` summaries.
    error: str | None = None
    #: The run's ``worktree`` front matter as canonical JSON (``flow run --worktree``), or None.
    worktree_json: str | None = None
    #: Input plus output tokens used so far (``usage`` in the front matter).
    tokens: int = 0
    size: int = 0
    mtime_ns: int = 0

    @property
    def state(self) -> RunState:
        """The run's effective state, as every reader tells it (``progress.state``)."""
        if self.status == INVALID:
            return RunState(INVALID, self.error or self.reason, INVALID, None, False)
        return run_state(self.path, self.status, self.reason, alive=self.owner_alive)

    @property
    def resumable(self) -> bool:
        """True when ``flow resume`` could continue this run now."""
        if self.status == "running":
            return self.owner_alive is False
        return self.status in RESUMABLE_STATUSES

    @property
    def worktree(self) -> dict[str, Any] | None:
        """The run's worktree record (``path``, ``branch``, ``state``…), None without one."""
        return json.loads(self.worktree_json) if self.worktree_json else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for ``--json`` output."""
        state = self.state
        return {
            "path": str(self.path),
            "run_id": self.run_id,
            "status": state.status,
            "reason": state.reason if self.status == "running" else self.reason,
            "recorded_status": self.status,
            "resumable": state.resumable,
            "owner_alive": self.owner_alive,
            "state": state.text(),
            "workflow": {
                "name": self.workflow_name,
                "path": self.workflow_path,
                "description": self.description,
                "hash": self.workflow_hash,
            },
            "steps_done": self.steps_done,
            "steps_total": self.steps_total,
            "cost_usd": self.cost_usd,
            "tokens": self.tokens,
            "created": self.created,
            "updated": self.updated,
            "keywords": list(self.keywords),
            "inputs": json.loads(self.inputs_json),
            "error": self.error,
            "worktree": self.worktree,
        }


# --- reading the front matter ---------------------------------------------------------------


def read_front_matter(path: Path) -> str | None:
    """The front matter text of ``path`` (between the first two ``---`` lines), or None.

    Stops reading at the closing line; raises UnreadableProgress for unreadable, undecodable or
    unclosed front matter.
    """
    try:
        # A pipe or device listed among runs would block or never end: regular files only.
        fd = open_regular(path, what="progress file", follow=True)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(_FIRST_READ)
            eof = len(data) < _FIRST_READ
            if data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]
            if not (data.startswith(b"---\n") or data.startswith(b"---\r\n")):
                return None
            start = data.index(b"\n") + 1
            scan_from = start - 1
            while (end := _closing_line(data, scan_from, eof)) is None:
                if eof:
                    raise UnreadableProgress("front matter has no closing '---' line")
                if len(data) >= MAX_FRONT_MATTER:
                    raise UnreadableProgress(
                        f"front matter is larger than {MAX_FRONT_MATTER // 1024} KiB"
                    )
                # Re-scan the last, possibly incomplete line together with the next chunk.
                scan_from = max(data.rfind(b"\n"), start - 1)
                chunk = handle.read(_FIRST_READ)
                eof = len(chunk) < _FIRST_READ
                data += chunk
    except SpecialFileError as error:
        raise UnreadableProgress(error.message) from None
    except OSError as error:
        raise UnreadableProgress(f"cannot read the file: {error.strerror or error}") from None
    try:
        return data[start:end].decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableProgress("front matter is not valid UTF-8") from None


def _closing_line(data: bytes, pos: int, eof: bool) -> int | None:
    """Offset where the closing ``---`` line starts, searching from ``pos``; None if not seen."""
    while (found := data.find(b"\n---", pos)) >= 0:
        line_end = data.find(b"\n", found + 4)
        if line_end < 0:
            if not eof:
                return None  # the line may go on in the next chunk
            line_end = len(data)
        if not data[found + 4 : line_end].strip():
            return found + 1
        pos = found + 4
    return None


# --- the keys a summary needs --------------------------------------------------------------

#: What ``scan`` keeps of the front matter (see ``scan.Spec``); everything else is skipped.
WANTED: Spec = {
    "flow_progress": True,
    "run_id": True,
    "status": True,
    "reason": True,
    "created": True,
    "updated": True,
    "workflow": {"path": True, "name": True, "description": True, "hash": True},
    "inputs": True,
    "cursor": True,
    "steps": {"*": {"status": True}},
    "usage": {"cost_usd": True, "input_tokens": True, "output_tokens": True},
    "keywords": True,
    "worktree": True,
}


# --- from parsed front matter to a summary --------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _number(value: Any, default: float = 0.0) -> float:
    if isinstance(value, bool):
        return default
    if isinstance(value, (int, float)):
        return float(value)
    return default


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def iso_utc(moment: datetime) -> str:
    """``2026-11-21T23:25:29Z`` for an aware or naive (taken as UTC) datetime."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.replace(microsecond=0).isoformat() + "Z"


def canonical_json(value: Any) -> str:
    """A stable JSON text for comparing input values (sorted keys, no spaces)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def summary_from_data(
    data: Mapping[str, Any],
    path: Path,
    vocab: Vocabulary | None = None,
    *,
    size: int = 0,
    mtime_ns: int = 0,
) -> RunSummary | None:
    """Summary of parsed front matter; None when it has no ``flow_progress`` (not a run)."""
    if "flow_progress" not in data:
        return None
    status = data.get("status")
    if status not in RUN_STATUSES:
        raise UnreadableProgress(f"unknown status {status!r}")
    workflow = data.get("workflow")
    workflow = workflow if isinstance(workflow, Mapping) else {}
    steps = data.get("steps")
    steps = steps if isinstance(steps, Mapping) else {}
    cursor = data.get("cursor")
    done, total = step_counts(
        (state.get("status") if isinstance(state, Mapping) else None for state in steps.values()),
        _count(cursor.get("total")) if isinstance(cursor, Mapping) else None,
    )
    usage = data.get("usage")
    cost = _number(usage.get("cost_usd")) if isinstance(usage, Mapping) else 0.0
    tokens = (
        int(_number(usage.get("input_tokens")) + _number(usage.get("output_tokens")))
        if isinstance(usage, Mapping)
        else 0
    )
    inputs = data.get("inputs")
    raw_keywords = data.get("keywords")
    keywords: tuple[str, ...] = ()
    if isinstance(raw_keywords, list) and raw_keywords:
        # Re-normalized: hand edits and files written with an older vocabulary still compare.
        keywords = tuple(normalize_words([str(k) for k in raw_keywords], vocab))
    run_id = _text(data.get("run_id")) or default_run_id(path)
    return RunSummary(
        path=path,
        run_id=run_id,
        status=str(status),
        reason=_text(data.get("reason")),
        workflow_name=_text(workflow.get("name")),
        workflow_path=_text(workflow.get("path")),
        description=_text(workflow.get("description")),
        workflow_hash=_text(workflow.get("hash")),
        steps_done=done,
        steps_total=total,
        cost_usd=cost,
        created=_text(data.get("created")),
        updated=_text(data.get("updated")),
        keywords=keywords,
        inputs_json=canonical_json(inputs if isinstance(inputs, Mapping) else {}),
        worktree_json=_worktree_json(data.get("worktree")),
        tokens=tokens,
        size=size,
        mtime_ns=mtime_ns,
    )


def _worktree_json(value: Any) -> str | None:
    """The ``worktree`` mapping's text fields as canonical JSON (None when absent)."""
    if not isinstance(value, Mapping):
        return None
    fields = ("path", "branch", "base", "state")
    return canonical_json({k: str(value[k]) for k in fields if isinstance(value.get(k), str)})


def default_run_id(path: Path) -> str:
    """The run id a file's location implies: ``<id>/progress.md`` or ``<id>.progress.md``."""
    if path.name == "progress.md":
        return path.parent.name
    return path.name.removesuffix(".md").removesuffix(".progress")


def invalid_summary(path: Path, error: str) -> RunSummary:
    """The summary of a file that looks like a progress file but cannot be read as one."""
    return RunSummary(path=path, run_id=default_run_id(path), status=INVALID, error=error)


def parse_summary(
    text: str, path: Path, vocab: Vocabulary | None = None, *, size: int = 0, mtime_ns: int = 0
) -> RunSummary | None:
    """Summary of front matter ``text``: None if not a progress file, raise UnreadableProgress."""
    data: Any
    try:
        data = scan(text, WANTED)
    except Unsupported:
        # Not the plain style flow writes (a hand edit, say): the YAML loader reads anything.
        try:
            data = yamlio.load(text, path=path)
        except FlowError as error:
            raise UnreadableProgress(str(error.message).rstrip(".")) from None
        if not isinstance(data, Mapping):
            raise UnreadableProgress("front matter is not a mapping") from None
    return summary_from_data(data, path, vocab, size=size, mtime_ns=mtime_ns)


def read_summary(
    path: Path,
    *,
    reader: Reader | None = None,
    vocab: Vocabulary | None = None,
    size: int = 0,
    mtime_ns: int = 0,
) -> RunSummary | None:
    """Summary of the progress file at ``path``; None if it is not one, ``invalid`` if broken."""
    try:
        text = (reader or read_front_matter)(path)
        if text is None:
            return None
        return parse_summary(text, path, vocab, size=size, mtime_ns=mtime_ns)
    except UnreadableProgress as error:
        return replace(invalid_summary(path, str(error)), size=size, mtime_ns=mtime_ns)


# --- owners of running runs -----------------------------------------------------------------


def owner_alive(progress: Path, *, host: str | None = None) -> bool:
    """True when the process that owns a ``running`` run is alive on this host.

    Reads ``<progress>.owner`` (``{"pid", "host", "since", "pid_start"}``); a pid now used by
    a later process does not count. Never touches the run's lock: trying it could make a run
    that is just starting fail. An owner file that is a link or a pipe names no live owner
    (the listing shows the run; reading it in full refuses the file, docs/spec.md 10.4).
    """
    try:
        return _owner_alive(progress, host=host)
    except SpecialFileError:
        return False
