"""The SQLite index that caches the summaries of progress files, and the gathering of them.

The files are found by the sources of a search (``sources``): each is ``stat``-ed, and only
files whose size or mtime changed since the index last saw them are read again. The index
lives at ``.flow/runs/.index.sqlite``, is a cache (deleting it is always safe), uses WAL so
readers never wait for writers, and is rebuilt silently when it is corrupt or was written by
another version::

    found = gather(sources_for((), Path.cwd()))
    for summary in found.summaries:
        print(summary.run_id, summary.status)
    found.flush()  # store what was read, for next time
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import FlowError
from ..progress.model import RESUMABLE_STATUSES
from .keywords import Vocabulary, keywords_for, vocabulary
from .sources import Budget, Cancelled, Source, Stamp
from .summary import Reader, RunSummary, owner_alive, read_summary

if TYPE_CHECKING:
    from ..workflow.records import Workflow

#: Bump when the table changes; an index of another version is dropped and rebuilt.
SCHEMA_VERSION = 4

_COLUMNS = (
    "path",
    "size",
    "mtime_ns",
    "run_id",
    "status",
    "reason",
    "workflow_name",
    "workflow_path",
    "description",
    "workflow_hash",
    "steps_done",
    "steps_total",
    "cost_usd",
    "created",
    "updated",
    "keywords",
    "inputs_json",
    "error",
    "worktree_json",
    "tokens",
)
_CREATE = (
    "CREATE TABLE runs (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, "
    + ", ".join(f"{name} ANY" for name in _COLUMNS[3:])
    # Rows stored in path order inside the key's b-tree: a folder's rows are one range read.
    + ") WITHOUT ROWID",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
#: The columns of a light row, the part of a summary that scoring a run needs.
LIGHT_COLUMNS = (
    "path",
    "mtime_ns",
    "status",
    "updated",
    "workflow_hash",
    "inputs_json",
    "keywords",
)
_INSERT = (
    f"INSERT OR REPLACE INTO runs ({', '.join(_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _COLUMNS)})"
)


# --- the index ------------------------------------------------------------------------------


def _is_corrupt(error: sqlite3.DatabaseError) -> bool:
    """Corruption (rebuild) rather than a busy or unwritable database (work from memory)."""
    return not isinstance(error, sqlite3.OperationalError) or "malformed" in str(error)


class Index:
    """One index database; falls back to an in-memory one when the file cannot be used."""

    def __init__(self, path: Path | None, *, vocab: Vocabulary, busy_timeout: float = 1.0) -> None:
        self.path = path
        self.vocab_version = vocab.version
        self.busy_timeout = busy_timeout
        self.conn = self._open()

    def _open(self) -> sqlite3.Connection:
        if self.path is not None:
            for attempt in range(2):
                try:
                    return self._connect(str(self.path))
                except sqlite3.DatabaseError as error:
                    if attempt == 0 and _is_corrupt(error):
                        self._remove_files()
                        continue
                    break
                except OSError:
                    break
            self.path = None  # unusable (read-only, locked while migrating): a cache in memory
        return self._connect(":memory:")

    def _connect(self, target: str) -> sqlite3.Connection:
        conn = sqlite3.connect(target, timeout=self.busy_timeout, isolation_level=None)
        try:
            if target != ":memory:":
                with contextlib.suppress(sqlite3.OperationalError):
                    # Readers never wait for a writer in WAL mode; a busy database keeps its mode.
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                # Read through a memory map: a warm check reads the whole table (~5 MB at
                # 10,000 runs), and copying it page by page costs more than the query.
                conn.execute("PRAGMA mmap_size=268435456")
            if not self._current(conn):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    # Another process may have rebuilt it while we waited for the write lock.
                    if not self._current(conn):
                        conn.execute("DROP TABLE IF EXISTS runs")
                        conn.execute("DROP TABLE IF EXISTS meta")
                        for statement in _CREATE:
                            conn.execute(statement)
                        conn.execute(
                            "INSERT INTO meta (key, value) VALUES ('vocabulary', ?)",
                            (self.vocab_version,),
                        )
                        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
        except BaseException:
            conn.close()
            raise
        return conn

    def _current(self, conn: sqlite3.Connection) -> bool:
        """True when the database has our schema version and vocabulary."""
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            return False
        row = conn.execute("SELECT value FROM meta WHERE key = 'vocabulary'").fetchone()
        return row is not None and row[0] == self.vocab_version

    def _remove_files(self) -> None:
        assert self.path is not None
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(str(self.path) + suffix)

    def _query(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """Run a read; a corrupt index is replaced by an empty one (everything is re-read)."""
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as error:
            if not _is_corrupt(error):
                return []
            self.close()
            if self.path is not None:
                self._remove_files()
            self.conn = self._open()
            return []

    def stamps(self, prefix: str) -> list[Stamp]:
        """The stamps of every indexed file under ``prefix``."""
        low, high = _prefix_range(prefix)
        sql = "SELECT path, size, mtime_ns FROM runs WHERE path >= ? AND path < ?"
        return self._query(sql, (low, high))

    def rows(self, prefix: str, statuses: Iterable[str] | None, *, light: bool) -> list[Any]:
        """Indexed rows under ``prefix`` of the given statuses (None: every run).

        ``light`` rows are tuples in ``LIGHT_COLUMNS`` order (enough to score a run); the
        others are full ``RunSummary`` records.
        """
        low, high = _prefix_range(prefix)
        columns = ", ".join(LIGHT_COLUMNS if light else _COLUMNS)
        sql = f"SELECT {columns} FROM runs WHERE path >= ? AND path < ?"
        params: list[Any] = [low, high]
        wanted = sorted(statuses) if statuses is not None else None
        if wanted is not None:
            sql += f" AND status IN ({', '.join('?' for _ in wanted)})"
            params.extend(wanted)
        else:
            sql += " AND status IS NOT NULL"
        found = self._query(sql, params)
        return found if light else [_from_row(row) for row in found]

    def by_paths(self, paths: Sequence[str]) -> list[RunSummary]:
        """Full summaries of the given indexed paths."""
        marks = ", ".join("?" * len(paths))
        sql = f"SELECT {', '.join(_COLUMNS)} FROM runs WHERE path IN ({marks})"
        return [_from_row(row) for row in self._query(sql, list(paths))] if paths else []

    def write(
        self, store: Sequence[tuple[Stamp, RunSummary | None]], forget: Sequence[str]
    ) -> bool:
        """Store summaries (None: not a progress file) and forget vanished paths; False if busy."""
        if not store and not forget:
            return True
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.executemany("DELETE FROM runs WHERE path = ?", [(p,) for p in forget])
                self.conn.executemany(_INSERT, [_to_row(stamp, s) for stamp, s in store])
                self.conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError:
            return False  # busy (another process writes) or broken: it is only a cache
        return True

    def close(self) -> None:
        """Close the connection."""
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()


def _prefix_range(prefix: str) -> tuple[str, str]:
    """``[low, high)`` bounds of the strings starting with ``prefix`` (uses the primary key)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _to_row(stamp: Stamp, s: RunSummary | None) -> tuple[Any, ...]:
    if s is None:  # remembered so it is not read again until it changes
        return (*stamp, *([None] * (len(_COLUMNS) - 3)))
    return (
        *stamp,
        s.run_id,
        s.status,
        s.reason,
        s.workflow_name,
        s.workflow_path,
        s.description,
        s.workflow_hash,
        s.steps_done,
        s.steps_total,
        s.cost_usd,
        s.created,
        s.updated,
        " ".join(s.keywords),
        s.inputs_json,
        s.error,
        s.worktree_json,
        s.tokens,
    )


