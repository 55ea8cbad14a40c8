"""The ``replay`` provider: answers each request with the reply a recording holds for it.

A run replayed from a recording (see ``providers.recording`` for the file format) gets the
same replies, tool calls and token usage as the recorded run, with no model, key or network.
Which reply to give is a function of the request alone, never of a call counter, so a replay
can be interrupted and resumed in a new process like any other run::

    provider = ReplayProvider(ProviderSettings(name="replay", recording="demo.recording.jsonl"))
    reply = provider.complete(request)

A request the recording does not hold is a ``ReplayMismatchError`` that names the closest
recorded exchange (the one sharing the longest run of leading messages) and the first
difference, e.g. ``messages[3].content differs at character 121: recorded "...", sent "..."``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..base.errors import ProviderSetupError, ReplayMismatchError
from .provider import ProviderSettings, Reply, Request
from .recording import (
    Recording,
    Redact,
    RequestHasher,
    common_prefix,
    read_recording,
)

_MISMATCH_HINT = (
    "Re-record the session with `flow run --record`, or run the workflow unchanged (the same "
    "workflow text, inputs, model and tools) so that every request matches the recording."
)
#: Characters of context shown before and after the first differing character.
_BEFORE, _AFTER = 24, 40
#: Message fields in the order a reader checks them; anything else follows, sorted.
_FIELD_ORDER = ("role", "name", "tool_call_id", "content", "tool_calls", "is_error")
_MESSAGE_DEFAULTS: dict[str, Any] = {
    "tool_calls": [],
    "tool_call_id": None,
    "name": None,
    "is_error": False,
}


class ReplayProvider:
    """Replies from a recording; stateless across processes (the request picks the reply)."""

    name = "replay"

    def __init__(self, settings: ProviderSettings, *, redact: Redact | None = None) -> None:
        if not settings.recording:
            raise ProviderSetupError(
                "the replay provider needs a recording to replay, and none was given.",
                hint="Name a *.recording.jsonl file (made with `flow run --record`) as the "
                "recording to replay.",
            )
        # The engine may hand the redaction hook over in ``extra`` (the registry passes only
        # settings); it must be the one used when recording, or secrets will not match.
        hook = redact or settings.extra.get("redact")
        self.recording: Recording = read_recording(settings.recording)
        self._hasher = RequestHasher(hook if callable(hook) else None)

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        """Return the recorded reply for ``request`` or raise ``ReplayMismatchError``."""
        key = self._hasher.advance(request)
        exchange = self.recording.find(key)
        if exchange is None:
            raise self._mismatch()
        if on_text is not None and exchange.reply.content:
            on_text(exchange.reply.content)
        return exchange.reply

    def _mismatch(self) -> ReplayMismatchError:
        sent_meta = self._hasher.meta
        sent_messages = self._hasher.messages
        sent_hashes = self._hasher.hashes
        rec = self.recording
        torn = (
            f" (line {rec.torn_line} is incomplete, cut off while recording, and was ignored)"
            if rec.torn_line is not None
            else ""
        )
        if not rec.exchanges:
            err = ReplayMismatchError(
                f"the recording has no exchanges{torn}, so there is no reply to replay.",
                hint=_MISMATCH_HINT,
            )
            err.path = str(rec.path)
            return err
        # Closest: longest shared message prefix, then the same model/params/tools, then the
        # nearest message count, then the latest line.
        best: tuple[int, bool, int, int] | None = None
        best_index = 0
        for i, (ex, _, hashes) in enumerate(rec.walk()):
            shared = common_prefix(hashes, sent_hashes)
            score = (shared, ex.meta == sent_meta, -abs(len(hashes) - len(sent_hashes)), i)
            if best is None or score > best:
                best, best_index = score, i
        assert best is not None
        shared = best[0]
        recorded_messages: list[dict[str, Any]] = []
        for i, (_, messages, _) in enumerate(rec.walk()):
            if i == best_index:
                recorded_messages = list(messages)
                break
        ex = rec.exchanges[best_index]
        difference = first_difference(
            {**ex.meta, "messages": recorded_messages},
            {**sent_meta, "messages": sent_messages},
            start=shared,
        )
        err = ReplayMismatchError(
            "the request flow sent is not in the recording; the closest recorded exchange is "
            f"this line (it has {_plural(len(recorded_messages), 'message')}, "
            f"{len(sent_messages)} sent; {'none' if not shared else f'the first {shared}'} "
            f"agree){torn}. First difference: {difference}.",
            hint=_MISMATCH_HINT,
        )
        err.path = str(rec.path)
        err.line = ex.line
        return err


def first_difference(recorded: dict[str, Any], sent: dict[str, Any], *, start: int = 0) -> str:
    """Describe the first difference between two normalized requests, as path and excerpt.

    Messages are compared first (from index ``start``, the two being known equal before it),
    then tools, model and params.
    """
    rec_msgs: list[dict[str, Any]] = recorded["messages"]
    sent_msgs: list[dict[str, Any]] = sent["messages"]
    for i in range(start, max(len(rec_msgs), len(sent_msgs))):
        if i >= len(rec_msgs):
            return (
                f"messages[{i}] was sent ({_describe(sent_msgs[i])}) but the recorded request "
                f"ends after {_plural(len(rec_msgs), 'message')}"
            )
        if i >= len(sent_msgs):
            return (
                f"the recorded request has messages[{i}] ({_describe(rec_msgs[i])}) but only "
                f"{_plural(len(sent_msgs), 'message')} {'was' if len(sent_msgs) == 1 else 'were'} "
                "sent"
            )
        found = _diff(
            {**_MESSAGE_DEFAULTS, **rec_msgs[i]},
            {**_MESSAGE_DEFAULTS, **sent_msgs[i]},
            f"messages[{i}]",
        )
        if found:
            return found
    for key in ("tools", "model", "params"):
        found = _diff(recorded.get(key), sent.get(key), key)
        if found:
            return found
    return "none found (the requests are equal once normalized)"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _describe(message: dict[str, Any]) -> str:
    text = message.get("content", "")
    return f"{message.get('role')} {_quote(text[: _AFTER + _BEFORE], cut=len(text) > 64)}"


def _quote(text: str, *, cut_before: bool = False, cut: bool = False) -> str:
    body = json.dumps(text, ensure_ascii=False)[1:-1]
    return '"' + ("…" if cut_before else "") + body + ("…" if cut else "") + '"'


def _excerpt(text: str, at: int) -> str:
    lo = max(0, at - _BEFORE)
    hi = min(len(text), at + _AFTER)
    quoted = _quote(text[lo:hi], cut_before=lo > 0, cut=hi < len(text))
    return quoted + (" (the text ends there)" if at >= len(text) else "")


def _common_chars(a: str, b: str) -> int:
    """Length of the common prefix of two strings (binary search on slices: C-speed on long
    tool outputs)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _ordered_keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    keys = set(a) | set(b)
    first = [k for k in _FIELD_ORDER if k in keys]
    return first + sorted(keys - set(first))


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:79] + "…"


def _diff(a: Any, b: Any, path: str) -> str | None:
    """The first difference between two JSON-like values, or None when they are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in _ordered_keys(a, b):
            if k not in a:
                return f"{path}.{k} was sent ({_short(b[k])}) but is not in the recording"
            if k not in b:
                return f"{path}.{k} is in the recording ({_short(a[k])}) but was not sent"
            found = _diff(a[k], b[k], f"{path}.{k}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _diff(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path} has {len(a)} items in the recording, {len(b)} sent"
        return None
    if isinstance(a, str) and isinstance(b, str):
        if a == b:
            return None
        at = _common_chars(a, b)
        return (
            f"{path} differs at character {at + 1}: recorded {_excerpt(a, at)}, "
            f"sent {_excerpt(b, at)}"
        )
    if type(a) is type(b) and a == b:
        return None
    return f"{path}: recorded {_short(a)}, sent {_short(b)}"
