"""The model request and its retries: the request built from the transcript, compacted to fit
the context window, sent with retries and fallback models, a quota window's suspension, and
what a reply costs.

    calls = ModelCalls(workflow, run, provider, options, attempt, points, models, log,
                       prices, budgets, specs)
    request = calls.fit_context(step, state, calls.turn_request(step))
    request, reply = calls.call_compacting(step, state, request)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NoReturn

from ..base import faults
from ..base.clock import iso_at, ms_since
from ..base.errors import (
    ContextLengthError,
    DeadlineError,
    ModelUnavailableError,
    ProviderError,
    QuotaWindowError,
)
from ..chat import ToolSpec
from ..progress.entry import EntryMeta
from ..progress.model import Attempt, RefusedModel, Run, StepState
from ..providers.fallback import ModelChoices
from ..providers.pricing import GivenPrices
from ..providers.provider import Provider, Reply, ReplyUsage, Request
from ..workflow.records import Step, Workflow
from .budgets import Budgets
from .checkpoints import Checkpoints
from .compaction import CompactionTally
from .conversation import MessageLog
from .engineoptions import EngineOptions
from .handoffs import is_chained, latest_system, part_model, pinned_model
from .runends import RunEnds, timeout_reason

#: How much of a provider's refusal of a model the attempt records.
_REFUSAL_CHARS = 500


def _short(error: Exception) -> str:
    """The first line of an error's message, cut to fit a one-line ``reason``."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text if len(text) <= 200 else text[:199].rstrip() + "…"


