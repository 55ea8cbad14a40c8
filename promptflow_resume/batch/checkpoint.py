"""The batch file ``DIR/batch.md``: a batch's checkpoint and its readable summary.

The YAML front matter is the checkpoint (validated by ``schemas/batch.schema.json`` on every
read and before every write); the Markdown body is a table with a row per data row, linking
the row's own progress file (``rows/<n>/progress.md``) with its status, turns, tokens, cost
and last error, so the file reads well on GitHub. The body is derived from the front matter
and never parsed back. Writes are atomic (temp file, fsync, rename, fsync the folder)::

    batch = load_batch(Path("out/batch.md"))
    batch.rows[0].status = "completed"
    save_batch(Path("out/batch.md"), batch)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import faults, yamlio
from ..base.durable import replace_file
from ..base.errors import FileNotFoundFlowError, ProgressFormatError, SpecialFileError
from ..base.safeopen import read_regular
from ..progress.diskio import read_text
from ..progress.schema import validate_front_matter

#: The batch format version written into ``flow_batch``.
BATCH_FORMAT = 1
#: The name of the batch file inside the batch folder.
BATCH_FILE = "batch.md"
#: The batch's shared cost budget beside ``batch.md`` (with ``--max-cost``, docs/spec.md 8.3).
BUDGET_FILE = "budget.json"

#: Row statuses that end a row for good (never run again by ``flow resume``).
DONE = frozenset({"completed"})
#: Row statuses counted as failed in the totals (they stopped without completing).
STOPPED = frozenset(
    {
        "failed",
        "interrupted",
        "budget_exhausted",
        "timeout",
        "needs_review",
        "awaiting_input",
        "awaiting_approval",
        "suspended",
    }
)

_KEYS = (
    "flow_batch",
    "batch_id",
    "status",
    "reason",
    "workflow",
    "data",
    "created",
    "updated",
    "config",
    "totals",
    "rows",
)


@dataclass
class RowState:
    """One data row: its status and what its run used so far."""

    row: int
    status: str = "pending"
    #: Where the row's worker runs (``host:pid``) while it is running.
    worker: str | None = None
    #: How many times a worker took up the row (a worker that died counts).
    attempts: int = 0
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None

    @property
    def progress(self) -> str:
        """The row's progress file, relative to the batch folder."""
        return row_progress(self.row)

    def to_dict(self) -> dict[str, Any]:
        """The row as written in the front matter (defaults left out)."""
        data: dict[str, Any] = {"row": self.row, "status": self.status}
        if self.status != "pending" or self.attempts:
            data["progress"] = self.progress
        if self.worker:
            data["worker"] = self.worker
        for key in ("attempts", "turns", "input_tokens", "output_tokens"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        if self.cost_usd:
            data["cost_usd"] = round(self.cost_usd, 6)
        if self.error:
            data["error"] = self.error
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RowState:
        """A row from its (already validated) front matter form."""
        return cls(
            row=int(data["row"]),
            status=str(data["status"]),
            worker=data.get("worker"),
            attempts=int(data.get("attempts", 0)),
            turns=int(data.get("turns", 0)),
            input_tokens=int(data.get("input_tokens", 0)),
            output_tokens=int(data.get("output_tokens", 0)),
            cost_usd=float(data.get("cost_usd", 0.0)),
            error=data.get("error"),
        )


@dataclass
class Batch:
    """A batch's checkpoint: what runs, over which data, and where every row stands."""

    batch_id: str
    status: str
    workflow_path: str
    workflow_hash: str
    data_path: str
    data_sha256: str
    created: str
    updated: str
    engine: str = "local"
    workers: int = 1
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    max_cost_usd: float | None = None
    #: ``--price``/``--prices`` given to the batch: every row's run records them.
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    #: With the ray engine: ``shared`` or ``shipped`` (docs/spec.md 8.6); None otherwise.
    files: str | None = None
    #: With the ray engine: the names of the variables sent to the tasks (``--ray-env``).
    ray_env: list[str] = field(default_factory=list)
    reason: str | None = None
    rows: list[RowState] = field(default_factory=list)

    def totals(self) -> dict[str, Any]:
        """Counts by status and the summed usage of every row."""
        counts = {"pending": 0, "running": 0, "completed": 0, "failed": 0}
        for row in self.rows:
            if row.status in STOPPED:
                counts["failed"] += 1
            else:
                counts[row.status] += 1
        return {
            "rows": len(self.rows),
            **counts,
            "input_tokens": sum(r.input_tokens for r in self.rows),
            "output_tokens": sum(r.output_tokens for r in self.rows),
            "cost_usd": round(sum(r.cost_usd for r in self.rows), 6),
        }

    def usage_now(self, live: Mapping[int, tuple[int, int, float]]) -> tuple[int, float]:
        """Tokens and cost so far: recorded rows, with the running ones (``live``: row ->
        input tokens, output tokens, cost reported by its worker) as last reported."""
        settled = [r for r in self.rows if r.row not in live]
        tokens = sum(r.input_tokens + r.output_tokens for r in settled)
        tokens += sum(i + o for i, o, _ in live.values())
        return tokens, sum(r.cost_usd for r in settled) + sum(c for _, _, c in live.values())

    def to_front_matter(self) -> dict[str, Any]:
        """The checkpoint as a plain dict, keys in their fixed order."""
        config: dict[str, Any] = {"engine": self.engine, "workers": self.workers}
        for key in ("provider", "model", "base_url", "max_cost_usd", "files"):
            value = getattr(self, key)
            if value is not None:
                config[key] = value
        if self.prices:
            config["prices"] = {m: dict(p) for m, p in sorted(self.prices.items())}
        if self.ray_env:
            config["ray_env"] = list(self.ray_env)
        data: dict[str, Any] = {
            "flow_batch": BATCH_FORMAT,
            "batch_id": self.batch_id,
            "status": self.status,
            "reason": self.reason,
            "workflow": {"path": self.workflow_path, "hash": self.workflow_hash},
            "data": {"path": self.data_path, "sha256": self.data_sha256, "rows": len(self.rows)},
            "created": self.created,
            "updated": self.updated,
            "config": config,
            "totals": self.totals(),
            "rows": [r.to_dict() for r in self.rows],
        }
        if self.reason is None:
            del data["reason"]
        return {k: data[k] for k in _KEYS if k in data}

    @classmethod
    def from_front_matter(cls, data: dict[str, Any]) -> Batch:
        """A batch from its validated front matter."""
        config = data["config"]
        return cls(
            batch_id=data["batch_id"],
            status=data["status"],
            reason=data.get("reason"),
            workflow_path=data["workflow"]["path"],
            workflow_hash=data["workflow"]["hash"],
            data_path=data["data"]["path"],
            data_sha256=data["data"]["sha256"],
            created=str(data["created"]),
            updated=str(data["updated"]),
            engine=config["engine"],
            workers=int(config["workers"]),
            provider=config.get("provider"),
            model=config.get("model"),
            base_url=config.get("base_url"),
            max_cost_usd=config.get("max_cost_usd"),
            prices={str(m): dict(p) for m, p in (config.get("prices") or {}).items()},
            files=config.get("files"),
            ray_env=[str(name) for name in config.get("ray_env") or ()],
            rows=[RowState.from_dict(r) for r in data["rows"]],
        )


def row_progress(row: int) -> str:
    """``rows/<n>/progress.md`` for row ``n`` (zero-padded so folders sort in row order)."""
    return f"rows/{row:04d}/progress.md"


def _cell(text: str) -> str:
    """``text`` made safe for one Markdown table cell."""
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= 120 else flat[:117] + "..."


def render_body(batch: Batch) -> str:
    """The Markdown body: a heading, the totals and a table with a line per row."""
    t = batch.totals()
    lines = [
        f"# Batch {batch.batch_id}",
        "",
        f"Workflow `{batch.workflow_path}` over `{batch.data_path}` ({t['rows']} rows), "
        f"engine {batch.engine}{f' (files {batch.files})' if batch.files else ''} with "
        f"{batch.workers} worker{'s' if batch.workers != 1 else ''}.",
        "",
        f"**Status: {batch.status}**"
        + (f" — {batch.reason}" if batch.reason else "")
        + f" · {t['completed']} completed · {t['failed']} failed · {t['running']} running · "
        f"{t['pending']} pending · {t['input_tokens'] + t['output_tokens']:,} tokens · "
        f"${t['cost_usd']:.4f}",
        "",
        "| Row | Status | Progress | Turns | Tokens | Cost | Last error |",
        "| ---: | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for row in batch.rows:
        link = f"[{row.progress}]({row.progress})" if row.status != "pending" else "—"
        tokens = row.input_tokens + row.output_tokens
        lines.append(
            f"| {row.row} | {row.status} | {link} | {row.turns} | {tokens:,} | "
            f"${row.cost_usd:.4f} | {_cell(row.error) if row.error else ''} |"
        )
    return "\n".join(lines) + "\n"


def render(batch: Batch) -> str:
    """The whole batch file: front matter between ``---`` lines, then the body."""
    data = batch.to_front_matter()
    validate_front_matter(data, path=BATCH_FILE, schema="batch")
    return f"---\n{yamlio.dump(data)}---\n\n{render_body(batch)}"


def save_batch(path: Path, batch: Batch) -> None:
    """Write ``batch`` to ``path`` atomically: a reader finds the old file or the new one."""
    data = render(batch).encode("utf-8")
    replace_file(
        path,
        data,
        before_rename=lambda: faults.point("batch.before_rename"),
        after_rename=lambda: faults.point("batch.after_rename"),
    )


def is_batch_file(path: str | Path) -> bool:
    """True when ``path`` is a batch file (its front matter starts with ``flow_batch:``)."""
    p = Path(path)
    if p.name != BATCH_FILE and not p.is_file():
        return False
    try:
        data = read_regular(p, 200, what="batch file", follow=True) or b""
    except (OSError, SpecialFileError):
        return False
    head = data[:200].decode("utf-8", "replace")
    return head.startswith("---") and "\nflow_batch:" in head


def load_batch(path: str | Path) -> Batch:
    """Read and validate a batch file; errors name ``path:line:col`` and the field."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundFlowError(f"no batch file at {p}.", path=p)
    text = read_text(p, what="batch file")
    if not text.startswith("---\n"):
        raise ProgressFormatError(
            "a batch file starts with a `---` line and its YAML front matter.", path=p, line=1
        )
    end = text.find("\n---\n", 3)
    if end < 0:
        raise ProgressFormatError(
            "the front matter is not closed by a `---` line.",
            path=p,
            hint="Restore the file from version control, or re-run the batch.",
        )
    source = text[4 : end + 1]
    data = yamlio.load(source, path=p, line_offset=1, unique_keys=True)
    if not isinstance(data, dict):
        raise ProgressFormatError("the front matter must be a mapping.", path=p, line=2)
    validate_front_matter(data, path=p, source=source, line_offset=1, schema="batch")
    return Batch.from_front_matter(data)
