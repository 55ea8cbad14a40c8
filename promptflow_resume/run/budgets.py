"""The run's limits: its time limit, its turn, token and cost budgets, a batch's shared cost
budget, and what a child run may use of them.

Checked before every model call; a limit reached stops the run (``RunEnds``) with a reason
that says how to continue::

    budgets = Budgets(run, options, attempt, log, models, prices)
    budgets.check()                 # before a model call: time, turns, tokens, cost
    held = budgets.reserve_shared() # the next call's estimate held on a batch's budget
"""

from __future__ import annotations

import time
from typing import Any

from ..base.costledger import Reservation
from ..progress.model import AgentChild, Attempt, Run, StepState, Usage
from ..providers.fallback import ModelChoices
from ..providers.pricing import GivenPrices
from ..providers.provider import Request
from .conversation import MessageLog
from .engineoptions import EngineOptions
from .runends import RunEnds, timeout_reason


class Budgets:
    """The time limit and budgets of one attempt of a run (docs/spec.md 5.4, 8.3)."""

    def __init__(
        self,
        run: Run,
        options: EngineOptions,
        attempt: Attempt,
        log: MessageLog,
        models: ModelChoices,
        prices: GivenPrices,
    ) -> None:
        self.run = run
        self.options = options
        self._attempt = attempt
        self._log = log
        self._models = models
        self._prices = prices
        limits = [s for s in (options.timeout, run.config.budget.get("max_seconds")) if s]
        #: When this attempt's time is up (``time.monotonic``), or None.
        self.deadline = time.monotonic() + float(min(limits)) if limits else None

    def seconds_left(self) -> float | None:
        """Seconds left of this attempt's time limit, or None."""
        return self.deadline - time.monotonic() if self.deadline is not None else None

    def check_deadline(self) -> None:
        """Stop the run ``timeout`` once its time limit has passed."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise RunEnds("timeout", timeout_reason())

    def check(self) -> None:
        """Stop before a model call that the budget does not allow."""
        self.check_deadline()
        budget = self.run.config.budget
        usage = self.run.usage
        for key, used, unit, option in (
            ("max_turns", usage.turns, "turns", "--max-turns"),
            ("max_tokens", usage.total_tokens, "tokens", "--max-tokens"),
        ):
            limit = budget.get(key)
            if limit is not None and not used < int(limit):
                raise RunEnds(
                    "budget_exhausted",
                    f"{unit[:-1]} budget used: {used} of {limit} {unit}; "
                    f"resume with a larger {option} to continue",
                )
        max_cost = budget.get("max_cost_usd")
        if max_cost is not None:
            estimate = self.next_call_estimate("the cost budget (--max-cost)")
            # Written so that NaN stops the run: every comparison with NaN is false, and a
            # budget a NaN could switch off would be no budget (docs/spec.md 10.5).
            if not usage.cost_usd + estimate <= float(max_cost):
                raise RunEnds(
                    "budget_exhausted",
                    f"cost budget: ${usage.cost_usd:.4f} spent of ${float(max_cost):.2f}, and the "
                    f"next call may cost ${estimate:.4f}; "
                    "resume with a larger --max-cost to continue",
                )

    def next_call_estimate(self, budget: str) -> float:
        """A conservative USD estimate of the next model call (section 5.4); a model without
        a price stops the run, as a cost budget cannot be kept on it (``budget`` names it)."""
        from ..providers.pricing import estimate_request_cost

        model = self._models.current
        request = Request(
            messages=self._log.messages(self.run.transcript),
            model=model,
            params=dict(self.run.config.params),
        )
        estimate = estimate_request_cost(model, request, self._prices)
        if estimate is None:
            model = model or "(the provider's default)"
            raise RunEnds(
                "budget_exhausted",
                f"{budget} cannot be kept: model `{model}` has no price (flow's table lacks "
                f"it and none was given); give it with --price {model}=IN/OUT (USD per million "
                f"tokens; --price {model}=0/0 for a local model) or --prices FILE, and resume",
            )
        return estimate

    def reserve_shared(self) -> Reservation | None:
        """Hold the next call's estimate on the shared budget, or stop the run when the
        budget cannot take it (docs/spec.md 8.3)."""
        ledger = self.options.shared_budget
        if ledger is None:
            return None
        estimate = self.next_call_estimate("the batch's cost budget (--max-cost)")
        held = ledger.reserve(estimate)
        if held is None:
            state = ledger.read()
            raise RunEnds(
                "budget_exhausted",
                f"the batch's cost budget: ${state.spent_usd:.4f} spent of "
                f"${state.limit_usd:.2f} by all rows, ${state.held:.4f} held by calls in "
                f"flight, and the next call may cost ${estimate:.4f}; resume the batch with "
                "a larger --max-cost to continue",
            )
        return held

    def left_for_child(self, own: Usage) -> dict[str, Any]:
        """The parent's limits less what the rest of the run used (all but ``own``, what the
        child has used and the run counts already): the child's ceiling."""
        budget = self.run.config.budget
        usage = self.run.usage
        left: dict[str, Any] = {}
        if budget.get("max_turns") is not None:
            left["max_turns"] = int(budget["max_turns"]) - (usage.turns - own.turns)
        if budget.get("max_tokens") is not None:
            used = usage.total_tokens - own.total_tokens
            left["max_tokens"] = int(budget["max_tokens"]) - used
        if budget.get("max_cost_usd") is not None:
            used_cost = usage.cost_usd - own.cost_usd
            left["max_cost_usd"] = round(float(budget["max_cost_usd"]) - used_cost, 6)
        return {k: max(v, 0) for k, v in left.items()}

    def roll_up(self, state: StepState, child: Usage) -> None:
        """The step's usage becomes its sub-workflow's; the run's grows by what is new since."""
        delta = _since(state.usage, child)
        for total in (self.run.usage, self._attempt.usage):
            total.add(delta)
        state.usage = Usage(**vars(child))
        state.turns = child.turns

    def roll_up_subagent(self, state: StepState, link: AgentChild, child: Usage) -> None:
        """Add what the child used since the last roll-up to the step, the run and the
        attempt; the link remembers it, so a child resumed later is counted once."""
        delta = _since(link.usage, child)
        for total in (self.run.usage, state.usage, self._attempt.usage):
            total.add(delta)
        link.usage = Usage(**vars(child))


def _since(before: Usage, now: Usage) -> Usage:
    """What a child run used between two readings of its usage."""
    return Usage(
        input_tokens=now.input_tokens - before.input_tokens,
        output_tokens=now.output_tokens - before.output_tokens,
        cached_tokens=now.cached_tokens - before.cached_tokens,
        cost_usd=round(now.cost_usd - before.cost_usd, 6),
        turns=now.turns - before.turns,
    )
