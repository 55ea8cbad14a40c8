"""A cost budget shared by processes: reservations and spending in one small file.

A batch's ``--max-cost`` is one total over rows that run at the same time in several
processes (local workers, Ray tasks on machines that mount the batch folder). Each process
holds a ``CostLedger`` on the same file, ``DIR/budget.json``; every change happens under a
file lock beside it (``DIR/.budget.json.lock``), read, changed and written atomically::

    ledger = CostLedger(folder / "budget.json", owner="host:1234:row7")
    held = ledger.reserve(0.002)  # None: the budget cannot take this call; do not make it
    ...  # the model call
    ledger.settle(held, actual_cost)  # the actual cost replaces the reservation

The rule (docs/spec.md 8.3): a call is admitted when ``spent + reserved + estimate <= limit``,
where ``reserved`` holds the estimates of the calls in flight elsewhere. A call whose
actual cost exceeds its estimate pushes ``spent`` past what was admitted by that difference
only, and every later admission sees it; so the total spent never exceeds the limit by more
than the excess of the calls in flight when the last call was admitted, at most one per
process: ``spent <= limit + sum over workers of one call's cost``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .durable import replace_file
from .errors import InvalidFileError
from .safeopen import read_regular, refuse_special

#: Format version of the ledger file.
LEDGER_FORMAT = 1
#: A ledger is a few hundred bytes (one reservation per worker); more is not one of ours.
MAX_LEDGER_BYTES = 1 << 20


@dataclass(frozen=True)
class Reservation:
    """A call admitted against the ledger: its key and the amount held for it."""

    key: str
    amount: float


@dataclass(frozen=True)
class LedgerState:
    """What the ledger file says at one moment."""

    limit_usd: float
    spent_usd: float
    reserved: dict[str, float]
    #: True once a call was refused since the limit was last set: the budget is used up.
    refused: bool = False

    @property
    def held(self) -> float:
        """USD reserved by calls in flight."""
        return sum(self.reserved.values())

    def exhausted(self) -> bool:
        """Whether no more calls should start: spent reached the limit, or one was refused."""
        # "not below" rather than "at or above": NaN counts as exhausted.
        return self.refused or not self.spent_usd < self.limit_usd

    def to_json(self) -> dict[str, Any]:
        """The file's document."""
        return {
            "flow_budget": LEDGER_FORMAT,
            "limit_usd": self.limit_usd,
            "spent_usd": round(self.spent_usd, 9),
            "reserved": {k: round(v, 9) for k, v in sorted(self.reserved.items())},
            "refused": self.refused,
        }


def _number(doc: dict[str, Any], key: str, path: Path) -> float:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidFileError(
            f"the budget ledger has no valid {key!r} (a finite number).",
            path=path,
            field=f"$.{key}",
            hint="Resume the batch with --max-cost USD: the ledger is written again.",
        )
    return float(value)


class SharedBudget(Protocol):
    """A cost budget shared with runs elsewhere: a ``CostLedger`` on the batch's file, or a
    row on a Ray node asking the batch's driver to hold one for it (``batch.relay``)."""

    def reserve(self, estimate: float) -> Reservation | None:
        """Hold ``estimate`` USD for one call, or None when the budget cannot take it."""

    def settle(self, reservation: Reservation, cost: float) -> None:
        """Replace the reservation by the call's actual cost (0 for a call that failed)."""

    def read(self) -> LedgerState:
        """The budget as it stands."""


class CostLedger:
    """One process's handle on a shared cost budget file (see the module docstring)."""

    def __init__(self, path: str | Path, *, owner: str) -> None:
        self.path = Path(path)
        self.owner = owner
        self._count = 0

    def _lock(self) -> Any:
        from filelock import FileLock

        lock_path = self.path.with_name(f".{self.path.name}.lock")
        refuse_special(lock_path, what="budget lock file")
        return FileLock(str(lock_path), mode=0o600, thread_local=False)

    def _read(self) -> LedgerState:
        data = read_regular(self.path, MAX_LEDGER_BYTES, what="budget ledger")
        if data is None or len(data) > MAX_LEDGER_BYTES:
            raise InvalidFileError(
                "the batch's budget ledger is missing or too large.",
                path=self.path,
                hint="Resume the batch: the ledger is written again from the rows' own files.",
            )
        try:
            doc = json.loads(data)
        except ValueError as error:
            raise InvalidFileError(
                f"the budget ledger is not valid JSON: {error}.", path=self.path
            ) from None
        if not isinstance(doc, dict) or doc.get("flow_budget") != LEDGER_FORMAT:
            raise InvalidFileError(
                "the budget ledger is not a flow budget file of format 1.",
                path=self.path,
                field="$.flow_budget",
            )
        raw = doc.get("reserved")
        reserved = (
            {str(k): _number(raw, k, self.path) for k in raw} if isinstance(raw, dict) else {}
        )
        return LedgerState(
            limit_usd=_number(doc, "limit_usd", self.path),
            spent_usd=_number(doc, "spent_usd", self.path),
            reserved=reserved,
            refused=doc.get("refused") is True,
        )

    def _write(self, state: LedgerState) -> None:
        text = json.dumps(state.to_json(), indent=1) + "\n"
        replace_file(self.path, text.encode("utf-8"))

    def reset(self, limit_usd: float, spent_usd: float) -> LedgerState:
        """Start the ledger afresh: the limit, what was spent so far, nothing in flight."""
        state = LedgerState(limit_usd=limit_usd, spent_usd=spent_usd, reserved={})
        with self._lock():
            self._write(state)
        return state

    def read(self) -> LedgerState:
        """The ledger as it stands (under the lock, so never half a change)."""
        with self._lock():
            return self._read()

    def reserve(self, estimate: float) -> Reservation | None:
        """Hold ``estimate`` USD for one call, or None when the budget cannot take it."""
        self._count += 1
        key = f"{self.owner}#{os.getpid()}.{self._count}"
        with self._lock():
            state = self._read()
            # Written so that NaN refuses: every comparison with NaN is false.
            if not state.spent_usd + state.held + estimate <= state.limit_usd:
                if not state.refused:
                    self._write(LedgerState(state.limit_usd, state.spent_usd, state.reserved, True))
                return None
            reserved = {**state.reserved, key: estimate}
            self._write(LedgerState(state.limit_usd, state.spent_usd, reserved, state.refused))
        return Reservation(key, estimate)

    def settle(self, reservation: Reservation, cost: float) -> None:
        """Replace the reservation by the call's actual cost (0 for a call that failed)."""
        with self._lock():
            state = self._read()
            reserved = dict(state.reserved)
            reserved.pop(reservation.key, None)
            spent = state.spent_usd + max(cost, 0.0)
            self._write(LedgerState(state.limit_usd, spent, reserved, state.refused))

    def release_owner(self, owner: str) -> None:
        """Charge the reservations of ``owner`` (a worker that died mid-call) as spent.

        The call may have been billed although its reply was never recorded, so its estimate
        counts as spent: erring high keeps the bound.
        """
        with self._lock():
            state = self._read()
            gone = {k: v for k, v in state.reserved.items() if k.startswith(f"{owner}#")}
            if not gone:
                return
            kept = {k: v for k, v in state.reserved.items() if k not in gone}
            spent = state.spent_usd + sum(gone.values())
            self._write(LedgerState(state.limit_usd, spent, kept, state.refused))
