"""The journal beside a progress file: one fsynced JSON line per event, deltas only.

``<progress>.journal`` holds the events written since the last fold of ``progress.md``. Its
first line is a header; each following line is one event::

    {"flow_journal": 2, "run_id": "r1", "flow_progress": 7}
    {"seq": 8, "set": [[["updated"], "2026-..."], [["usage"], {...}]], "entries": [{...}]}
    {"seq": 9, "set": [[["steps", "s1", "turns"], 4]], "del": [["reason"]], "entries": []}

An event carries only what changed: the transcript entries it adds and the front matter
fields that differ from the state before it (``set``: path and new value; ``del``: paths
removed). A path is a list of keys and list indexes; an index equal to a list's length
appends. So the journal grows with the payload of a run, never with its front matter, and the
first event after a fold is a delta against the front matter of the file just written.

Version 1 journals (each event repeating the whole front matter under ``fm``) are still read,
so a run a previous version left behind resumes. The header's ``flow_progress`` is the progress
format the events are written in (a header without it is from a flow of format 3 or older):
the store upgrades what older events patch, as it upgrades an older file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import yamlio
from ..base.errors import ProgressFormatError
from ..base.jsonvalues import BadJson, field_path, loads_json
from ..base.safeopen import read_regular
from .model import FORMAT_VERSION, LoadReport

JOURNAL_VERSION = 2
#: Versions this module reads.
READABLE_VERSIONS = (1, 2)
#: The progress format of events whose header does not name one (written before it did).
UNNAMED_FORMAT = 3


def journal_path(progress: str | Path) -> Path:
    """``<progress>.journal``."""
    p = Path(progress)
    return p.with_name(p.name + ".journal")


Path_ = list[str | int]


@dataclass
class Event:
    """One journal event as read: its sequence number, front matter change and new entries."""

    seq: int
    entries: list[dict[str, Any]]
    line: int
    #: ``(path, value)`` pairs to set, in order.
    sets: list[tuple[Path_, Any]] = field(default_factory=list)
    #: Paths to remove.
    deletes: list[Path_] = field(default_factory=list)
    #: A version 1 event's whole front matter (replaces the state instead of patching it).
    whole: dict[str, Any] | None = None
    #: The progress format the event is written in (the journal header's ``flow_progress``).
    format: int = FORMAT_VERSION


def header_line(run_id: str) -> bytes:
    """The first line of a new journal."""
    header = {"flow_journal": JOURNAL_VERSION, "run_id": run_id, "flow_progress": FORMAT_VERSION}
    return (json.dumps(header) + "\n").encode()


def event_line(
    seq: int, sets: list[tuple[Path_, Any]], deletes: list[Path_], entries: list[dict[str, Any]]
) -> bytes:
    """One event as a journal line (ASCII JSON, newline-terminated)."""
    data: dict[str, Any] = {"seq": seq}
    if sets:
        data["set"] = [[path, value] for path, value in sets]
    if deletes:
        data["del"] = deletes
    data["entries"] = entries
    return (json.dumps(data, separators=(",", ":")) + "\n").encode("ascii")


# --- deltas ----------------------------------------------------------------------------------


def _size(value: Any) -> int:
    # An estimate of the JSON size (``repr`` is close, and several times cheaper than
    # encoding): it only chooses between two forms of the same change.
    return len(repr(value))


#: Top-level keys whose values come from people (any JSON value): compared field by field,
#: since ``==`` takes ``True`` for ``1``. Flow's own fields have one type each (the schema), so
#: a subtree equal to the old one is skipped at once.
_FREE_FORM = frozenset({"inputs", "config"})


def _same_scalar(old: Any, new: Any) -> bool:
    # ``True == 1`` and ``1 == 1.0`` in Python; a change of type is a change.
    return type(old) is type(new) and old == new


def diff(old: Any, new: Any) -> tuple[list[tuple[Path_, Any]], list[Path_]]:
    """The ``set`` and ``del`` operations that turn ``old`` into ``new`` (JSON-like values)."""
    sets: list[tuple[Path_, Any]] = []
    deletes: list[Path_] = []
    _diff(old, new, [], sets, deletes)
    return sets, deletes


def _diff(
    old: Any, new: Any, path: Path_, sets: list[tuple[Path_, Any]], deletes: list[Path_]
) -> None:
    if (
        isinstance(old, (dict, list))
        and old == new
        and path
        and path[0] not in _FREE_FORM
        and type(old) is type(new)
    ):
        return
    if isinstance(old, dict) and isinstance(new, dict):
        inner_sets: list[tuple[Path_, Any]] = []
        inner_deletes: list[Path_] = []
        for key, value in new.items():
            if key in old:
                _diff(old[key], value, [*path, key], inner_sets, inner_deletes)
            else:
                inner_sets.append(([*path, key], value))
        inner_deletes.extend([*path, key] for key in old if key not in new)
        _keep_smaller(path, new, inner_sets, inner_deletes, sets, deletes)
    elif isinstance(old, list) and isinstance(new, list) and len(new) >= len(old):
        inner_sets = []
        inner_deletes = []
        for index, value in enumerate(new):
            if index < len(old):
                _diff(old[index], value, [*path, index], inner_sets, inner_deletes)
            else:
                inner_sets.append(([*path, index], value))
        _keep_smaller(path, new, inner_sets, inner_deletes, sets, deletes)
    elif not _same_scalar(old, new):
        sets.append((path, new))


def _keep_smaller(
    path: Path_,
    new: Any,
    inner_sets: list[tuple[Path_, Any]],
    inner_deletes: list[Path_],
    sets: list[tuple[Path_, Any]],
    deletes: list[Path_],
) -> None:
    """Keep the per-field changes of a container, or set it whole when that is shorter."""
    if not inner_sets and not inner_deletes:
        return
    if path and len(inner_sets) + len(inner_deletes) > 1:
        piecewise = sum(_size(p) + _size(v) for p, v in inner_sets) + _size(inner_deletes)
        if _size(new) + _size(path) < piecewise:
            sets.append((path, new))
            return
    sets.extend(inner_sets)
    deletes.extend(inner_deletes)


class PatchError(ValueError):
    """A delta that does not fit the state it is applied to."""


def _parent(state: Any, path: Path_) -> tuple[Any, str | int]:
    if not isinstance(path, list) or not path:
        raise PatchError("a change names no field")
    node: Any = state
    for key in path[:-1]:
        if isinstance(node, dict) and isinstance(key, str) and key in node:
            node = node[key]
            continue
        if (
            isinstance(node, list)
            and isinstance(key, int)
            and not isinstance(key, bool)
            and 0 <= key < len(node)
        ):
            node = node[key]
            continue
        raise PatchError(f"the field {_show(path)} does not exist")
    return node, path[-1]


def _show(path: Path_) -> str:
    return "$" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)


def apply(state: dict[str, Any], sets: list[tuple[Path_, Any]], deletes: list[Path_]) -> None:
    """Apply one event's ``sets`` then ``deletes`` to ``state`` in place."""
    for path, value in sets:
        node, key = _parent(state, path)
        if isinstance(node, dict) and isinstance(key, str):
            node[key] = value
        elif isinstance(node, list) and isinstance(key, int) and not isinstance(key, bool):
            if 0 <= key < len(node):
                node[key] = value
            elif key == len(node):
                node.append(value)
            else:
                raise PatchError(f"the list {_show(path[:-1])} has no item {key}")
        else:
            raise PatchError(f"the field {_show(path)} cannot be set")
    for path in deletes:
        node, key = _parent(state, path)
        if not (isinstance(node, dict) and isinstance(key, str) and key in node):
            raise PatchError(f"the field {_show(path)} cannot be removed")
        del node[key]


