"""One transcript entry of a run (``Entry``) and the metadata its marker carries (``EntryMeta``):
when it was recorded and what its call took.

The metadata is written on each entry's marker line (``at=``, ``ms=``, ...; docs/spec.md 2.3);
a long file's reader may leave it unread until first asked for (``defer_meta``)::

    entry = Entry(id=4, role="assistant", content="Done.", step="report")
    entry.meta = meta_from_fields({"at": "2026-11-21T23:25:29.123Z", "ms": "840"})
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol, overload

#: ``compaction``: a summary that stands for earlier entries in requests (docs/spec.md 4.9).
#: ``decision``: a recovery decision (``flow resume --decide``), read by people, not sent to
#: the model.
Role = Literal[
    "system", "user", "assistant", "tool_call", "tool_result", "note", "compaction", "decision"
]
ROLES: tuple[str, ...] = (
    "system",
    "user",
    "assistant",
    "tool_call",
    "tool_result",
    "note",
    "compaction",
    "decision",
)


@dataclass(frozen=True)
class EntryMeta:
    """When an entry was recorded and, for a model reply or a tool result, what the call took.

    Written on each entry's marker (``at=``, ``ms=``, ...; docs/spec.md 2.3) by format 7 and
    later: what ``flow export otel`` turns into spans (docs/spec.md 13). All optional, since
    entries written by an older flow, or by hand, have none.
    """

    #: When the entry was recorded: UTC with milliseconds (``2026-11-21T23:25:29.123Z``).
    at: str | None = None
    #: How long the call took, in milliseconds: a model call (with its retries) on an
    #: ``assistant`` or ``compaction`` entry, the tool on a ``tool_result`` entry.
    ms: int | None = None
    #: The model the request went to, and the model that answered when it differs.
    model: str | None = None
    answered_by: str | None = None
    #: Input, output and cached input tokens the provider reported for the reply.
    tokens: tuple[int, int, int] | None = None
    #: What the reply cost (USD), as flow priced it.
    cost: float | None = None
    #: The provider's finish reason (``stop``, ``tool_calls``, ``length``, ...).
    finish: str | None = None
    #: Transient errors retried before the reply came.
    retries: int | None = None
    #: A streamed reply: milliseconds from sending the request to its first token, and its
    #: output tokens per second while it was generated (one decimal).
    ttft: int | None = None
    tps: float | None = None
    #: What kind of tool answered a ``tool_result``: ``builtin``, ``command``, ``mcp``,
    #: ``workflow`` or ``agent``; and for ``mcp`` the server's name.
    kind: str | None = None
    server: str | None = None
    #: Marker fields this flow does not know (a newer flow's), as read: written back after
    #: the known ones, in their order, and hashed with them (docs/spec.md 2.5).
    extra: tuple[tuple[str, str], ...] = ()

    def fields(self) -> list[tuple[str, str]]:
        """The set fields as marker ``key=value`` pairs: the known ones in their fixed order,
        then the unknown ones as read."""
        out: list[tuple[str, str]] = []
        for key in META_KEYS:
            value = getattr(self, key)
            if value is None:
                continue
            if key == "tokens":
                value = "/".join(str(n) for n in value)
            elif key == "cost":
                value = repr(float(value))
            elif key == "tps":
                value = f"{float(value):.1f}"
            out.append((key, str(value)))
        out.extend(self.extra)
        return out


#: The ``EntryMeta`` fields in marker order (docs/spec.md 2.3).
META_KEYS: tuple[str, ...] = (
    "at",
    "ms",
    "model",
    "answered_by",
    "tokens",
    "cost",
    "finish",
    "retries",
    "ttft",
    "tps",
    "kind",
    "server",
)


#: The form of a marker field's name: what a later format may add (docs/spec.md 2.5).
FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


def meta_from_fields(pairs: dict[str, str]) -> EntryMeta:
    """An ``EntryMeta`` from its marker fields (``EntryMeta.fields``), those this flow does
    not know kept in ``extra``; ValueError names a field that is not of its form."""
    values: dict[str, Any] = {}
    extra: list[tuple[str, str]] = []
    for key, text in pairs.items():
        if key not in META_KEYS:
            if FIELD_NAME.fullmatch(key) is None:
                raise ValueError(f"unknown field {key!r}")
            extra.append((key, text))
            continue
        if key in ("ms", "retries", "ttft"):
            if not text.isdigit() or len(text) > 18:
                raise ValueError(f"{key}={text!r} is not a whole number")
            values[key] = int(text)
        elif key == "tokens":
            parts = text.split("/")
            if len(parts) != 3 or not all(p.isdigit() and len(p) <= 18 for p in parts):
                raise ValueError(f"tokens={text!r} is not INPUT/OUTPUT/CACHED")
            values[key] = (int(parts[0]), int(parts[1]), int(parts[2]))
        elif key == "cost":
            cost = float(text)
            if not 0 <= cost < 1e12 or repr(cost) != text:
                raise ValueError(f"cost={text!r} is not a number of dollars")
            values[key] = cost
        elif key == "tps":
            if _TPS.fullmatch(text) is None:
                raise ValueError(f"tps={text!r} is not tokens per second like 31.4")
            values[key] = float(text)
        elif key == "at":
            if _AT.fullmatch(text) is None:
                raise ValueError(f"at={text!r} is not a UTC time like 2026-11-21T23:25:29.123Z")
            values[key] = text
        else:
            values[key] = text
    return EntryMeta(**values, extra=tuple(extra))


#: The meta fields of a marker exactly as ``EntryMeta.fields`` writes them (each known key at
#: most once, in ``META_KEYS`` order, values in their canonical form but for ``cost``, whose
#: ``repr`` a reader checks apart): ``meta_as_written`` reads what this matches.
_N = rb"(0|[1-9][0-9]{0,17})"
_V = rb"([A-Za-z0-9_.:/~+@,-]+)"
WRITTEN_META = (
    rb"(?: at=([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z))?"
    rb"(?: ms=N)?(?: model=V)?(?: answered_by=V)?(?: tokens=N/N/N)?(?: cost=([0-9][0-9.e+-]*))?"
    rb"(?: finish=V)?(?: retries=N)?(?: ttft=N)?(?: tps=([0-9]{1,9}\.[0-9]))?(?: kind=V)?"
    rb"(?: server=V)?".replace(b"N", _N).replace(b"V", _V)
)
_WRITTEN_META = re.compile(WRITTEN_META)


def meta_as_written(written: bytes) -> EntryMeta:
    """The ``EntryMeta`` of marker meta fields that ``WRITTEN_META`` matches whole (a reader
    has checked that, and that ``cost`` is its float's ``repr``)."""
    match = _WRITTEN_META.fullmatch(written)
    if match is None:
        raise ValueError(f"not marker fields as flow writes them: {written!r}")
    values = [None if value is None else value.decode() for value in match.groups()]
    at, ms, model, answered, t_in, t_out, t_cached, cost, finish, retries = values[:10]
    ttft, tps, kind, server = values[10:]
    return EntryMeta(
        at=at,
        ms=None if ms is None else int(ms),
        model=model,
        answered_by=answered,
        # The pattern has the three numbers of tokens= or none.
        tokens=None if t_in is None else (int(t_in), int(t_out or 0), int(t_cached or 0)),
        cost=None if cost is None else float(cost),
        finish=finish,
        retries=None if retries is None else int(retries),
        ttft=None if ttft is None else int(ttft),
        tps=None if tps is None else float(tps),
        kind=kind,
        server=server,
    )


_TPS = re.compile(r"[0-9]{1,9}\.[0-9]")
_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{3})?Z")