class ModelCalls:
    """Sends a step's requests to the provider for one attempt of a run."""

    def __init__(
        self,
        workflow: Workflow,
        run: Run,
        provider: Provider,
        options: EngineOptions,
        attempt: Attempt,
        points: Checkpoints,
        models: ModelChoices,
        log: MessageLog,
        prices: GivenPrices,
        budgets: Budgets,
        specs: Callable[[Step], tuple[ToolSpec, ...]],
    ) -> None:
        self.workflow = workflow
        self.run = run
        self.provider = provider
        self.options = options
        self.reporter = options.reporter
        self._attempt = attempt
        self._points = points
        self._models = models
        self._log = log
        self._prices = prices
        self._budgets = budgets
        #: The tools a step offers, as the model is told them.
        self._specs = specs
        #: Transient errors retried for the model call under way (its reply's ``retries``).
        self.retries = 0
        #: The last turn's view generation, message count and reported usage: the base of
        #: the next request's size estimate (see ``_request_tokens``).
        self.reported: tuple[int, int, ReplyUsage] | None = None
        #: This attempt's compactions, summed in one attempt note (``flow log``).
        self._compactions = CompactionTally()
        #: A handoff chain: each part's system entry replaces the one before in requests.
        self._chained = is_chained(workflow)
        #: The context window the server said, once a request was refused as too long, and
        #: whether the server was asked for it.
        self._learned_window: int | None = None
        self._asked_window = False

    def turn_request(self, step: Step) -> Request:
        """The request for the step's next model turn, built from the transcript."""
        messages = self._log.messages(self.run.transcript)
        return Request(
            messages=latest_system(messages) if self._chained else messages,
            tools=self._specs(step),
            model=part_model(step, self.run, self.model),
            params=dict(self.run.config.params),
        )

    def _request_tokens(self, request: Request) -> int:
        """The request's size: the provider's count for the previous turn plus an estimate
        of what was added since, or the estimate of the whole, whichever is larger."""
        from ..providers.context import estimate_tokens

        whole = estimate_tokens(request)
        reported = self.reported
        if reported is None or reported[0] != self._log.view.generation:
            return whole
        _, count, usage = reported
        added = Request(messages=request.messages[count:], model=request.model)
        # The previous reply is among the added messages, so its output tokens are estimated.
        return max(whole, usage.input_tokens + estimate_tokens(added))

    def fit_context(self, step: Step, state: StepState, request: Request) -> Request:
        """Compact before a request that would pass the threshold of the context window."""
        from .compaction import window_for

        settings = self.workflow.compaction
        window = window_for(settings, part_model(step, self.run, self.model))
        window = window or self._learned_window
        if not settings.enabled or window is None:
            return request
        # A few rounds at most: each covers what fits the summariser's own request.
        for _ in range(8):
            if self._request_tokens(request) <= settings.threshold * window:
                break
            if not self.compact(step, state, window):
                break
            request = self.turn_request(step)
        return request

    def call_compacting(
        self, step: Step, state: StepState, request: Request
    ) -> tuple[Request, Reply]:
        """Call the model; a context-length error compacts once and retries once."""
        try:
            return request, self.call(request, pinned=self.pinned(step))
        except ProviderError as error:
            if error.reason != "context_length_exceeded" or not self.workflow.compaction.enabled:
                raise
            from .compaction import window_for

            # The request did not fit: the window the server says (in its refusal, or asked
            # for now), else the one known, else the request's own size.
            model = part_model(step, self.run, self.model)
            said = self._window_said(error, model)
            if said is not None:
                self._learned_window = said
            size = self._request_tokens(request)
            known = said or window_for(self.workflow.compaction, model)
            window = min(known, size) if known else size
            self.reporter.notice(
                f"step {step.id}: the provider refused the request as too long for the "
                "model's context; compacting and trying once more."
            )
            if not self.compact(step, state, window):
                raise
            request = self.turn_request(step)
            return request, self.call(request, pinned=self.pinned(step))

    def _window_said(self, error: ProviderError, model: str | None) -> int | None:
        """The context window a refusal names (llama.cpp's ``n_ctx``, vLLM's words), or the
        one the server reports when asked (``/props``, ``/v1/models``); None otherwise."""
        window = error.window if isinstance(error, ContextLengthError) else None
        if window is None and not self._asked_window:
            self._asked_window = True  # a server that says nothing is not asked again
            ask = getattr(self.provider, "context_window", None)
            window = ask(model) if callable(ask) else None
        return window if isinstance(window, int) and window > 0 else None

    def compact(self, step: Step, state: StepState, window: int) -> bool:
        """Summarise the oldest turns into one durable ``compaction`` entry; False when
        nothing can be compacted."""
        from .compaction import CompactionPlan, summarise

        def announce(plan: CompactionPlan) -> None:
            first, last = plan.covers
            self.reporter.notice(
                f"step {step.id}: compacting entries {first}-{last} (about {plan.tokens:,} "
                "tokens) into a summary to fit the context window."
            )

        self._log.messages(self.run.transcript)  # brings the view up to date
        began = time.monotonic()
        done = summarise(
            self._log.view,
            self.workflow.compaction,
            window,
            call=self.call,
            cost=self.cost,
            model=self.model,
            params=self.run.config.params,
            step=step.id,
            redact=lambda text: self._points.redacted(text, "compaction"),
            announce=announce,
        )
        if done is None:
            return False
        for total in (self.run.usage, state.usage, self._attempt.usage):
            total.add(done.usage)
        self._compactions.add(done, self._attempt.notes)
        done.entry.meta = EntryMeta(
            ms=ms_since(began),
            model=self.model or self.run.config.model,
            tokens=(done.usage.input_tokens, done.usage.output_tokens, done.usage.cached_tokens),
            cost=round(done.usage.cost_usd, 6),
        )
        self._points.append([done.entry])
        first, last = done.plan.covers
        self.reporter.compacted(step.id, first, last, done.plan.tokens)
        faults.point("compaction.recorded")
        return True

    def pinned(self, step: Step) -> bool:
        """True when the step's requests keep their one model (a part of a handoff chain with
        its own model): the run's fallback models are not tried for it."""
        return pinned_model(step, self.run) is not None

    def call(self, request: Request, *, pinned: bool = False) -> Reply:
        """Send ``request`` with retries, trying the run's fallback models unless ``pinned``;
        a quota window suspends the run, a time limit passed stops it ``timeout``."""
        from ..providers.retry import RetryEvent, call_with_retry

        def on_retry(event: RetryEvent) -> None:
            # Provider messages can quote the key that was refused: redact before recording.
            note = self._points.redacted(
                f"retry {event.attempt} after {event.delay:.1f}s: {event.error.message}",
                "attempt notes",
            )
            self._attempt.notes.append(note)
            self.retries += 1
            self.reporter.retry(event.attempt, event.delay, event.error.message)

        def send(to_model: Request) -> Reply:
            return call_with_retry(
                self.provider,
                to_model,
                self.workflow.retry,
                on_text=self.reporter.text,
                on_retry=on_retry,
                sleep=self.options.sleep,
                deadline=self._budgets.deadline,
            )

        try:
            if pinned:
                return send(request)
            reply = self._models.call(request, send, on_refused=self._model_refused)
        except QuotaWindowError as error:
            self._suspend(error)
        except ProviderError as error:
            # DeadlineError: retry.call_with_retry refused a wait that would pass the limit.
            deadline_hit = (
                self._budgets.deadline is not None and time.monotonic() >= self._budgets.deadline
            )
            if deadline_hit or isinstance(error, DeadlineError):
                raise RunEnds("timeout", timeout_reason()) from None
            raise
        if self._models.has_fallbacks:
            self._attempt.model = self._models.current
        return reply

    def _suspend(self, error: QuotaWindowError) -> NoReturn:
        """Stop the run ``suspended`` until the provider's window opens, or fail it when the
        run has used its ``max_suspensions`` (docs/spec.md 4.18). The refused request was not
        answered, so the resume sends it; nothing answered is sent again."""
        used = sum(1 for a in self.run.attempts if a.until is not None)
        limit = self.options.max_suspensions
        until = iso_at(error.until)
        if used >= limit:
            raise ProviderError(
                f"{error.message.rstrip('.')}; the run has already been suspended {used} "
                f"time{'s' if used != 1 else ''}, the most --max-suspensions allows ({limit}).",
                status_code=error.status_code,
                reason="max_suspensions",
                hint=f"The window opens at {until}: resume then with a larger "
                "--max-suspensions, or raise the provider's limits.",
            ) from error
        self._attempt.until = until
        note = self._points.redacted(f"suspended until {until}: {error.message}", "attempt notes")
        self._attempt.notes.append(note)
        raise RunEnds("suspended", f"until {until}: {_short(error)}", until) from None

    @property
    def model(self) -> str | None:
        """The model requests go to now: the first of the run's models not refused."""
        return self._models.current

    def _model_refused(self, model: str, error: ModelUnavailableError) -> None:
        """Record a refused model in the attempt (the provider's words, redacted) and say
        which model the request goes to next; nothing was spent on the refused request."""
        message = self._points.redacted(error.message, "attempt refused models")
        if len(message) > _REFUSAL_CHARS:
            # An error page in place of an API error must not swell the front matter.
            message = message[:_REFUSAL_CHARS].rstrip() + " …"
        self._attempt.refused.append(RefusedModel(model=model, message=message))
        # The refusal is saved now: a crash before the next reply still shows it.
        self._points.save()
        faults.point("engine.model_refused")
        models = self._models.models
        following = models.index(model) + 1 if model in models else len(models)
        said = message.rstrip().rstrip(".")
        then = f"; trying `{models[following]}`" if following < len(models) else ""
        self.reporter.model_refused(model, message)
        self.reporter.notice(f"the provider refused model `{model}`: {said}{then}.")

    def cost(self, reply: Reply) -> float:
        """What ``reply`` cost in USD (0.0 for a model without a price)."""
        from ..providers.pricing import cost_usd

        return cost_usd(reply.model or self.model, reply.usage, self._prices) or 0.0
