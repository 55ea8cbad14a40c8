"""How many tokens a model reads at once, and how many a request would send.

The context windows ship as ``data/context_windows.json`` (looked up like the pricing table);
a workflow's ``context_window:`` overrides them. A request's size is estimated from the
characters it holds (about four per token, ``pricing.estimate_input_tokens``), or counted with
``tiktoken`` for OpenAI models when that optional extra is installed *and* its encoding files
are at hand: tiktoken fetches them from the network on first use, so offline (or when the
fetch fails) flow keeps the character estimate::

    context_window("gpt-4o-2024-08-06")      # 128000
    estimate_tokens(request)                 # characters / 4 + per-message overhead
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any

from ..base.packagedata import read_text
from .pricing import MESSAGE_OVERHEAD_TOKENS, estimate_input_tokens, lookup_names
from .provider import Request


@lru_cache(maxsize=1)
def _table() -> dict[str, int]:
    """The context-window table, read once from the package data."""
    text = read_text("data/context_windows.json")
    doc: dict[str, Any] = json.loads(text)
    return {name.lower(): int(size) for name, size in doc["models"].items()}


def context_window(model: str | None) -> int | None:
    """The context window of ``model`` in tokens, or None when the table does not know it."""
    if not model:
        return None
    table = _table()
    for name in lookup_names(model):
        size = table.get(name)
        if size is not None:
            return size
    return None


#: Per-process: the tiktoken encoding for a model id, or None once it could not be had.
_ENCODINGS: dict[str, Any] = {}


def _encoding(model: str | None) -> Any:
    """A tiktoken encoding for an OpenAI ``model``, or None (not installed, not an OpenAI
    model, or its encoding file could not be loaded, e.g. offline)."""
    if not model:
        return None
    name = lookup_names(model)[0]
    if not name.startswith(("gpt-", "o1", "o3", "o4")):
        return None
    if name in _ENCODINGS:
        return _ENCODINGS[name]
    encoding = None
    try:
        import tiktoken

        encoding = tiktoken.encoding_for_model(name)
    except Exception:  # not installed, unknown model, or no network for the encoding file
        encoding = None
    _ENCODINGS[name] = encoding
    return encoding


def estimate_tokens(request: Request) -> int:
    """The tokens ``request`` would send: counted with tiktoken when it can, else estimated
    from its characters (both add a few tokens per message for the chat format)."""
    encoding = _encoding(request.model)
    if encoding is None:
        return estimate_input_tokens(request)
    count = 0
    for message in request.messages:
        count += len(encoding.encode(message.content, disallowed_special=()))
        for call in message.tool_calls:
            count += len(encoding.encode(call.name + call.arguments, disallowed_special=()))
    for tool in request.tools:
        text = tool.name + tool.description + json.dumps(tool.parameters, separators=(",", ":"))
        count += len(encoding.encode(text, disallowed_special=()))
    return count + MESSAGE_OVERHEAD_TOKENS * len(request.messages)


def text_tokens(text: str) -> int:
    """A character estimate of the tokens in ``text`` (used to size what is kept)."""
    return math.ceil(len(text) / 4)