class _MetaHolder(Protocol):
    """The two attributes ``_Meta`` keeps on every entry (set in its ``__init__``)."""

    _meta: EntryMeta | bytes | None
    _meta_written: bytes | None


class _Meta:
    """``Entry.meta``: an ``EntryMeta`` or None, or, for an entry a long file's reader left
    unread (``defer_meta``), the marker's bytes, read into an ``EntryMeta`` when first asked
    for. Kept in two attributes every entry has (``_meta``, and ``_meta_written``: the bytes
    the value came from, None once it is set otherwise), so each entry keeps the compact
    attribute layout CPython gives instances whose attributes are all set in ``__init__``
    (deleting one would give it a plain dict, slower to read every attribute from)."""

    @overload
    def __get__(self, entry: None, owner: type[Entry]) -> None: ...
    @overload
    def __get__(self, entry: Entry, owner: type[Entry]) -> EntryMeta | None: ...
    def __get__(self, entry: Entry | None, owner: type[Entry]) -> EntryMeta | None:
        if entry is None:
            return None  # the field's default
        holder: _MetaHolder = entry  # type: ignore[assignment]
        meta = holder._meta
        if isinstance(meta, bytes):
            # Two threads may both read it: the same bytes give equal metadata.
            meta = holder._meta = meta_as_written(meta)
        return meta

    def __set__(self, entry: Entry, meta: EntryMeta | None) -> None:
        holder: _MetaHolder = entry  # type: ignore[assignment]
        holder._meta = meta
        holder._meta_written = None


@dataclass
class Entry:
    """One transcript entry: a message, a tool call, a tool result, or a note from flow.

    ``id`` counts from 1 in file order and never changes. ``call_id`` and ``tool`` are set on
    ``tool_call`` and ``tool_result`` entries; a tool call's ``content`` is its arguments as
    JSON text. ``sidecar`` names a file in the sidecar folder holding the full content of a
    large or binary tool result (then ``content`` is a short preview and ``sidecar_sha256``
    the hash of the file's bytes).

    A ``compaction`` entry holds a summary that stands, in model requests, for the entries
    whose ids lie in ``covers`` (first and last id, inclusive) other than the ones kept
    verbatim (the system entry and each step's prompt); see ``conversation.request_view``.
    The covered entries stay in the transcript unchanged.
    """

    id: int
    role: Role
    content: str
    step: str | None = None
    call_id: str | None = None
    tool: str | None = None
    is_error: bool = False
    sidecar: str | None = None
    sidecar_sha256: str | None = None
    sidecar_bytes: int | None = None
    #: For a ``compaction`` entry: the first and last id of the entries it summarises.
    covers: tuple[int, int] | None = None
    #: When it was recorded and what its call took (format 7 and later; None before).
    meta: _Meta = _Meta()


def defer_meta(entry: Entry, written: bytes) -> None:
    """Make ``entry.meta`` the marker fields ``written`` (matched whole by ``WRITTEN_META``),
    read only when first asked for: most readers of a long run never look at them (about 5
    microseconds an entry saved). Equality, ``replace`` and the digests see the fields."""
    holder: _MetaHolder = entry  # type: ignore[assignment]
    holder._meta = holder._meta_written = written


def meta_key(entry: Entry) -> EntryMeta | bytes | None:
    """What tells ``entry.meta`` apart from another without reading it: the marker's bytes
    for metadata read from the file and not set since (read or not), else the metadata.
    Equal keys mean equal metadata (the bytes give one ``EntryMeta``); an unequal pair may
    still be equal (bytes against what they give), which a cache only pays for in misses."""
    holder: _MetaHolder = entry  # type: ignore[assignment]
    written = holder._meta_written
    return entry.meta if written is None else written