def _from_row(row: Sequence[Any]) -> RunSummary:
    (path, size, mtime, run_id, status, reason, wf_name, wf_path, description, wf_hash) = row[:10]
    (done, total, cost, created, updated, keywords, inputs_json, error, tree, tokens) = row[10:]
    return RunSummary(
        path=Path(path),
        run_id=run_id,
        status=status,
        reason=reason,
        workflow_name=wf_name,
        workflow_path=wf_path,
        description=description,
        workflow_hash=wf_hash,
        steps_done=int(done or 0),
        steps_total=int(total or 0),
        cost_usd=float(cost or 0.0),
        created=created,
        updated=updated,
        keywords=tuple(keywords.split()) if keywords else (),
        inputs_json=inputs_json or "{}",
        error=error,
        worktree_json=tree,
        tokens=int(tokens or 0),
        size=int(size),
        mtime_ns=int(mtime),
    )


# --- gathering summaries --------------------------------------------------------------------


@dataclass
class _Pending:
    """Index writes collected during a scan."""

    index: Index
    store: list[tuple[Stamp, RunSummary | None]] = field(default_factory=list)
    forget: list[str] = field(default_factory=list)


def light_row(summary: RunSummary) -> tuple[Any, ...]:
    """A summary as a light row (``LIGHT_COLUMNS`` order)."""
    return (
        str(summary.path),
        summary.mtime_ns,
        summary.status,
        summary.updated,
        summary.workflow_hash,
        summary.inputs_json,
        " ".join(summary.keywords),
    )


