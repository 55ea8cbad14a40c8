"""The records of a run's hooks (``hooks:`` in the front matter, docs/spec.md 4.15): the events
whose hooks have not all run yet, each hook's run, and how many hook runs the run has had.
A crash never runs a hook recorded here again for the same event::

    ledger = HookLedger()
    open_event = ledger.find("preToolUse", "call:c1")
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class HookRun:
    """One hook's run for one event: how it ended, its redacted output's start."""

    #: ``FILE#event[i]``: the hooks file, the event and the entry's index there.
    hook: str
    #: The exit code (negative: the signal that killed it); None when it could not start.
    exit: int | None
    ms: int
    timed_out: bool = False
    #: A ``preToolUse`` hook's ``permissionDecision`` and its reason.
    decision: str | None = None
    reason: str | None = None
    output: str | None = None
    #: A ``preToolUse`` hook's new arguments for the call (JSON text, redacted) and its
    #: ``additionalContext``; kept while the call waits for its result, so a resume runs the
    #: call as the hook changed it (docs/spec.md 4.15).
    args: str | None = None
    context: str | None = None


@dataclass
class HookEvent:
    """An event whose hooks have not all run yet, or (``preToolUse``) whose decision the run
    still needs: what it is about (``call:ID``, ``entry:N``, ``attempt:N``) and the runs so
    far. A crash never runs a hook recorded here again for the same event."""

    event: str
    key: str
    ran: list[HookRun] = field(default_factory=list)
    #: This machine's seal of the record (docs/spec.md 10.8): a record that does not verify
    #: is dropped, and its hooks run again.
    seal: str | None = None


@dataclass
class HookLedger:
    """The run's hook events still open, and how many hook runs the run has had."""

    open: list[HookEvent] = field(default_factory=list)
    runs: int = 0

    def find(self, event: str, key: str) -> HookEvent | None:
        """The open record of ``event`` about ``key``, if any."""
        return next((e for e in self.open if e.event == event and e.key == key), None)

    def close(self, event: str, key: str) -> None:
        """Forget the record of ``event`` about ``key`` (its hooks are done with)."""
        self.open = [e for e in self.open if not (e.event == event and e.key == key)]
