"""Tool calls held for a person's decision (``approve:``, ``--approve``, ``--on-consent stop``;
docs/spec.md 4.17): recorded in the run's ``approvals:``, asked about on a terminal, or the run
stops ``awaiting_approval`` until ``flow approve`` decides them.

    holds = HeldCalls(run, options, tools, attempt, points)
    holds.hold(step, calls)        # raises RunEnds while any call is undecided
    holds.decided(call)            # a denied call's result, or None: it may run
"""

from __future__ import annotations

from collections.abc import Mapping

from ..base.clock import now_iso
from ..progress.model import Approval, Attempt, Entry, Run
from ..tools.approval import CONSENT_WHY, consent_hold, decider, granted
from ..tools.consent import Asker, Consent
from ..tools.tool import Tool, ToolResult
from ..workflow.records import Step
from .checkpoints import Checkpoints
from .conversation import unanswered_calls
from .engineoptions import EngineOptions
from .runends import RunEnds


def _by(held: Approval) -> str:
    """``by NAME on HOST`` of a decision."""
    return f"by {held.by or 'someone'}" + (f" on {held.host}" if held.host else "")


def _preview(arguments: str, limit: int = 200) -> str:
    """The start of a call's arguments on one line, for the person who decides about it."""
    flat = " ".join(arguments.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class HeldCalls:
    """The approval records of a run's tool calls, from the hold to the recorded result."""

    def __init__(
        self,
        run: Run,
        options: EngineOptions,
        tools: Mapping[str, Tool],
        attempt: Attempt,
        points: Checkpoints,
    ) -> None:
        self.run = run
        self.options = options
        self._tools = tools
        self._attempt = attempt
        self._points = points

    def forget_settled(self) -> None:
        """Drop the approval records of calls no longer waiting (answered by hand, settled by
        reconcile, archived by a rewind): nothing is left to decide about them."""
        waiting = {(c.call_id, c.id) for c in unanswered_calls(self.run.transcript)}
        for held in list(self.run.approvals):
            if (held.call_id, held.entry) not in waiting:
                self.run.approvals.remove(held)
                self._attempt.notes.append(
                    f"call {held.call_id} ({held.tool}): no longer waits; its approval "
                    f"record ({held.decision}) was dropped"
                )

    def hold(self, step: Step, calls: list[Entry]) -> None:
        """Record a pending approval for each call the policy holds; ask on a terminal, else
        stop ``awaiting_approval`` while any is undecided (docs/spec.md 4.17)."""
        policy = self.options.approval
        consent = self.options.consent
        stop = self.options.consent_stop and (consent is None or consent.ask is None)
        if not policy and not stop:
            return
        for call in calls:
            tool = self._tools.get(call.tool or "")
            server = (getattr(tool, "server_ref", None) or {}).get("name")
            why = policy.why(call.tool or "", server=server)
            if why is None and stop:
                why = consent_hold(call.tool or "", call.content, consent)
            if why is None or self.approval(call) is not None:
                continue
            self.run.approvals.append(
                Approval(
                    call_id=call.call_id or "",
                    tool=call.tool or "",
                    step=step.id,
                    entry=call.id,
                    preview=_preview(call.content),
                    why=why,
                )
            )
        pending = [a for a in self.run.approvals if a.decision == "pending"]
        ask = self.options.approval_ask
        if pending and ask is not None:
            _ask(ask, pending)
            pending = []
        if pending:
            self._points.save()
            self._points.reporter.approval_needed(pending)
            ids = ", ".join(a.call_id for a in pending)
            raise RunEnds(
                "awaiting_approval",
                f"{len(pending)} tool call(s) of step {step.id!r} wait for a person's "
                f"approval: {ids}",
            )

    def approval(self, call: Entry) -> Approval | None:
        """The approval record of a recorded call, if it has one."""
        return next(
            (a for a in self.run.approvals if a.call_id == call.call_id and a.entry == call.id),
            None,
        )

    def decided(self, call: Entry) -> ToolResult | None:
        """A denied call's result (the person's reason); None when it may run."""
        held = self.approval(call)
        if held is None or held.decision != "denied":
            return None
        reason = f": {held.reason}" if held.reason else "."
        return ToolResult(f"error: a person denied this call ({_by(held)}){reason}", is_error=True)

    def consent_for(self, call: Entry) -> Consent | None:
        """The consent a call runs under: for an approved call held for consent, that call's
        command or host is granted too."""
        held = self.approval(call)
        consent = self.options.consent
        if held is None or held.decision != "approved" or not held.why.startswith(CONSENT_WHY):
            return consent
        return granted(consent, call.tool or "", call.content)

    def forget(self, call: Entry) -> None:
        """A decided call's result is recorded: its record leaves ``approvals:`` (kept until
        now, so a call re-run after a crash is not asked about again) and the decision stays
        in the attempt's history."""
        held = self.approval(call)
        if held is None:
            return
        self.run.approvals.remove(held)
        at = f" at {held.at}" if held.at else ""
        reason = f": {held.reason}" if held.reason else ""
        self._attempt.notes.append(
            f"call {held.call_id} ({held.tool}) {held.decision} {_by(held)}{at}{reason}"
        )


def _ask(ask: Asker, pending: list[Approval]) -> None:
    """Ask the person at the terminal about each pending call, and record the answers."""
    who, host = decider()
    for held in pending:
        answer = ask(
            f"Run {held.tool} ({held.why}) with {held.preview}? "
            "[y]es / [n]o (the model is told it was denied) "
        )
        held.decision = "denied" if answer == "no" else "approved"
        held.by, held.at, held.host = who, now_iso(), host
        if held.decision == "denied":
            held.reason = "denied on the terminal"