@dataclass
class Gathered:
    """What ``gather`` found, and the index writes still to be made."""

    #: Full summaries (``light=False``).
    summaries: list[RunSummary] = field(default_factory=list)
    #: Light rows (``light=True``): tuples in ``LIGHT_COLUMNS`` order.
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    #: False when the budget ran out before every changed file was read.
    complete: bool = True
    pending: dict[Path | None, _Pending] = field(default_factory=dict)
    #: Summaries read from files during this scan, by path.
    fresh: dict[str, RunSummary] = field(default_factory=dict)

    def full(self, paths: Sequence[str]) -> dict[str, RunSummary]:
        """Full summaries of a few paths found in light mode (call before ``flush``)."""
        found = {p: self.fresh[p] for p in paths if p in self.fresh}
        rest = [p for p in paths if p not in found]
        for item in self.pending.values():
            if not rest:
                break
            for summary in item.index.by_paths(rest):
                found[str(summary.path)] = summary
            rest = [p for p in rest if p not in found]
        return found

    def flush(self) -> None:
        """Store what was read into the indexes (skipped silently when an index is busy)."""
        pending, self.pending = self.pending, {}
        for item in pending.values():
            try:
                item.index.write(item.store, item.forget)
            finally:
                item.index.close()


class _WorkflowKeywords:
    """Keywords of runs that stored none, taken from their workflow file (loaded once each)."""

    def __init__(self) -> None:
        self._loaded: dict[Path, Workflow | None] = {}

    def __call__(self, summary: RunSummary) -> RunSummary:
        if summary.keywords or not summary.workflow_path:
            return summary
        if summary.status not in RESUMABLE_STATUSES:
            return summary  # never a candidate: not worth loading its workflow
        # Imported here: the loader is heavy, and only runs without keywords need it.
        from ..workflow import load_workflow

        path = Path(os.path.normpath(summary.path.parent / summary.workflow_path))
        if path not in self._loaded:
            try:
                self._loaded[path] = load_workflow(path)
            except (FlowError, OSError):  # moved, deleted, unreadable or now invalid
                self._loaded[path] = None  # no keywords: the run is not offered
        workflow = self._loaded[path]
        if workflow is None:
            return summary
        try:
            inputs = json.loads(summary.inputs_json)
        except ValueError:  # a damaged cache row: the run is not offered
            return summary
        words = keywords_for(workflow, inputs if isinstance(inputs, dict) else {})
        return replace(summary, keywords=tuple(words))


def gather(
    sources: Sequence[Source],
    *,
    statuses: Iterable[str] | None = None,
    budget: Budget | None = None,
    reader: Reader | None = None,
    vocab: Vocabulary | None = None,
    light: bool = False,
) -> Gathered:
    """The runs in ``sources`` (only ``statuses``, if given), as summaries or light rows.

    Reads only files the index has not seen at their current size and mtime. When the budget
    runs out, returns what it has with ``complete=False``. Call ``flush()`` either way to store
    what was read. Full summaries of ``running`` runs say whether their owner is alive.
    """
    budget = budget or Budget()
    voc = vocab or vocabulary()
    wanted = frozenset(statuses) if statuses is not None else None
    derive = _WorkflowKeywords()
    result = Gathered()
    seen: set[str] = set()
    try:
        for source in sources:
            budget.check()
            if source.index not in result.pending:
                result.pending[source.index] = _Pending(Index(source.index, vocab=voc))
            pending = result.pending[source.index]
            scanned = source.scan(budget)
            if seen:
                scanned = [stamp for stamp in scanned if stamp[0] not in seen]
            current = set(scanned)
            indexed = pending.index.stamps(source.prefix)
            if source.kind != "runs":  # a runs folder's index rows are all its own
                indexed = [stamp for stamp in indexed if source.covers(stamp[0])]
            known = set(indexed)
            # Set differences run in C: a warm check of 10,000 unchanged runs costs ~2 ms here.
            changed = current - known
            paths: set[str] | None = None  # None: every indexed row is a current file
            if changed or len(current) != len(known) or seen or source.kind != "runs":
                paths = {stamp[0] for stamp in current}
                vanished = {stamp[0] for stamp in known} - paths - seen
                pending.forget.extend(vanished)
            fresh: dict[str, RunSummary] = {}
            for stamp in changed:
                budget.check()
                path, size, mtime_ns = stamp
                summary = read_summary(
                    Path(path), reader=reader, vocab=voc, size=size, mtime_ns=mtime_ns
                )
                if summary is not None:
                    summary = fresh[path] = derive(summary)
                pending.store.append((stamp, summary))
            result.fresh.update(fresh)
            matches = [s for s in fresh.values() if wanted is None or s.status in wanted]
            rows = pending.index.rows(source.prefix, wanted, light=light)
            if light:
                if paths is not None:
                    rows = [r for r in rows if r[0] in paths and r[0] not in fresh]
                result.rows.extend(rows)
                result.rows.extend(light_row(s) for s in matches)
            else:
                if paths is not None:
                    rows = [s for s in rows if str(s.path) in paths and str(s.path) not in fresh]
                result.summaries.extend(rows)
                result.summaries.extend(matches)
            if source is not sources[-1]:
                seen.update(stamp[0] for stamp in current)
    except Cancelled:
        result.complete = False
    result.summaries = [
        replace(s, owner_alive=owner_alive(s.path)) if s.status == "running" else s
        for s in result.summaries
    ]
    return result
