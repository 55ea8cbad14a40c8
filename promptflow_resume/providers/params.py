"""Which model parameters a progress file may carry to the provider (docs/spec.md 10.2).

A run records its parameters in ``config.params``; a resumed run sends them again. Whoever
wrote a progress file chooses every byte of it, so a parameter read from one is sent only when

- the workflow gives the same key with the same value this time (the workflow's ``params:``
  and top-level ``temperature:`` … are sent as written), or
- it is a known sampling parameter with a value in range (``SAMPLING``).

Anything else (``n: 100``, ``extra_headers``, ``base_url``, ``max_tokens: 10000000``) is
refused before any request, naming the key and its line::

    check_recorded_params({"temperature": 0.2}, {}, source=path)   # fine
    check_recorded_params({"n": 100}, {}, source=path)             # UntrustedParamError
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..base.errors import UntrustedParamError

#: The largest reply a progress file may ask for: above every current model's output limit.
MAX_OUTPUT_TOKENS = 200_000
#: At most this many stop sequences of at most this many characters (OpenAI's own limit is 4).
MAX_STOPS = 4
MAX_STOP_CHARS = 200
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")


def _number(low: float, high: float) -> Callable[[Any], bool]:
    def ok(value: Any) -> bool:
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and low <= value <= high
        )

    return ok


def _integer(low: int, high: int) -> Callable[[Any], bool]:
    def ok(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

    return ok


def _stop(value: Any) -> bool:
    words = [value] if isinstance(value, str) else value
    return (
        isinstance(words, list)
        and len(words) <= MAX_STOPS
        and all(isinstance(w, str) and 0 < len(w) <= MAX_STOP_CHARS for w in words)
    )


#: Known sampling parameters → (the values accepted, as said in the error).
SAMPLING: dict[str, tuple[Callable[[Any], bool], str]] = {
    "temperature": (_number(0, 2), "a number from 0 to 2"),
    "top_p": (_number(0, 1), "a number from 0 to 1"),
    "top_k": (_integer(1, 1000), "a whole number from 1 to 1000"),
    "max_tokens": (_integer(1, MAX_OUTPUT_TOKENS), f"a whole number from 1 to {MAX_OUTPUT_TOKENS}"),
    "max_completion_tokens": (
        _integer(1, MAX_OUTPUT_TOKENS),
        f"a whole number from 1 to {MAX_OUTPUT_TOKENS}",
    ),
    "seed": (_integer(-(2**63), 2**63 - 1), "a 64-bit whole number"),
    "stop": (_stop, f"a string or a list of at most {MAX_STOPS} strings"),
    "presence_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "frequency_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "reasoning_effort": (
        lambda v: v in REASONING_EFFORTS,
        "one of " + ", ".join(REASONING_EFFORTS),
    ),
}


def _same(a: Any, b: Any) -> bool:
    # JSON text tells 1 from True and 1 from 1.0, which == does not.
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def refused_param(key: str, value: Any, workflow_params: Mapping[str, Any]) -> str | None:
    """Why ``key: value`` from a progress file is not sent, or None when it may be."""
    if key in workflow_params and _same(workflow_params[key], value):
        return None
    known = SAMPLING.get(key)
    if known is None:
        return (
            f"{key} is not a sampling parameter flow sends from a progress file (those are "
            f"{', '.join(SAMPLING)})"
        )
    accepts, wanted = known
    if accepts(value):
        return None
    shown = json.dumps(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{key} is {shown}; from a progress file it must be {wanted}"


def _line_of(source: Path, key: str) -> tuple[int | None, int | None]:
    """Line and column of ``key`` inside ``config.params`` in the file's front matter (the
    ``params:`` line when the key is not found on it or below it)."""
    try:
        text = source.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, None
    found: tuple[int, int] | None = None
    for number, line in enumerate(text.split("\n")[1:2000], start=2):
        indent = len(line) - len(line.lstrip())
        if line.strip() == "---" or (found is not None and indent <= found[1]):
            break
        if found is None:
            if indent > 0 and line.lstrip().startswith("params:"):
                found = (number, indent)
                column = line.find(f"{key}:", indent)
                if column != -1:
                    return number, column + 1
        elif line.lstrip().startswith(f"{key}:"):
            return number, indent + 1
    return (found[0], None) if found is not None else (None, None)


def check_recorded_params(
    recorded: Mapping[str, Any], workflow_params: Mapping[str, Any], *, source: Path
) -> None:
    """Raise ``UntrustedParamError`` (exit 4) for the first parameter that is not sent."""
    for key, value in recorded.items():
        why = refused_param(key, value, workflow_params)
        if why is None:
            continue
        line, column = _line_of(source, key)
        raise UntrustedParamError(
            f"{why}. Nothing was sent: flow sends parameters from a progress file only when "
            "they are sampling parameters in range or the workflow gives them too.",
            path=source,
            line=line,
            column=column,
            field=f"$.config.params.{key}",
            hint=f"Remove {key} from config.params in the file, or give it in the workflow's "
            "params: if you mean to send it.",
        )
