"""The turn loop: a step's turns until its final answer, each a model call (its request
sized and sent, its reply and tool calls recorded at once) or the tool calls of the last reply.

The next action follows from the transcript: unanswered tool calls → run them; a final answer
→ the step's output (an incomplete one judged by ``incomplete_reply:``); else a model turn::

    turns = Turns(workflow, run, store, provider, options, attempt, points, budgets, calls,
                  toolcalls, hooks, key, log)
    output = turns.until_answered(step, state)
"""

from __future__ import annotations

import time

from ..base import faults
from ..base.clock import ms_since, now_iso
from ..progress import ProgressStore
from ..progress.entry import EntryMeta
from ..progress.model import Attempt, Entry, Run, StepState, Usage
from ..progress.seal import Key, seal_calls
from ..providers import OFFLINE_PROVIDERS
from ..providers.provider import Provider, Reply
from ..workflow.records import IncompleteReply, Step, Workflow
from .budgets import Budgets
from .checkpoints import Checkpoints
from .conversation import MessageLog, final_answer, incomplete_why, step_entries, unanswered_calls
from .engineoptions import EngineOptions
from .hooks import RunHooks
from .modelcalls import ModelCalls
from .runends import RunEnds
from .toolcalls import ToolCalls


class Turns:
    """Takes the turns of a step, for one attempt of a run."""

    def __init__(
        self,
        workflow: Workflow,
        run: Run,
        store: ProgressStore,
        provider: Provider,
        options: EngineOptions,
        attempt: Attempt,
        points: Checkpoints,
        budgets: Budgets,
        calls: ModelCalls,
        toolcalls: ToolCalls,
        hooks: RunHooks,
        key: Key,
        log: MessageLog,
    ) -> None:
        self.workflow = workflow
        self.run = run
        self.store = store
        self.options = options
        self.reporter = options.reporter
        self._attempt = attempt
        self._points = points
        self._budgets = budgets
        self._calls = calls
        self._toolcalls = toolcalls
        self._hooks = hooks
        self._key = key
        self._log = log
        #: The replies this attempt received (entry ids): only those are judged whole or not.
        self._fresh: set[int] = set()
        #: Steps whose incomplete reply this attempt asked about again (``incomplete_reply``).
        self._asked_again: set[str] = set()
        #: A request in flight is noted in the owner record (for ``flow status``) only for
        #: a provider that answers over the network: an offline one answers at once.
        self._note_requests = provider.name not in OFFLINE_PROVIDERS

    def until_answered(self, step: Step, state: StepState) -> Entry | None:
        """Run the step's turns until its final answer (or its last reply, at its
        ``max_turns``): tool calls first, then a model turn; the step's output entry."""
        run = self.run
        while True:
            if unanswered_calls(run.transcript):
                self._toolcalls.settle(step)
                continue
            answer = final_answer(run.transcript, step.id)
            if answer is not None:
                if answer.id in self._fresh and self._ask_again(step, answer):
                    continue
                return answer
            if step.max_turns is not None and state.turns >= step.max_turns:
                last = next(
                    (
                        e
                        for e in reversed(step_entries(run.transcript, step.id))
                        if e.role == "assistant"
                    ),
                    None,
                )
                self.reporter.notice(
                    f"step {step.id}: reached its limit of {step.max_turns} turns; "
                    "its last reply is its output."
                )
                return last
            self._model_turn(step, state)

    def _model_turn(self, step: Step, state: StepState) -> None:
        run = self.run
        self._budgets.check()
        if self.options.resume_note:
            self._points.append([self._points.entry("note", self.options.resume_note, step.id)])
            self.options.resume_note = None
        request = self._calls.fit_context(step, state, self._calls.turn_request(step))
        self.reporter.model_call(step.id, state.turns + 1, request)
        held = self._budgets.reserve_shared()
        cost = 0.0
        # A compaction made on the way (a summary call) adds its cost to the run's usage.
        before = run.usage.cost_usd
        began, self._calls.retries = time.monotonic(), 0
        if self._note_requests:
            self.store.note_request({"step": step.id, "turn": state.turns + 1, "since": now_iso()})
        try:
            request, reply = self._calls.call_compacting(step, state, request)
            cost = self._calls.cost(reply)
        finally:
            if self._note_requests:
                self.store.note_request(None)
            if held is not None and self.options.shared_budget is not None:
                spent = cost + max(run.usage.cost_usd - before, 0.0)
                self.options.shared_budget.settle(held, spent)
        faults.point("engine.model_replied")
        self._calls.reported = (self._log.view.generation, len(request.messages), reply.usage)

        usage = Usage(
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
            cached_tokens=reply.usage.cached_tokens,
            cost_usd=cost,
            turns=1,
        )
        for total in (run.usage, state.usage, self._attempt.usage):
            total.add(usage)
        state.turns += 1

        asked = request.model or self._calls.model or self.run.config.model
        ttft, tps = _speed(reply)
        meta = EntryMeta(
            ms=ms_since(began),
            model=asked,
            answered_by=reply.model if reply.model and reply.model != asked else None,
            tokens=(usage.input_tokens, usage.output_tokens, usage.cached_tokens),
            cost=round(cost, 6),
            finish=reply.finish_reason or None,
            retries=self._calls.retries or None,
            ttft=ttft,
            tps=tps,
        )
        entries = [self._points.entry("assistant", reply.content, step.id, meta=meta)]
        for index, call in enumerate(reply.tool_calls):
            call_id = call.id or f"call-{run.next_entry_id() + index}"
            entries.append(
                self._points.entry(
                    "tool_call", call.arguments, step.id, call_id=call_id, tool=call.name
                )
            )
        # A reply with tool calls is saved together with the first call's start record: one
        # durable write instead of two, and still before the tool has any effect.
        self._hooks.replied()
        self._points.append(entries, durable=not reply.tool_calls)
        self._fresh.add(entries[0].id)
        if reply.tool_calls:
            seal_calls(run, self._key, entries)
        # A reply with tool calls is durable with its first call's start: told then.
        self._points.when_saved(lambda: self.reporter.model_reply(step.id, usage, run.usage))

    def _ask_again(self, step: Step, answer: Entry) -> bool:
        """Judge a final reply this attempt received: one that is empty or cut off at the
        token limit is said in the output and the attempt's notes, then, as the workflow's
        ``incomplete_reply:`` says, kept (False), asked about once more (True: a new turn),
        or the run stops for a person to look."""
        why = incomplete_why(answer)
        if why is None:
            return False
        said = f"step {step.id}: the model's reply (entry {answer.id}) {why}"
        policy = self.workflow.incomplete_reply
        if policy is IncompleteReply.WARN:
            kept = f"{said}; the step completes with it (`${{step:{step.id}}}` is that reply)."
            self._attempt.notes.append(kept)
            self.reporter.notice(kept)
            return False
        if policy is IncompleteReply.RETRY and step.id not in self._asked_again:
            self._asked_again.add(step.id)
            self._attempt.notes.append(f"{said}; asked once more (incomplete_reply: retry).")
            self.reporter.notice(f"{said}; asking once more (incomplete_reply: retry).")
            shorter = " and shorter, so that it fits" if "cut off" in why else ""
            again = f"Your reply {why}. Answer again, complete{shorter}."
            self._points.append([self._points.entry("user", again, step.id)])
            return True
        raise RunEnds(
            "failed",
            f"{said} (incomplete_reply: {policy.value}); edit or remove that reply in the "
            "progress file (removed, the model is asked again), or raise max_tokens, then "
            "resume",
        )


def _speed(reply: Reply) -> tuple[int | None, float | None]:
    """A streamed reply's time to first token (ms) and output tokens per second (one
    decimal), as its entry records them; (None, None) for a reply that did not stream."""
    timing = reply.timing
    if timing is None or timing.first_token is None:
        return None, None
    rate = timing.rate(reply.usage.output_tokens)
    tps = None if rate is None else min(round(rate, 1), 999_999_999.9)
    return max(0, round(timing.first_token * 1000)), tps
