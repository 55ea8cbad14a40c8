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

from .model import Entry

#: Hex digits kept of each entry digest: enough to notice any edit, short enough to read past.
ENTRY_DIGEST_HEX = 16
_CHAIN_PREFIX = b"flow-transcript-v1\n"


def entry_digest(entry: Entry) -> str:
    """A 16-hex-digit digest of every field of ``entry`` (content included)."""
    head = json.dumps(
        [
            entry.id,
            entry.role,
            entry.step,
            entry.call_id,
            entry.tool,
            entry.is_error,
            entry.sidecar,
            entry.sidecar_sha256,
            entry.sidecar_bytes,
        ],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    # The head is one line of ASCII JSON, so head + newline + content cannot be ambiguous;
    # surrogatepass lets a lone surrogate from a provider be hashed rather than crash.
    h = hashlib.sha256(head.encode("ascii"))
    h.update(b"\n")
    h.update(entry.content.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:ENTRY_DIGEST_HEX]


class Chain:
    """The running root digest over ``(id, entry digest)`` pairs; O(1) per added entry."""

    def __init__(self, pairs: Iterable[tuple[int, str]] = ()) -> None:
        self._hash = hashlib.sha256(_CHAIN_PREFIX)
        self.count = 0
        for entry_id, digest in pairs:
            self.add(entry_id, digest)

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
