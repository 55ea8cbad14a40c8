"""Replaying the journal beside a progress file onto the run its file holds, and the journal's
form of an entry.

A crash leaves the events written since the last fold in ``<progress>.journal``; loading the
run applies those newer than the file (``replay``), checking that each continues the one
before it and that the result matches the digests the last event records::

    run = replay(run, digests, chain, events, journal_path(path), report)
    line = entry_to_dict(entry)              # an entry as a journal event carries it
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..base.errors import DigestError
from . import journal
from .digest import Chain, entry_digest
from .entry import EntryMeta, meta_from_fields
from .frontmatter import front_matter, read_front_matter
from .migrations import upgrade_front_matter
from .model import FORMAT_VERSION, Entry, LoadReport, Run
from .render import marker_value


def entry_to_dict(entry: Entry) -> dict[str, Any]:
    """An entry as a compact JSON-ready dict (the journal's form)."""
    out: dict[str, Any] = {"id": entry.id, "role": entry.role, "content": entry.content}
    for key in ("step", "call_id", "tool", "sidecar", "sidecar_sha256", "sidecar_bytes"):
        value = getattr(entry, key)
        if value is not None:
            out[key] = value
    if entry.is_error:
        out["is_error"] = True
    if entry.covers is not None:
        out["covers"] = list(entry.covers)
    if entry.meta is not None:
        # One string in the marker's form: the journal grows with the payload, not the keys.
        out["meta"] = " ".join(f"{k}={marker_value(v)}" for k, v in entry.meta.fields())
    return out


def _meta_from_text(text: str) -> EntryMeta:
    """An entry's meta from its journal form (``entry_to_dict``)."""
    pairs = {}
    for token in text.split():
        key, _, value = token.partition("=")
        pairs[key] = unquote(value, errors="surrogatepass")
    return meta_from_fields(pairs)


def entry_from_dict(data: dict[str, Any]) -> Entry:
    """Inverse of ``entry_to_dict``."""
    return Entry(
        id=int(data["id"]),
        role=data["role"],
        content=data["content"],
        step=data.get("step"),
        call_id=data.get("call_id"),
        tool=data.get("tool"),
        is_error=bool(data.get("is_error", False)),
        sidecar=data.get("sidecar"),
        sidecar_sha256=data.get("sidecar_sha256"),
        sidecar_bytes=data.get("sidecar_bytes"),
        covers=(int(data["covers"][0]), int(data["covers"][1])) if data.get("covers") else None,
        meta=_meta_from_text(data["meta"]) if data.get("meta") else None,
    )


def replay(
    run: Run,
    digests: list[str],
    chain: Chain,
    events: list[journal.Event],
    path: Path,
    report: LoadReport,
    *,
    live: bool = False,
) -> Run:
    """Apply the journal ``events`` newer than the file to ``run``; return the resulting run.

    ``digests`` are the stored digests of ``run.transcript`` and ``chain`` the chain over them;
    both are extended in place. Each event patches the front matter state before it, starting
    from the front matter of the file itself.
    """
    pending = [e for e in events if e.seq > run.journal_seq]
    if not pending:
        return run
    hint_live = (
        "The run is live: leave its files alone and read it again in a moment."
        if live
        else "Move the journal aside to resume from the checkpoint in progress.md."
    )
    if pending[0].whole is None and pending[0].seq != run.journal_seq + 1:
        raise DigestError(
            f"journal event {pending[0].seq} follows event {pending[0].seq - 1}, but the file "
            f"was folded at event {run.journal_seq}: the journal does not continue this file.",
            path=path,
            line=pending[0].line,
            column=1,
            hint=hint_live,
        )
    transcript = run.transcript
    state = front_matter(run, entries=len(transcript), digest=chain.root())
    for event in pending:
        _add_entries(event, transcript, digests, chain, path, hint_live, live=live)
        if event.whole is not None:
            # A version 1 journal (an older flow's): its whole front matter, upgraded.
            state = upgrade_front_matter(dict(event.whole))
            continue
        try:
            journal.apply(state, event.sets, event.deletes)
        except journal.PatchError as error:
            raise journal.journal_error(
                path,
                event.line,
                f"journal event {event.seq} changes the front matter in a way that does not "
                f"fit the state before it: {error}.",
                live=live,
            ) from None
    last = pending[-1]
    if last.format < FORMAT_VERSION:
        # An older flow's events patched the state as its format writes it: upgrade the
        # result as that flow's file would be (the upgrades are safe to run again).
        state = upgrade_front_matter({**state, "flow_progress": last.format})
    result = read_front_matter(state, path=path, context=f"journal event {last.seq}: ")
    recorded = state["transcript"]
    if recorded["entries"] != len(transcript) or recorded["digest"] != chain.root():
        raise DigestError(
            f"journal event {last.seq} records a transcript that does not match the entries "
            "before it: the journal or the file was altered.",
            path=path,
            line=last.line,
            column=1,
            hint=hint_live,
        )
    result.transcript = transcript
    result.journal_seq = last.seq
    report.replayed_events = len(pending)
    return result


def _add_entries(
    event: journal.Event,
    transcript: list[Entry],
    digests: list[str],
    chain: Chain,
    path: Path,
    hint_live: str,
    *,
    live: bool,
) -> None:
    """Append the entries ``event`` adds to ``transcript``, their digests to ``digests`` and
    ``chain``; an error for a damaged entry, or one that does not continue the transcript."""
    for data in event.entries:
        try:
            entry = entry_from_dict(data)
        except (KeyError, TypeError, ValueError):
            raise journal.journal_error(
                path, event.line, "an entry in this journal event is damaged.", live=live
            ) from None
        if entry.id != len(transcript) + 1:
            raise DigestError(
                f"journal event {event.seq} adds entry {entry.id}, but the transcript has "
                f"{len(transcript)} entries: the journal does not continue this file.",
                path=path,
                line=event.line,
                column=1,
                hint=hint_live,
            )
        digest = entry_digest(entry)
        transcript.append(entry)
        digests.append(digest)
        chain.add(entry.id, digest)
