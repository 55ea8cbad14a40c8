"""Fallback models: a ``model:`` list tried in order while the provider refuses a model.

A workflow may name several models (``model: [gpt-5, gpt-4o-mini]``). Requests go to the
first; when the provider answers that a model does not exist or is not available to the key
(``ModelUnavailableError``, and nothing else: a rate limit, a bad parameter or an outage is
never a reason to change models), the same request goes to the next one, and the rest of the
attempt keeps to the model that answered::

    choices = ModelChoices(["missing-model", "gpt-4o-mini"])
    reply = choices.call(request, provider.complete, on_refused=lambda m, err: ...)
    choices.current   # "gpt-4o-mini" once the first was refused

When every model is refused, ``ModelsRefusedError`` names each with the provider's answer. A
single model is not a list: its refusal is raised unchanged. Rules: docs/spec.md 5.3.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ..base.errors import ModelsRefusedError, ModelUnavailableError
from .provider import Reply, Request


class ModelChoices:
    """The models one attempt may use, in order, and the one requests go to now."""

    def __init__(self, models: Sequence[str | None]) -> None:
        self.models: tuple[str | None, ...] = tuple(models) or (None,)
        self._index = 0
        #: The models refused so far, in order, with the provider's error.
        self.refused: list[tuple[str, ModelUnavailableError]] = []

    @property
    def current(self) -> str | None:
        """The model the next request goes to."""
        return self.models[self._index]

    @property
    def has_fallbacks(self) -> bool:
        """True when there is more than one model to try."""
        return len(self.models) > 1

    def call(
        self,
        request: Request,
        send: Callable[[Request], Reply],
        *,
        on_refused: Callable[[str, ModelUnavailableError], None] | None = None,
    ) -> Reply:
        """``send`` the request to the current model; while the provider refuses the model,
        send the same request to the next. ``on_refused`` hears of each refusal first."""
        while True:
            model = self.current
            try:
                return send(replace(request, model=model))
            except ModelUnavailableError as error:
                if not self.has_fallbacks:
                    raise
                name = model or "(the provider's default)"
                self.refused.append((name, error))
                if on_refused is not None:
                    on_refused(name, error)
                if self._index + 1 >= len(self.models):
                    raise every_model_refused(self.refused) from error
                self._index += 1


def every_model_refused(refused: Sequence[tuple[str, ModelUnavailableError]]) -> ModelsRefusedError:
    """The error that ends a run whose every model was refused: each model and why."""
    reasons = "; ".join(f"`{model}` ({_sentence(err.message)})" for model, err in refused)
    return ModelsRefusedError(
        f"the provider refused every model this run may use, in the order tried: {reasons}.",
        hint="Progress is saved. Check the model names in `model:` and what the key may use; "
        "each resume tries the list again from the first model, or resume with --model NAME "
        "to use one model the key can use.",
    )


def _sentence(text: str) -> str:
    """``text`` on one line without its final full stop, for quoting inside a sentence."""
    return " ".join(text.split()).rstrip(".")
