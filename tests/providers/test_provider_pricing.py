"""The pricing table and the cost of replies and planned calls."""

from __future__ import annotations

import json
from datetime import date
from importlib import resources

import pytest

from promptflow_resume.chat import Message, ToolCall, ToolSpec
from promptflow_resume.providers.pricing import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    cost_usd,
    estimate_input_tokens,
    estimate_request_cost,
    known_models,
    price_for,
)
from promptflow_resume.providers.provider import ReplyUsage, Request


def load_table() -> dict[str, object]:
    text = resources.files("promptflow_resume").joinpath("data/pricing.json").read_text("utf-8")
    doc: dict[str, object] = json.loads(text)
    return doc


def test_every_entry_is_complete_and_dated() -> None:
    doc = load_table()
    models = doc["models"]
    sources = doc["sources"]
    assert isinstance(models, dict) and isinstance(sources, dict)
    assert len(models) >= 20
    for model, entry in models.items():
        assert entry["input"] > 0 and entry["output"] > 0, model
        cached = entry["cached_input"]
        assert cached is None or 0 < cached <= entry["input"], model
        assert date.fromisoformat(entry["checked"]) <= date.today(), model
        assert entry["source"] in sources, model
        assert model == model.lower(), "ids are matched lower-case"


@pytest.mark.parametrize(
    "model",
    ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-5", "o3", "claude-sonnet-4-5", "claude-haiku-4-5"],
)
def test_common_models_are_priced(model: str) -> None:
    assert model in known_models()


@pytest.mark.parametrize(
    ("asked", "entry"),
    [
        ("gpt-4o", "gpt-4o"),
        ("GPT-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-4.1", "gpt-4.1"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
    ],
)
def test_price_lookup_normalises_ids(asked: str, entry: str) -> None:
    price = price_for(asked)
    assert price is not None
    assert price.model == entry


@pytest.mark.parametrize(
    "model", [None, "", "llama3.1:8b", "gpt-4o-audio-preview", "my-finetune", "gpt-4"]
)
def test_unknown_models_have_no_price(model: str | None) -> None:
    assert price_for(model) is None
    assert cost_usd(model, ReplyUsage(input_tokens=1000, output_tokens=1000)) is None


def test_cost_of_a_reply() -> None:
    # gpt-4o: $2.50 input, $1.25 cached input, $10 output per million tokens.
    usage = ReplyUsage(input_tokens=1_000_000, output_tokens=100_000)
    assert cost_usd("gpt-4o", usage) == pytest.approx(2.5 + 1.0)
    cached = ReplyUsage(input_tokens=1_000_000, output_tokens=0, cached_tokens=400_000)
    assert cost_usd("gpt-4o", cached) == pytest.approx(0.6 * 2.5 + 0.4 * 1.25)


def test_cost_without_a_cache_price_bills_cached_tokens_as_input() -> None:
    price = price_for("gpt-3.5-turbo")
    assert price is not None and price.cached_input is None
    usage = ReplyUsage(input_tokens=2_000, cached_tokens=1_000)
    assert cost_usd("gpt-3.5-turbo", usage) == pytest.approx(2_000 * price.input / 1e6)


def test_cached_tokens_above_input_do_not_make_cost_negative() -> None:
    usage = ReplyUsage(input_tokens=10, output_tokens=0, cached_tokens=50)
    cost = cost_usd("claude-sonnet-4-5", usage)
    assert cost is not None and cost >= 0


def test_estimate_counts_characters_tools_and_output_limit() -> None:
    small = Request(messages=(Message("user", "x" * 400),), model="gpt-4o")
    assert estimate_input_tokens(small) == 100 + 4
    bigger = Request(
        messages=(
            Message("user", "x" * 400),
            Message("assistant", "", tool_calls=(ToolCall("c1", "read", '{"p": 1}'),)),
            Message("tool", "y" * 4000, tool_call_id="c1", name="read"),
        ),
        tools=(ToolSpec("read", "Read a file", {"type": "object"}),),
        model="gpt-4o",
    )
    assert estimate_input_tokens(bigger) > estimate_input_tokens(small) + 1000

    est = estimate_request_cost("gpt-4o", small)
    price = price_for("gpt-4o")
    assert price is not None and est is not None
    assert est == pytest.approx(
        (104 * price.input + DEFAULT_MAX_OUTPUT_TOKENS * price.output) / 1e6
    )

    limited = Request(messages=small.messages, model="gpt-4o", params={"max_tokens": 10})
    est_limited = estimate_request_cost(None, limited)
    assert est_limited == pytest.approx((104 * price.input + 10 * price.output) / 1e6)


def test_estimate_is_at_least_the_real_cost_of_a_typical_call() -> None:
    # 2,000 characters of English is about 500 tokens; a reply within max_tokens costs less.
    request = Request(
        messages=(Message("user", "word " * 400),), params={"max_tokens": 300}, model="gpt-4o"
    )
    actual = cost_usd("gpt-4o", ReplyUsage(input_tokens=420, output_tokens=300))
    estimate = estimate_request_cost("gpt-4o", request)
    assert actual is not None and estimate is not None
    assert estimate >= actual


def test_estimate_for_unknown_model_is_none() -> None:
    assert estimate_request_cost("llama3", Request(messages=(Message("user", "hi"),))) is None
