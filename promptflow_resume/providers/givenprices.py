"""Prices given by the person running flow: ``--price MODEL=IN/OUT[/CACHED]`` and ``--prices FILE``.

Both give USD per million tokens (input, output, and optionally cached input) for a model the
table lacks (a local model: ``--price llama3=0/0``) or prices differently (a negotiated rate).
A run records what it was given in ``config.prices``, so a resume, ``flow status`` and ``flow
show`` price it the same way; a later ``--price`` for the same model replaces the recorded one::

    given = parse_price_options(["llama3=0/0", "gpt-4o=2.5/10/1.25"])
    record = prices_record(given)          # {"llama3": {"input": 0.0, "output": 0.0}, ...}
    price_for("llama3", from_record(record)).cost(usage)  # 0.0
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..base.errors import FileNotFoundFlowError, InputError, InvalidFileError
from ..base.safeopen import read_regular
from .pricing import GivenPrices, Price

#: A prices file is a short mapping; anything bigger is not one.
MAX_PRICES_BYTES = 1 << 20
#: What a recorded or given price carries as its source (never a URL the table would name).
GIVEN_SOURCE = "given"
_KEYS = ("input", "output", "cached_input")


def _rate(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InputError(
            f"--price {what}: {text!r} is not a price (a number of USD per million tokens, "
            "0 or more).",
            hint="Write --price MODEL=IN/OUT or MODEL=IN/OUT/CACHED, e.g. --price llama3=0/0.",
        )
    return value


def parse_price_option(text: str) -> tuple[str, Price]:
    """One ``--price MODEL=IN/OUT[/CACHED]`` value as a model name and its price."""
    model, sep, rates = text.partition("=")
    model = model.strip()
    parts = rates.split("/")
    if not sep or not model or len(parts) not in (2, 3):
        raise InputError(
            f"--price {text!r}: expected MODEL=IN/OUT or MODEL=IN/OUT/CACHED (USD per million "
            "input, output and cached input tokens).",
            hint="For a local model that costs nothing: --price llama3=0/0.",
        )
    values = [_rate(p.strip(), text) for p in parts]
    cached = values[2] if len(values) == 3 else None
    return model, Price(model, values[0], values[1], cached, "", GIVEN_SOURCE)


def parse_price_options(values: Iterable[str]) -> GivenPrices:
    """Every ``--price`` value, by lower-case model name (a later one for a model wins)."""
    given: GivenPrices = {}
    for text in values:
        model, price = parse_price_option(text)
        given[model.lower()] = price
    return given


def _entry(model: str, raw: Any, where: Path, field: str) -> Price:
    """One model's price from a prices file or a run's record."""
    if not isinstance(raw, Mapping):
        raise InvalidFileError(
            f"the price of {model!r} must be a mapping with input and output (USD per million "
            "tokens), and optionally cached_input.",
            path=where,
            field=field,
        )
    unknown = [k for k in raw if k not in _KEYS]
    values: dict[str, float | None] = {}
    for key in _KEYS:
        value = raw.get(key)
        if value is None and key == "cached_input":
            values[key] = None
            continue
        number = float(value) if isinstance(value, int | float) else math.nan
        if unknown or isinstance(value, bool) or not math.isfinite(number) or number < 0:
            what = f"unknown key {unknown[0]!r}" if unknown else f"{key} is {value!r}"
            raise InvalidFileError(
                f"the price of {model!r}: {what}; give input, output and optionally "
                "cached_input, each a number of USD per million tokens, 0 or more.",
                path=where,
                field=f"{field}.{unknown[0] if unknown else key}",
            )
        values[key] = number
    return Price(
        model,
        float(values["input"] or 0.0),
        float(values["output"] or 0.0),
        values["cached_input"],
        "",
        GIVEN_SOURCE,
    )


def load_prices_file(path: str | Path) -> GivenPrices:
    """A ``--prices FILE``: YAML or JSON, a mapping of model name to its prices."""
    from ..base import yamlio

    where = Path(path)
    data = read_regular(where, MAX_PRICES_BYTES, what="prices file", follow=True)
    if data is None:
        raise FileNotFoundFlowError(f"the prices file {where} does not exist.", path=where)
    if len(data) > MAX_PRICES_BYTES:
        raise InvalidFileError("the prices file is larger than 1 MiB.", path=where)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidFileError("the prices file is not UTF-8 text.", path=where) from None
    # YAML reads JSON too; errors name the line and column.
    doc = yamlio.load(text, path=where)
    if not isinstance(doc, Mapping) or not doc:
        raise InvalidFileError(
            "a prices file is a mapping of model name to {input, output, cached_input} "
            "(USD per million tokens).",
            path=where,
            field="$",
        )
    return {
        str(model).lower(): _entry(str(model), raw, where, f"$.{model}")
        for model, raw in doc.items()
    }


def prices_record(given: GivenPrices) -> dict[str, dict[str, float]]:
    """Given prices as a run records them in ``config.prices`` (sorted, plain numbers)."""
    record: dict[str, dict[str, float]] = {}
    for name in sorted(given):
        price = given[name]
        entry = {"input": price.input, "output": price.output}
        if price.cached_input is not None:
            entry["cached_input"] = price.cached_input
        record[price.model] = entry
    return record


def from_record(record: Mapping[str, Any], where: Path | None = None) -> GivenPrices:
    """A run's recorded ``config.prices`` as given prices (the schema has checked them)."""
    source = where or Path("progress.md")
    return {
        str(model).lower(): _entry(str(model), raw, source, f"$.config.prices.{model}")
        for model, raw in record.items()
    }


def merged(recorded: Mapping[str, Any], given: GivenPrices) -> dict[str, dict[str, float]]:
    """The record a run keeps: what it recorded, with this call's prices replacing those of
    the same models."""
    prices = from_record(recorded)
    prices.update(given)
    return prices_record(prices)


def dumps_record(record: Mapping[str, Any]) -> str:
    """The record as one line of JSON (for ``--json`` outputs and notes)."""
    return json.dumps(record, sort_keys=True)
