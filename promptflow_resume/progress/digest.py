"""Digests that tell a hand edit of the transcript from corruption.

Every entry gets a short digest of all its fields (written next to its heading in the body);
the front matter holds one root digest that the entry digests chain to, in order. On load an
entry whose content no longer matches its own digest was edited by hand (honored and reported);
digests that do not chain to the root mean entries were lost, reordered or tampered with::

    chain = Chain()
    for entry in run.transcript:
        chain.add(entry.id, entry_digest(entry))
    chain.root()      # "sha256:<64 hex>", the front matter's transcript.digest
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from json.encoder import encode_basestring_ascii

from .model import Entry

#: Hex digits kept of each entry digest: enough to notice any edit, short enough to read past.
ENTRY_DIGEST_HEX = 16
_CHAIN_PREFIX = b"flow-transcript-v1\n"


#: The string escaper ``json.dumps(..., ensure_ascii=True)`` itself uses (the C one).
_quote = encode_basestring_ascii
_sha256 = hashlib.sha256


#: The parts of head lines around the id and call id, by the other fields: a run repeats a few
#: (one per role, step and tool), so each is built once. Emptied when it grows past the limit.
_SHAPES: dict[tuple[object, ...], tuple[str, str]] = {}
_SHAPES_LIMIT = 1024


def _head(entry: Entry) -> str:
    """The JSON head line hashed before an entry's content.

    It equals ``json.dumps([id, role, step, call_id, tool, is_error, sidecar, sidecar_sha256,
    sidecar_bytes], ensure_ascii=True, separators=(",", ":"))`` (a compaction entry appends
    its ``covers``), built without the encoder's per-call set-up when every field has the type
    a parsed entry has; anything else (say, a value replayed from a hand-made journal) goes
    through ``json.dumps`` itself.
    """
    e = entry
    size = e.sidecar_bytes
    if (
        e.covers is None
        and e.meta is None
        and (
            type(e.id) is int
            and type(e.role) is str
            and (size is None or type(size) is int)
            and (e.is_error is True or e.is_error is False)
        )
    ):
        shape = (e.role, e.step, e.tool, e.is_error, e.sidecar, e.sidecar_sha256, size)
        try:
            parts = _SHAPES.get(shape)
            if parts is None:
                if len(_SHAPES) >= _SHAPES_LIMIT:
                    _SHAPES.clear()
                parts = _SHAPES[shape] = head_parts(*shape)
            call = "null" if e.call_id is None else _quote(e.call_id)
            return f"[{e.id}{parts[0]}{call}{parts[1]}"
        except TypeError:  # a field that is not a string (or not hashable): json.dumps decides
            pass
    return _head_by_json(e)


def head_parts(
    role: str,
    step: str | None,
    tool: str | None,
    is_error: bool,
    sidecar: str | None,
    sidecar_sha256: str | None,
    sidecar_bytes: int | None,
) -> tuple[str, str]:
    """The head line of an entry without a ``covers`` around its id and call id: the line is
    ``[`` + id + first + call id (JSON, or ``null``) + second. Entries of one step, role and
    tool share these, so readers and writers build them once per run."""
    return (
        f",{_quote(role)},{'null' if step is None else _quote(step)},",
        f",{'null' if tool is None else _quote(tool)},"
        f"{'true' if is_error else 'false'},"
        f"{'null' if sidecar is None else _quote(sidecar)},"
        f"{'null' if sidecar_sha256 is None else _quote(sidecar_sha256)},"
        f"{'null' if sidecar_bytes is None else sidecar_bytes}]",
    )


def _head_by_json(e: Entry) -> str:
    """The head line through ``json.dumps`` itself (the reference the fast path agrees with)."""
    fields: list[object] = [
        e.id,
        e.role,
        e.step,
        e.call_id,
        e.tool,
        e.is_error,
        e.sidecar,
        e.sidecar_sha256,
        e.sidecar_bytes,
    ]
    if e.covers is not None:
        # Only compaction entries carry it: every other entry's head (and so every digest
        # written before compaction existed) stays as it was.
        fields.append(list(e.covers))
    if e.meta is not None:
        # Format 7 entries: their marker fields after everything else, so the digests of
        # entries written before (without them) stay as they were.
        if e.covers is None:
            fields.append(None)
        fields.append([[key, value] for key, value in e.meta.fields()])
    return json.dumps(fields, ensure_ascii=True, separators=(",", ":"))


def entry_digest(entry: Entry, content_utf8: bytes | None = None) -> str:
    """A 16-hex-digit digest of every field of ``entry`` (content included).

    A reader that holds the content's UTF-8 bytes (as read from a file) passes them as
    ``content_utf8`` so they are hashed as they are instead of encoded again.
    """
    # The head is one line of ASCII JSON, so head + newline + content cannot be ambiguous;
    # surrogatepass lets a lone surrogate from a provider be hashed rather than crash.
    h = _sha256(f"{_head(entry)}\n".encode("ascii"))
    if content_utf8 is None:
        content_utf8 = entry.content.encode("utf-8", "surrogatepass")
    h.update(content_utf8)
    return h.hexdigest()[:ENTRY_DIGEST_HEX]


class Chain:
    """The running root digest over ``(id, entry digest)`` pairs; O(1) per added entry."""

    def __init__(self, pairs: Iterable[tuple[int, str]] = ()) -> None:
        self._hash = hashlib.sha256(_CHAIN_PREFIX)
        # One update of the joined lines hashes exactly what one update per pair would.
        lines = [f"{entry_id} {digest}\n" for entry_id, digest in pairs]
        self._hash.update("".join(lines).encode("ascii", "replace"))
        self.count = len(lines)

    def add(self, entry_id: int, digest: str) -> None:
        """Append one entry's digest."""
        self._hash.update(f"{entry_id} {digest}\n".encode("ascii", "replace"))
        self.count += 1

    def root(self) -> str:
        """The root digest as written in the front matter (``sha256:<hex>``)."""
        return "sha256:" + self._hash.copy().hexdigest()

    def copy(self) -> Chain:
        """An independent copy (to try additions without committing them)."""
        other = Chain()
        other._hash = self._hash.copy()
        other.count = self.count
        return other


def transcript_digest(entries: Iterable[Entry]) -> str:
    """The root digest of ``entries`` computed from their content."""
    chain = Chain()
    for entry in entries:
        chain.add(entry.id, entry_digest(entry))
    return chain.root()