# --- reading ---------------------------------------------------------------------------------


def journal_error(
    path: Path, line: int | None, message: str, *, live: bool = False, column: int | None = None
) -> ProgressFormatError:
    """A positioned error in the journal; ``live``: its run has a live writer right now."""
    if live:
        hint = (
            "The run is live: its writer is still appending to this journal. Leave its files "
            "alone and read the run again in a moment, or after the writer stops."
        )
    else:
        hint = (
            "The journal holds events written after the last checkpoint of progress.md. Move "
            "it aside to resume from the checkpoint (losing those events), or restore it."
        )
    return ProgressFormatError(
        message, path=path, line=line, column=column or (1 if line else None), hint=hint
    )


def _at(data: bytes, offset: int) -> tuple[int, int]:
    """Line and column (1-based) of byte ``offset`` in ``data``."""
    return data.count(b"\n", 0, offset) + 1, offset - (data.rfind(b"\n", 0, offset) + 1) + 1


def _where(error: BadJson) -> str:
    """`` at $.usage.cost_usd`` (a front matter field the event sets) or ``$.entries[0]...``."""
    parts = error.parts
    if parts is None:
        return ""
    document = error.document
    if (
        len(parts) >= 3
        and parts[0] == "set"
        and parts[2] == 1
        and isinstance(document, dict)
        and isinstance(document.get("set"), list)
    ):
        pair = document["set"][parts[1]]
        if isinstance(pair, list) and pair and isinstance(pair[0], list):
            return f" (it sets {field_path([*pair[0], *parts[3:]])} of the front matter)"
    return f" at {field_path(parts)}"


