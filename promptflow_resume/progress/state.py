"""A run's effective state: its recorded status read together with its owner's liveness.

The front matter of a run whose process was killed still says ``running``: nothing was left
to write anything else. Every reader (``flow status``, ``list``, ``log``, ``show`` and their
``--json``) therefore asks this module, so they all say the same thing and what ``flow
resume`` will do::

    state = run_state(Path("progress.md"), run.status, run.reason)
    state.status      # "interrupted" for a running run whose owner is gone
    state.text()      # "interrupted (owner gone: pid 4242 on box ...), resumable"

The rule (docs/spec.md 3.3, 4.6): a ``running`` run whose owner is alive is ``running`` and
cannot be resumed while it runs; one whose owner is gone is ``interrupted`` and resumable.
Any other status is what the file records; every status but ``completed`` is resumable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model import RESUMABLE_STATUSES
from .owner import read_owner, record_alive


@dataclass(frozen=True)
class RunState:
    """What a run is now, for every reader."""

    #: The effective status: the recorded one, or ``interrupted`` for a dead owner's run.
    status: str
    #: The effective reason (for ``running`` runs: the owner, alive or gone).
    reason: str | None
    #: The status written in the file.
    recorded: str
    #: For recorded ``running`` runs: whether the owning process is alive; else None.
    owner_alive: bool | None
    #: True when ``flow resume`` can continue the run now.
    resumable: bool
    #: A live run's model request in flight, as its owner noted it: ``{"step", "turn",
    #: "since"}`` (None when none is, or the run is not live).
    request: dict[str, Any] | None = None

    def text(self, width: int | None = None) -> str:
        """One line: ``status (reason)`` and ``, resumable`` when resume can continue it;
        a reason longer than ``width`` is cut with an ellipsis."""
        reason = self.reason
        if reason and width is not None and len(reason) > width:
            reason = reason[: width - 1].rstrip() + "…"
        line = f"{self.status} ({reason})" if reason else self.status
        return line + (", resumable" if self.resumable else "")

    def to_dict(self) -> dict[str, Any]:
        """The ``state`` object of the readers' ``--json`` documents."""
        return {
            "status": self.status,
            "reason": self.reason,
            "recorded_status": self.recorded,
            "owner_alive": self.owner_alive,
            "resumable": self.resumable,
            "request": self.request,
            "text": self.text(),
        }


def _owner_words(owner: dict[str, Any]) -> str:
    pid, host = owner.get("pid"), owner.get("host")
    return f"pid {pid} on {host}" if pid is not None and host else "no owner recorded"


_SINCE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def _request(owner: dict[str, Any]) -> dict[str, Any] | None:
    """The request in flight an owner record notes, when it is of the form flow writes."""
    request = owner.get("request")
    if not isinstance(request, dict):
        return None
    since, step, turn = request.get("since"), request.get("step"), request.get("turn")
    if not (isinstance(since, str) and isinstance(step, str) and isinstance(turn, int)):
        return None
    if isinstance(turn, bool) or turn < 1:
        return None
    # Shown on a terminal: a record written by anything else may carry no control characters.
    if not _SINCE.fullmatch(since) or not step.isprintable() or len(step) > 200:
        return None
    return {"step": step, "turn": turn, "since": since}


def state_of(
    status: str,
    reason: str | None,
    *,
    owner: dict[str, Any] | None = None,
    alive: bool | None = None,
) -> RunState:
    """The effective state from a recorded ``status``/``reason`` and, for ``running`` runs,
    the owner record (``alive`` given by a caller that already knows it)."""
    if status != "running":
        return RunState(status, reason, status, None, status in RESUMABLE_STATUSES)
    record = owner or {}
    if alive is None:
        alive = bool(record) and record_alive(record)
    who = _owner_words(record)
    if alive:
        request = _request(record)
        waiting = ""
        if request is not None:
            waiting = (
                f"; waiting for the model since {request['since']} "
                f"(step {request['step']}, turn {request['turn']})"
            )
        return RunState("running", f"owner alive: {who}{waiting}", status, True, False, request)
    if record:
        gone = f"owner gone: {who} ended without a checkpoint"
    else:
        gone = "owner gone: no live process owns it"
    return RunState("interrupted", gone, status, False, True)


def run_state(
    progress: str | Path, status: str, reason: str | None, *, alive: bool | None = None
) -> RunState:
    """The effective state of the run at ``progress`` whose front matter records ``status``
    and ``reason``: reads ``<progress>.owner`` only for a ``running`` run."""
    if status != "running":
        return state_of(status, reason)
    return state_of(status, reason, owner=read_owner(Path(progress)), alive=alive)
