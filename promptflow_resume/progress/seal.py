"""Seals: proof that flow on this machine wrote a run and recorded its pending tool calls.

A progress file may come from anyone (a pull request, another machine), and whoever wrote it
can recompute every digest in it: digests tell a hand edit from corruption, not flow's work
from someone else's. So flow keeps a secret key outside every repository, in the user's
configuration folder, and seals with it what must not be forged:

- the run (its id, creation time, provider and endpoint): ``flow run`` resumes an identical
  run without asking, and a resume sends a key to its recorded endpoint, only when this
  machine's flow sealed it;
- each tool call it records from a model reply, until the call's result is recorded: on
  resume, a call without a result runs only when its seal matches its entry as written now
  (tool, arguments, call id, step, entry id) and, once the call started, its start record
  (whether it may run again, the MCP server that ran it).

A seal is an HMAC-SHA256 of those fields under the key, cut to 128 bits; the key never leaves
the machine and a seal reveals nothing about it. ``by`` names the key (a hash of it) so a
message can say the file was sealed elsewhere::

    key = Key.ensure()                     # ~/.config/flow/key, made on first use
    mark_written_here(run, key)            # a run made or resumed here
    seal_calls(run, key, entries)          # tool calls just recorded from a model reply
    unsealed_calls(run, key, pending)      # the pending calls whose seal does not match
    written_here(run, Key.find())          # None: this machine has no key yet

The key file lives in ``$FLOW_HOME`` when set, else ``$XDG_CONFIG_HOME/flow``, else
``~/.config/flow``; workers that resume each other's runs (a Ray cluster) share it by pointing
``FLOW_HOME`` at one copy. A process may instead be given the key itself in ``FLOW_SEAL_KEY``
(64 hex digits): a batch's rows on Ray nodes get the driver's key that way, through the tasks'
environment, only when the person names the variable (``--ray-env FLOW_SEAL_KEY``), never in a
file that travels.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import StorageError
from ..base.flowhome import flow_home, read_private
from .model import Entry, InFlight, Run, Seal

#: Bytes of a new key.
KEY_BYTES = 32
#: Hex digits kept of each HMAC (128 bits).
SEAL_HEX = 32
#: The version prefix of every seal, so that a later scheme is told apart.
PREFIX = "v1:"
#: The variable that gives a process its key itself (hex), instead of the key file.
KEY_VARIABLE = "FLOW_SEAL_KEY"


def _given_key() -> bytes | None:
    """The key given in ``FLOW_SEAL_KEY``, None when the variable is not set."""
    text = os.environ.get(KEY_VARIABLE, "").strip()
    if not text:
        return None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise StorageError(
            f"{KEY_VARIABLE} is not a sealing key: it must be {2 * KEY_BYTES} hex digits.",
            hint=f"Unset {KEY_VARIABLE} to use the key file in flow's folder, or give the "
            "key of the machine whose runs this process goes on with.",
        )
    return key


def _key_error(path: Path, why: str) -> StorageError:
    return StorageError(
        f"it cannot be used: {why}. It holds the secret that proves a run was written on this "
        "machine.",
        path=path,
        hint="Remove it (flow makes a new one; runs sealed with the old one then count as "
        "written elsewhere) or set FLOW_HOME to another folder.",
    )


def _read_key(path: Path) -> bytes | None:
    """The key in ``path``; None when there is none. A key that is not a regular file of the
    right size owned by this user is refused, so a planted link or FIFO is never read."""
    data = read_private(
        path, KEY_BYTES, what="sealing key", problem=lambda why: _key_error(path, why)
    )
    if data is None:
        return None
    if len(data) != KEY_BYTES:
        raise _key_error(path, f"it holds {len(data)} bytes where a key has {KEY_BYTES}")
    return data


def _create_key(path: Path) -> bytes:
    """Write a new random key to ``path`` (owner-only), unless another process just did."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = secrets.token_bytes(KEY_BYTES)
    tmp = path.with_name(f".key.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        # A hard link never replaces: of two processes creating the key at once, one wins and
        # the other reads the winner's key.
        os.link(tmp, path)
    except FileExistsError:
        found = _read_key(path)
        if found is None:  # pragma: no cover - removed between the two calls
            raise
        key = found
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return key


@dataclass(frozen=True)
class Key:
    """This machine's sealing key."""

    secret: bytes = b""

    @classmethod
    def find(cls) -> Key | None:
        """This machine's key, or None when it has none yet (read commands make none)."""
        found = _given_key() or _read_key(flow_home() / "key")
        return cls(found) if found is not None else None

    @classmethod
    def ensure(cls) -> Key:
        """This machine's key, made on first use (or the one ``FLOW_SEAL_KEY`` gives)."""
        path = flow_home() / "key"
        found = _given_key() or _read_key(path)
        return cls(found if found is not None else _create_key(path))

    @property
    def id(self) -> str:
        """A public name for the key (a hash of it): ``by`` in a progress file's seal."""
        return hashlib.sha256(b"flow-key-id\0" + self.secret).hexdigest()[:12]

    def _mac(self, *fields: str) -> str:
        message = "\0".join(fields).encode("utf-8", "surrogatepass")
        digest = hmac.new(self.secret, message, hashlib.sha256).hexdigest()
        return PREFIX + digest[:SEAL_HEX]

    def run_seal(self, run_id: str, created: str, provider: str, base_url: str | None) -> str:
        """The seal of a run made (or resumed) here, with the endpoint its requests go to:
        an endpoint this machine's flow recorded is the person's own choice (docs/spec.md
        10.2), one changed in the file since is not."""
        return self._mac("run", run_id, created, provider, base_url or "")

    def call_seal(self, run_id: str, call: Entry, flight: InFlight | None = None) -> str:
        """The seal of a tool call recorded from a model reply: covers what runs and where,
        and once it started (``flight``) what resume decides by: whether it may run again,
        and on which MCP server."""
        fields = [run_id, str(call.id), call.step or "", call.call_id or "", call.tool or ""]
        if flight is not None:
            server = json.dumps(flight.server, sort_keys=True) if flight.server else ""
            fields += ["started", str(flight.entry), str(flight.idempotent), server]
        return self._mac("call", *fields, call.content)

    def hook_seal(self, run_id: str, record: str) -> str:
        """The seal of a hook event's record (``hooks.open[]``): what ran for it, and how."""
        return self._mac("hook", run_id, record)

    @staticmethod
    def verifies(recorded: str | None, expected: str) -> bool:
        """True when a recorded seal equals the expected one (compared in constant time)."""
        return recorded is not None and hmac.compare_digest(recorded, expected)


def mark_written_here(run: Run, key: Key) -> None:
    """Seal ``run`` as made (or now resumed) by flow on this machine.

    Seals of calls made with another key are dropped: they cannot be checked here, so those
    calls count as unsealed either way."""
    calls = run.seal.calls if run.seal is not None and run.seal.by == key.id else {}
    seal = key.run_seal(run.run_id, run.created, run.config.provider, run.config.base_url)
    run.seal = Seal(by=key.id, run=seal, calls=dict(calls))


def written_here(run: Run, key: Key | None) -> bool:
    """True when flow on this machine made or last resumed ``run`` (its seal matches)."""
    config = run.config
    fields = (run.run_id, run.created, config.provider, config.base_url)
    return run_sealed_here(fields, run.seal, key)


def run_sealed_here(
    fields: tuple[str, str, str, str | None], seal: Seal | None, key: Key | None
) -> bool:
    """``written_here`` for a run known only by its front matter's fields: run id, creation
    time, provider and endpoint."""
    if key is None or seal is None or seal.by != key.id:
        return False
    return key.verifies(seal.run, key.run_seal(*fields))


def seal_calls(run: Run, key: Key, entries: list[Entry]) -> None:
    """Seal the ``tool_call`` entries among ``entries`` (ids assigned), just recorded from a
    model reply by this process (or let run as written by a person), with their start
    records when they have one."""
    if run.seal is None or run.seal.by != key.id:
        mark_written_here(run, key)
    assert run.seal is not None
    flights = {f.call_id: f for f in run.in_flight}
    for entry in entries:
        if entry.role == "tool_call" and entry.call_id:
            flight = flights.get(entry.call_id)
            run.seal.calls[entry.call_id] = key.call_seal(run.run_id, entry, flight)


def settle_call(run: Run, call_id: str | None) -> None:
    """Forget the seal of a call whose result is now recorded."""
    if run.seal is not None and call_id is not None:
        run.seal.calls.pop(call_id, None)


def unsealed_calls(run: Run, key: Key | None, calls: list[Entry]) -> list[Entry]:
    """The calls among ``calls`` that flow on this machine did not record as they read now."""
    if key is None or run.seal is None or run.seal.by != key.id:
        return list(calls)
    sealed = run.seal.calls
    flights = {f.call_id: f for f in run.in_flight}
    return [
        c
        for c in calls
        if not key.verifies(
            sealed.get(c.call_id or ""),
            key.call_seal(run.run_id, c, flights.get(c.call_id or "")),
        )
    ]
