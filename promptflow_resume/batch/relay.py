"""What a shipped row on a Ray node asks of the batch's driver, and how the driver answers.

With ``--files shipped`` (docs/spec.md 8.6) a row's task runs in a scratch folder on its node,
and only the driver writes the row's files. The task's ``Channel`` asks the driver's ``Desk``
for everything that touches them, one ``Request`` at a time, and waits for the answer:

- ``open``: the attempt begins. The desk holds the row's folder (its lock, through a
  ``progress.replica``), gives the attempt a new token, and answers with the row's files as
  they are (its last checkpoint, journal, sidecars, child runs): a retry after a node died
  resumes from what the driver holds, never from what the task was first given. An attempt
  that opens makes every earlier one of the row stale: their requests are refused from then
  on, so a node taken for dead that comes back cannot write behind the new attempt's back.
- ``write``: one ``MirrorOp`` of the row's store, applied by the replica (made durable) before
  the answer, so the task goes on only from what the driver holds.
- ``reserve``, ``settle``, ``read``: the batch's cost budget (``--max-cost``), kept by the
  driver in ``DIR/budget.json`` (docs/spec.md 8.3). When a new attempt opens, what an older
  one still held is charged as spent (its call may have been billed).
- ``usage``: the row's usage after a model reply, for the live totals; not waited for.

How requests travel is the engine's business (``ray_engine``: a small Ray actor that queues
them for the driver to take); the channel is given a ``send`` that returns the answer::

    desk = Desk(Path("out"))
    channel = Channel(desk.handle, row=3)     # what a task holds (over Ray in a batch)
    files = channel.open()
    channel.send(MirrorOp("fold", "progress.md", data))
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..base.costledger import CostLedger, LedgerState, Reservation
from ..base.errors import FlowError
from ..progress.mirror import MirrorError, MirrorOp
from ..progress.replica import Replica
from .checkpoint import BUDGET_FILE, row_progress
from .worker import ledger_owner

RequestKind = Literal["open", "write", "reserve", "settle", "read", "usage"]


@dataclass(frozen=True)
class Request:
    """One thing a row's task asks of the driver (plain data: it crosses to the cluster)."""

    row: int
    kind: RequestKind
    #: The attempt's token (given by ``open``; empty for ``open`` itself).
    token: str = ""
    op: MirrorOp | None = None
    #: ``reserve``: the estimate; ``settle``: the actual cost.
    amount: float = 0.0
    #: ``settle``: the reservation's key.
    key: str = ""
    #: ``usage``: input tokens, output tokens and cost of the row's run so far.
    usage: tuple[int, int, float] = (0, 0, 0.0)


#: An answer: ``{"error": message}`` when the driver refused, else what the request asked.
Reply = dict[str, Any]


class Desk:
    """The driver's end: the folders of the rows running elsewhere, and their requests."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._replicas: dict[int, Replica] = {}
        self._tokens: dict[int, str] = {}
        self._ledgers: dict[int, CostLedger] = {}
        #: The latest usage each row reported (taken by the engine for the live totals).
        self.usage: dict[int, tuple[int, int, float]] = {}

    def handle(self, request: Request) -> Reply:
        """The answer to ``request``; a refusal is an answer, never an exception."""
        try:
            if request.kind == "open":
                return self._open(request.row)
            if request.kind == "usage":
                self.usage[request.row] = request.usage
                return {}
            if self._tokens.get(request.row) != request.token or not request.token:
                return {
                    "error": f"this attempt of row {request.row} was replaced by a newer one "
                    "(its node was taken for dead): its writes are refused"
                }
            return self._answer(request)
        except (FlowError, MirrorError, OSError) as error:
            return {"error": str(error)}

    def _open(self, row: int) -> Reply:
        replica = self._replicas.get(row)
        if replica is None:
            replica = Replica.take((self.folder / row_progress(row)).parent)
            self._replicas[row] = replica
        elif row in self._ledgers:
            # An attempt before this one died: what its calls held counts as spent.
            self._ledgers[row].release_owner(ledger_owner(row))
        token = secrets.token_hex(8)
        self._tokens[row] = token
        return {"token": token, "files": replica.files()}

    def _answer(self, request: Request) -> Reply:
        if request.kind == "write":
            assert request.op is not None
            self._replicas[request.row].apply(request.op)
            return {}
        ledger = self._ledger(request.row)
        if request.kind == "reserve":
            held = ledger.reserve(request.amount)
            return {"key": held.key if held else None, "amount": request.amount}
        if request.kind == "settle":
            ledger.settle(Reservation(request.key, 0.0), request.amount)
            return {}
        state = ledger.read()
        return {"state": state.to_json()}

    def _ledger(self, row: int) -> CostLedger:
        ledger = self._ledgers.get(row)
        if ledger is None:
            ledger = CostLedger(self.folder / BUDGET_FILE, owner=ledger_owner(row))
            self._ledgers[row] = ledger
        return ledger

    def release(self, row: int) -> None:
        """The row's task reported: let go of its folder (its lock) until it runs again."""
        self._tokens.pop(row, None)
        replica = self._replicas.pop(row, None)
        if replica is not None:
            replica.close()

    def close(self) -> None:
        """Let go of every row."""
        for row in list(self._replicas):
            self.release(row)


class Channel:
    """A row's end on its node: its store's mirror and its share of the batch's budget."""

    def __init__(
        self,
        send: Callable[[Request], Reply],
        row: int,
        *,
        notify: Callable[[Request], None] | None = None,
    ) -> None:
        self._send = send
        self._notify = notify or (lambda request: None)
        self.row = row
        self.token = ""

    def _ask(self, kind: RequestKind, **fields: Any) -> Reply:
        reply = self._send(Request(self.row, kind, self.token, **fields))
        if "error" in reply:
            raise MirrorError(f"the batch's driver refused: {reply['error']}")
        return reply

    def open(self) -> list[tuple[str, bytes]]:
        """Begin the attempt: the row's files as the driver holds them."""
        reply = self._ask("open")
        self.token = str(reply["token"])
        return [(str(rel), bytes(data)) for rel, data in reply["files"]]

    def send(self, op: MirrorOp) -> None:
        """The store's write, durable at the driver before this returns."""
        self._ask("write", op=op)

    def usage(self, message: dict[str, Any]) -> None:
        """The row's usage after a model reply (not waited for)."""
        usage = (message["input_tokens"], message["output_tokens"], message["cost_usd"])
        self._notify(Request(self.row, "usage", self.token, usage=usage))

    def reserve(self, estimate: float) -> Reservation | None:
        """Hold ``estimate`` USD on the batch's budget, or None when it cannot take it."""
        reply = self._ask("reserve", amount=estimate)
        return Reservation(reply["key"], estimate) if reply["key"] else None

    def settle(self, reservation: Reservation, cost: float) -> None:
        """Replace the reservation by the call's actual cost."""
        self._ask("settle", key=reservation.key, amount=cost)

    def read(self) -> LedgerState:
        """The batch's budget as it stands."""
        state = self._ask("read")["state"]
        return LedgerState(
            limit_usd=state["limit_usd"],
            spent_usd=state["spent_usd"],
            reserved=dict(state["reserved"]),
            refused=bool(state["refused"]),
        )
