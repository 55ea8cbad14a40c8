"""What model calls cost, from the pricing table shipped as ``data/pricing.json``.

Prices are USD per million tokens: uncached input, cached input (read from the provider's
prompt cache) and output, each entry with the date it was checked. Unknown models have no
price: callers show tokens only and budgets in USD cannot be enforced for them::

    cost_usd("gpt-4o-2024-08-06", ReplyUsage(input_tokens=1200, output_tokens=300))
    # -> 0.006  (gpt-4o: $2.50 in, $10 out per million)

Token counting convention (the same for every provider, see ``docs/spec.md`` section 5):
``ReplyUsage.input_tokens`` counts *all* input tokens, cached ones included, and
``cached_tokens`` is the cached part of them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..base.packagedata import read_text
from .provider import ReplyUsage, Request

#: Output tokens assumed for a call whose parameters set no limit (and the ``max_tokens``
#: the Anthropic provider sends when the workflow gives none).
DEFAULT_MAX_OUTPUT_TOKENS = 4096
#: Characters per token in the pre-call estimate; English prose averages about four.
CHARS_PER_TOKEN = 4
#: Tokens a chat format adds around each message (role markers and separators).
MESSAGE_OVERHEAD_TOKENS = 4

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Price:
    """USD per million tokens for one model, and when that was last checked."""

    model: str
    input: float
    output: float
    #: None when the provider has no cache discount: cached tokens cost ``input``.
    cached_input: float | None
    checked: str
    source: str

    def cost(self, usage: ReplyUsage) -> float:
        """USD for ``usage`` at this price."""
        cached = min(max(usage.cached_tokens, 0), max(usage.input_tokens, 0))
        uncached = max(usage.input_tokens, 0) - cached
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        total = (
            uncached * self.input + cached * cached_rate + max(usage.output_tokens, 0) * self.output
        )
        return total / 1_000_000


@lru_cache(maxsize=1)
def _table() -> dict[str, Price]:
    """The pricing table, read once from the package data."""
    text = read_text("data/pricing.json")
    doc: dict[str, Any] = json.loads(text)
    sources: dict[str, str] = doc.get("sources", {})
    table: dict[str, Price] = {}
    for model, entry in doc["models"].items():
        cached = entry.get("cached_input")
        table[model.lower()] = Price(
            model=model,
            input=float(entry["input"]),
            output=float(entry["output"]),
            cached_input=float(cached) if cached is not None else None,
            checked=str(entry["checked"]),
            source=sources.get(entry.get("source", ""), str(entry.get("source", ""))),
        )
    return table


def known_models() -> tuple[str, ...]:
    """Model ids in the pricing table."""
    return tuple(p.model for p in _table().values())


def _candidates(model: str) -> list[str]:
    """Names to look up for ``model``, most specific first."""
    name = model.strip().lower()
    # GitHub Models and routers name models "vendor/model".
    if "/" in name:
        name = name.rsplit("/", 1)[1]
    names = [name]
    for suffix in ("-latest",):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            names.append(name)
    undated = _DATE_SUFFIX.sub("", name)
    if undated != name:
        names.append(undated)
    return names


def lookup_names(model: str) -> list[str]:
    """The names a model-keyed table is searched for, most specific first (also used by the
    context-window table, so both match model ids alike)."""
    return _candidates(model)


#: Prices given by the person running flow (``--price``, ``--prices``), by lower-case model
#: name: they come before the table, matched the same way.
GivenPrices = dict[str, Price]


def price_for(model: str | None, given: GivenPrices | None = None) -> Price | None:
    """The price of ``model``: a given one first, else the table's; None when neither has it.

    Matching is exact after dropping a ``vendor/`` prefix, a ``-latest`` suffix and a date
    suffix; there is no prefix guessing, because ``gpt-4o-audio-preview`` is not priced like
    ``gpt-4o`` and a wrong price is worse than none. A given price is also matched by the full
    name, so ``--price ollama/llama3=0/0`` prices that model only.
    """
    if not model:
        return None
    names = [model.strip().lower(), *_candidates(model)]
    for table in (given or {}, _table()):
        for name in names:
            price = table.get(name)
            if price is not None:
                return price
    return None


def priced(models: Iterable[str | None], given: GivenPrices | None = None) -> bool:
    """Whether any of ``models`` has a price (given or in the table): a run of models that
    have none shows tokens only, since its cost counted as 0 is unknown, not free."""
    return any(price_for(model, given) is not None for model in models)


def cost_usd(
    model: str | None, usage: ReplyUsage, given: GivenPrices | None = None
) -> float | None:
    """USD for one reply's ``usage`` on ``model``; None for models without a price."""
    price = price_for(model, given)
    return price.cost(usage) if price is not None else None


def estimate_input_tokens(request: Request) -> int:
    """A rough count of the tokens ``request`` sends: characters / 4, plus per-message overhead."""
    chars = 0
    for message in request.messages:
        chars += len(message.content)
        for call in message.tool_calls:
            chars += len(call.name) + len(call.arguments)
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description)
        chars += len(json.dumps(tool.parameters, separators=(",", ":")))
    overhead = MESSAGE_OVERHEAD_TOKENS * len(request.messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + overhead


def max_output_tokens(params: dict[str, Any]) -> int:
    """The output limit the call's parameters set, else ``DEFAULT_MAX_OUTPUT_TOKENS``."""
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_MAX_OUTPUT_TOKENS


def estimate_request_cost(
    model: str | None, request: Request, given: GivenPrices | None = None
) -> float | None:
    """A conservative USD estimate of one call before it is made; None for unknown models.

    Conservative means it errs high: every input token at the uncached rate, and the output at
    its limit (``max_tokens`` from the parameters, else ``DEFAULT_MAX_OUTPUT_TOKENS``).
    """
    price = price_for(model or request.model, given)
    if price is None:
        return None
    usage = ReplyUsage(
        input_tokens=estimate_input_tokens(request),
        output_tokens=max_output_tokens(request.params),
    )
    return price.cost(usage)