def read_raw(path: Path, max_bytes: int) -> bytes | None:
    """The journal's bytes, or None when there is none. One open, so a journal a writer
    removes (a fold) between a check and the read is simply absent, never an error. A journal
    that is a link, a pipe or a device is refused (``SpecialFileError``), and the read stops
    past ``max_bytes`` whatever size the file claims."""
    data = read_regular(path, max_bytes, what="journal")
    if data is not None and len(data) > max_bytes:
        raise journal_error(
            path,
            None,
            f"the journal is over the {max_bytes // (1024 * 1024)} MiB limit; it was not read.",
        )
    return data


def parse_events(
    data: bytes, path: Path, run_id: str, report: LoadReport, *, live: bool = False
) -> list[Event]:
    """The complete events in the journal bytes ``data`` (a torn last line is skipped).

    ``live``: a writer owns the run, so an unfinished last line is being written right now
    (no warning) and any damage is reported without advice to move the file.
    """
    if b"\0" in data:
        line, column = _at(data, data.index(b"\0"))
        raise journal_error(
            path, line, "the journal contains a NUL byte.", live=live, column=column
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line, column = _at(data, error.start)
        raise journal_error(
            path,
            line,
            f"the journal is not UTF-8 text (byte 0x{data[error.start]:02x} cannot be decoded).",
            live=live,
            column=column,
        ) from None
    lines = text.split("\n")
    if lines and lines[-1] != "" and not live:
        report.warnings.append(
            f"{path}:{len(lines)}: the journal's last line is incomplete (the process stopped "
            "while writing it); that event was never confirmed and is ignored."
        )
    lines = lines[:-1]
    if not lines:
        return []
    written_in = _header_format(lines[0], path, run_id, live=live)
    events: list[Event] = []
    for number, raw_line in enumerate(lines[1:], start=2):
        try:
            # + 3 levels: the event, "set", the pair. Deep values would fail later, when the
            # checkpoint is written as YAML; NaN and huge integers would pass budgets and
            # crash printing (docs/spec.md 10.5).
            data_ = loads_json(raw_line, max_depth=yamlio.MAX_DEPTH + 3)
        except BadJson as error:
            raise journal_error(
                path,
                number,
                f"this journal line holds a value flow never writes{_where(error)}: "
                f"{error.problem}.",
                live=live,
                column=error.column,
            ) from None
        except ValueError:
            data_ = None
        try:
            event = _event(data_, number)
            event.format = written_in
        except (KeyError, TypeError):
            raise journal_error(
                path, number, "this journal line is damaged (not a complete event).", live=live
            ) from None
        if events and event.seq != events[-1].seq + 1:
            raise journal_error(
                path,
                number,
                f"journal events must count up by one; expected {events[-1].seq + 1}, "
                f"found {event.seq}.",
                live=live,
            )
        events.append(event)
    return events


def _header_format(line: str, path: Path, run_id: str, *, live: bool) -> int:
    """The progress format the events are written in, from the journal's header ``line``; an
    error for a header of no known version, or of another run."""
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("flow_journal") not in READABLE_VERSIONS:
        raise journal_error(path, 1, "this is not a flow journal of a known version.", live=live)
    written_in = header.get("flow_progress", UNNAMED_FORMAT)
    if isinstance(written_in, bool) or not isinstance(written_in, int):
        raise journal_error(path, 1, "this is not a flow journal of a known version.", live=live)
    if header.get("run_id") != run_id:
        raise journal_error(
            path,
            1,
            f"this journal belongs to run {header.get('run_id')!r}, not to {run_id!r}.",
            live=live,
        )
    return written_in


def _event(data: Any, number: int) -> Event:
    if not isinstance(data, dict):
        raise TypeError("not an object")
    seq = data["seq"]
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise TypeError("seq")
    entries = data["entries"]
    if not isinstance(entries, list):
        raise TypeError("entries")
    if "fm" in data:  # version 1
        if not isinstance(data["fm"], dict):
            raise TypeError("fm")
        return Event(seq, entries, number, whole=dict(data["fm"]))
    sets = []
    for pair in data.get("set", []):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], list)):
            raise TypeError("set")
        sets.append((pair[0], pair[1]))
    deletes = data.get("del", [])
    if not isinstance(deletes, list) or not all(isinstance(p, list) for p in deletes):
        raise TypeError("del")
    return Event(seq, entries, number, sets=sets, deletes=deletes)
