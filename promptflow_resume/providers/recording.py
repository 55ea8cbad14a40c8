"""Recording files: model exchanges as JSON Lines, written by ``--record``, read by ``replay``.

A recording (by convention ``*.recording.jsonl``) is UTF-8 text with one JSON object per line,
lines ended by ``\\n`` only. Line 1 is the header, every further line one exchange — a request
flow sent and the reply it got, in the order they happened (shown wrapped here; each is one
line in the file)::

    {"flow_recording": 1, "provider": "openai", "model": "gpt-4o-mini",
     "created": "2025-05-01T09:30:00Z"}
    {"request": {"messages": [{"content": "Summarize notes.md", "role": "user"}],
                 "model": "gpt-4o-mini", "params": {}, "prefix": 0, "tools": []},
     "reply": {"content": "Done.", "finish_reason": "stop",
               "usage": {"cached_tokens": 0, "input_tokens": 12, "output_tokens": 3}}}

The request is *normalized* so that only what reaches the model counts:

- ``messages``: each ``{"role", "content"}``, plus ``tool_calls`` (``[{"id", "name",
  "arguments"}]``), ``tool_call_id``, ``name`` and ``is_error`` when they are set. Messages flow
  adds about the run itself (``Message.note``, e.g. "this run was resumed") are left out, so a
  resumed run replays the same as an uninterrupted one.
- ``prefix``: the request's first ``prefix`` messages are the first ``prefix`` messages of the
  previous line's request; ``messages`` lists only the ones after them. A conversation grows by
  a few messages per model call, so this keeps a recording's size linear in the length of the
  run (not quadratic), and a diff shows each message once.
- ``tools`` (``[{"name", "description", "parameters"}]``), ``model`` and ``params``
  (temperature, max_tokens, ...) as sent.

The reply holds ``content``, ``usage`` (``input_tokens``, ``output_tokens``,
``cached_tokens``) and, when set, ``tool_calls``, ``model`` and ``finish_reason``; replaying
returns the same usage, so token and cost accounting replay too.

Keys are sorted inside ``request`` and ``reply`` and nothing depends on the clock except the
header's ``created`` (taken from ``SOURCE_DATE_EPOCH`` when that is set), so recording the same
run twice gives the same bytes and recordings diff cleanly. Two requests *match* when their
normalized forms are equal; the lookup key is a SHA-256 over the canonical JSON of the model,
params and tools and a hash chain over the messages (see ``RequestHasher``). When a request was
recorded more than once, the last line wins.

Secrets: the recorder passes every message text, tool-call argument text, reply text, tool
description and param string through an optional ``redact`` function before writing, and the
replay provider passes the requests it is sent through the same function before matching.

Durability: each exchange is appended, flushed and fsynced before the reply is handed back.
A last line without its ``\\n`` that is not valid JSON was cut off by a crash: readers ignore
it and the next recorder cuts it away before appending (``providers.recorder`` writes
recordings, ``providers.replay`` answers from them)::

    recording = read_recording("run.recording.jsonl")
    recording.find(request_key(request))
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

from ..base.errors import ProviderSetupError
from ..base.jsonvalues import BadJson, field_path, loads_json
from ..base.safeopen import read_regular
from ..chat import Message, MessageRole, ToolCall
from .provider import Reply, ReplyUsage, Request

RECORDING_VERSION = 1
#: The file name suffix ``flow run --record`` uses by convention.
RECORDING_SUFFIX = ".recording.jsonl"
#: Recordings larger than this are refused unread (one of flow's is about 2 KB per exchange).
MAX_RECORDING_BYTES = 256 * 1024 * 1024

Redact = Callable[[str], str]

_ROLES: frozenset[str] = frozenset(get_args(MessageRole))
_FIX_HINT = (
    "The file may be damaged or edited by hand: re-record it with `flow run --record`, or "
    "restore it from version control."
)


def setup_error(message: str, *, path: str | Path, line: int | None = None) -> ProviderSetupError:
    """A ``ProviderSetupError`` located at ``path:line`` (the class itself takes no location)."""
    err = ProviderSetupError(message, hint=_FIX_HINT)
    err.path = str(path)
    err.line = line
    return err


# --- canonical forms ---------------------------------------------------------------------


def canonical(value: Any) -> str:
    """Canonical JSON text: sorted keys, no whitespace, unicode as is."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def stable_line(value: Any) -> str:
    """Sorted-key JSON for a line of the file; ASCII-escaped only if it cannot be UTF-8."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: keep them, escaped, rather than fail the run
        text = json.dumps(value, sort_keys=True, ensure_ascii=True)
    return text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _chain(previous: str, message_canonical: str) -> str:
    """The hash of a message list is a chain, so a prefix's hash never needs recomputing."""
    return _digest(previous + "\n" + message_canonical)


def _redact_strings(value: Any, redact: Redact) -> Any:
    """Apply ``redact`` to every string value (not to keys) in a JSON-like structure."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_strings(v, redact) for v in value]
    if isinstance(value, dict):
        return {k: _redact_strings(v, redact) for k, v in value.items()}
    return value


def _json_native(value: Any) -> Any:
    """Round-trip through JSON so live values and values read back from a file compare equal."""
    return json.loads(json.dumps(value, default=str))


def normalize_message(message: Message, redact: Redact | None = None) -> dict[str, Any]:
    """A message as the recording stores it: defaults left out, texts redacted."""
    r = redact or _identity
    out: dict[str, Any] = {"role": message.role, "content": r(message.content)}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": r(c.arguments)} for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    if message.is_error:
        out["is_error"] = True
    return out


def normalize_meta(request: Request, redact: Redact | None = None) -> dict[str, Any]:
    """The part of a request that is not messages: model, params, tools."""
    meta = {
        "model": request.model,
        "params": _json_native(dict(request.params)),
        "tools": [
            {"name": t.name, "description": t.description, "parameters": _json_native(t.parameters)}
            for t in request.tools
        ],
    }
    return _redact_strings(meta, redact) if redact else meta


def normalize_request(request: Request, redact: Redact | None = None) -> dict[str, Any]:
    """The whole normalized request (every non-note message), as compared when replaying."""
    out = normalize_meta(request, redact)
    out["messages"] = [normalize_message(m, redact) for m in request.messages if not m.note]
    return out


def reply_to_dict(reply: Reply, redact: Redact | None = None) -> dict[str, Any]:
    """A reply as the recording stores it."""
    r = redact or _identity
    out: dict[str, Any] = {
        "content": r(reply.content),
        "usage": {
            "input_tokens": reply.usage.input_tokens,
            "output_tokens": reply.usage.output_tokens,
            "cached_tokens": reply.usage.cached_tokens,
        },
    }
    if reply.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": r(c.arguments)} for c in reply.tool_calls
        ]
    if reply.model is not None:
        out["model"] = reply.model
    if reply.finish_reason is not None:
        out["finish_reason"] = reply.finish_reason
    return out


def _identity(text: str) -> str:
    return text


def request_key(meta_canonical: str, last_chain_hash: str) -> str:
    """The lookup key of a request: its meta and the chain hash of all its messages."""
    return _digest(meta_canonical + "\n" + last_chain_hash)


class RequestHasher:
    """Normalizes and keys requests, reusing the work done for the previous call's messages.

    The engine sends the whole conversation on every call. Re-normalizing 10,000 messages per
    call would make long runs quadratic, so when a request starts with the previous request's
    messages (checked by tuple equality, which is an identity check for reused ``Message``
    objects) only the new tail is normalized and hashed.
    """

    def __init__(self, redact: Redact | None = None) -> None:
        self._redact = redact
        self._raw: tuple[Message, ...] | None = None
        #: Normalized non-note messages of the last request, and the chain hash after each.
        self.messages: list[dict[str, Any]] = []
        self.hashes: list[str] = []
        self._meta_source: tuple[Any, ...] | None = None
        self.meta: dict[str, Any] = {}
        self.meta_canonical = ""

    def advance(self, request: Request) -> str:
        """Make ``request`` the current one and return its lookup key."""
        raw = tuple(request.messages)
        known = self._raw
        if known is not None and len(raw) >= len(known) and raw[: len(known)] == known:
            tail = raw[len(known) :]
        else:
            tail = raw
            self.messages = []
            self.hashes = []
        last = self.hashes[-1] if self.hashes else ""
        for message in tail:
            if message.note:
                continue
            normalized = normalize_message(message, self._redact)
            last = _chain(last, canonical(normalized))
            self.messages.append(normalized)
            self.hashes.append(last)
        self._raw = raw
        source = (request.model, request.params, request.tools)
        if source != self._meta_source:
            self.meta = normalize_meta(request, self._redact)
            self.meta_canonical = canonical(self.meta)
            self._meta_source = (request.model, dict(request.params), request.tools)
        return request_key(self.meta_canonical, last)


def common_prefix(a: list[str], b: list[str]) -> int:
    """How many leading chain hashes two lists share (binary search: equal hashes at i imply
    equal hashes before i)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[mid - 1] == b[mid - 1]:
            lo = mid
        else:
            hi = mid - 1
    return lo


# --- reading -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedExchange:
    """One exchange line: where it is, its request (messages after ``prefix``) and reply."""

    line: int
    prefix: int
    messages: tuple[dict[str, Any], ...]
    hashes: tuple[str, ...]
    meta: dict[str, Any]
    key: str
    reply: Reply
    reply_canonical: str


class Recording:
    """A recording read into memory: its header, exchanges and a request-key index."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.header = header
        self.exchanges: list[RecordedExchange] = []
        self.index: dict[str, int] = {}
        #: Line number of a cut-off last line that was ignored, if any.
        self.torn_line: int | None = None
        #: Byte length of the complete lines (where a recorder appends).
        self.valid_size = 0
        #: True when the last complete line lacks its ``\\n`` (a hand-edited file).
        self.missing_newline = False

    def __len__(self) -> int:
        return len(self.exchanges)

    def find(self, key: str) -> RecordedExchange | None:
        """The last recorded exchange whose request has this key."""
        i = self.index.get(key)
        return None if i is None else self.exchanges[i]

    def walk(self) -> Iterator[tuple[RecordedExchange, list[dict[str, Any]], list[str]]]:
        """Each exchange with its full message list and chain hashes (lists reused in place:
        copy them to keep them past the next step)."""
        messages: list[dict[str, Any]] = []
        hashes: list[str] = []
        for ex in self.exchanges:
            del messages[ex.prefix :]
            del hashes[ex.prefix :]
            messages.extend(ex.messages)
            hashes.extend(ex.hashes)
            yield ex, messages, hashes

    def requests(self) -> Iterator[tuple[dict[str, Any], Reply]]:
        """Each exchange as (full normalized request, reply), in file order."""
        for ex, messages, _ in self.walk():
            yield {**ex.meta, "messages": list(messages)}, ex.reply

    def last_hashes(self) -> list[str]:
        """The chain hashes of the last exchange's messages (empty when there is none)."""
        last: list[str] = []
        for _, _, hashes in self.walk():
            last = hashes
        return list(last)


def read_recording(path: str | Path) -> Recording:
    """Read and check a recording; a damaged file is a ``ProviderSetupError`` at path:line."""
    # Lexically, so "run/../x" names x even before run/ exists (paths relative to a
    # progress folder that is not created yet).
    p = Path(os.path.normpath(path))
    try:
        # Named by the person or by the run: a link is followed, but it must end at a
        # regular file, read no further than the limit.
        data = read_regular(p, MAX_RECORDING_BYTES, what="recording", follow=True)
        if data is None:
            raise FileNotFoundError(p)
    except FileNotFoundError:
        raise ProviderSetupError(
            f"the recording {p} does not exist.",
            hint="Record one with `flow run --record`, or pass the path of an existing "
            "*.recording.jsonl file.",
        ) from None
    except OSError as err:
        raise setup_error(f"cannot read the recording: {err.strerror}.", path=p) from None
    if len(data) > MAX_RECORDING_BYTES:
        raise setup_error(
            f"the recording is over the {MAX_RECORDING_BYTES // (1024 * 1024)} MiB limit; it "
            "was not read.",
            path=p,
        )
    return parse_recording(data, p)


def parse_recording(data: bytes, path: Path) -> Recording:
    """Parse the bytes of a recording file (see the module docstring for the format)."""
    # Split on b"\n" only: str.splitlines would also split inside JSON strings at U+2028.
    lines = data.split(b"\n")
    complete_end = data.rfind(b"\n") + 1
    tail = lines.pop()  # text after the last newline; b"" when the file ends with one
    torn: int | None = None
    missing_newline = False
    if tail:
        if parses_as_json(tail):
            lines.append(tail)
            complete_end = len(data)
            missing_newline = True
        else:
            torn = len(lines) + 1
    if not lines:
        if torn is not None:
            raise setup_error(
                "the recording has no complete header line (the file was cut off while it "
                "was being created).",
                path=path,
                line=1,
            )
        raise setup_error("the file is empty, not a recording.", path=path, line=1)
    header = _parse_header(lines[0], path)
    rec = Recording(path, header)
    rec.torn_line = torn
    rec.valid_size = complete_end
    rec.missing_newline = missing_newline
    hashes: list[str] = []
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        ex = _parse_exchange(raw, number, hashes, path)
        rec.index[ex.key] = len(rec.exchanges)
        rec.exchanges.append(ex)
    return rec


def parses_as_json(raw: bytes) -> bool:
    """True when ``raw`` is one whole JSON value (a line a crash did not cut off)."""
    try:
        json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return True


def _load_line(raw: bytes, number: int, path: Path) -> Any:
    try:
        return loads_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise setup_error(f"line {number} is not UTF-8 text.", path=path, line=number) from None
    except json.JSONDecodeError as err:
        e = setup_error(f"line {number} is not valid JSON: {err.msg}.", path=path, line=number)
        e.column = err.colno
        raise e from None
    except BadJson as err:
        # NaN usage or a 100-digit token count would pass budgets or crash printing.
        e = setup_error(
            f"line {number} holds a value flow never records: {err.problem}.",
            path=path,
            line=number,
        )
        e.column = err.column
        e.field = field_path(err.parts) if err.parts is not None else None
        raise e from None


def _parse_header(raw: bytes, path: Path) -> dict[str, Any]:
    header = _load_line(raw, 1, path)
    if not isinstance(header, dict) or "flow_recording" not in header:
        raise setup_error(
            "this is not a flow recording: its first line must be a header like "
            '{"flow_recording": 1, ...}.',
            path=path,
            line=1,
        )
    version = header["flow_recording"]
    if version != RECORDING_VERSION:
        err = setup_error(
            f"recording format version {version!r} is not supported; this flow reads "
            f"version {RECORDING_VERSION}.",
            path=path,
            line=1,
        )
        err.hint = "Re-record the session with this version of flow (`flow run --record`)."
        raise err
    return header


class _Bad(ValueError):
    """A shape error inside one line, with the JSON path of the offending field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def _expect(value: Any, kind: type | tuple[type, ...], field: str, what: str) -> Any:
    # bool is an int in Python; a count or a text must not accept true/false.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, str)):
        raise _Bad(field, f"expected {what}, found {json.dumps(value)[:60]}")
    return value


def _opt_str(d: dict[str, Any], key: str, field: str) -> str | None:
    value = d.get(key)
    return None if value is None else cast(str, _expect(value, str, f"{field}.{key}", "a string"))


def _tool_calls(value: Any, field: str) -> tuple[ToolCall, ...]:
    calls = _expect(value, list, field, "a list of tool calls")
    out: list[ToolCall] = []
    for i, c in enumerate(calls):
        f = f"{field}[{i}]"
        _expect(c, dict, f, 'an object {"id", "name", "arguments"}')
        out.append(
            ToolCall(
                id=_expect(c.get("id"), str, f"{f}.id", "a string"),
                name=_expect(c.get("name"), str, f"{f}.name", "a string"),
                arguments=_expect(c.get("arguments"), str, f"{f}.arguments", "JSON text"),
            )
        )
    return tuple(out)


def message_from_dict(d: Any, field: str = "message") -> Message:
    """Rebuild a ``Message`` from its recorded form (raises ``ValueError`` naming the field)."""
    _expect(d, dict, field, "a message object")
    role = _expect(d.get("role"), str, f"{field}.role", "a role")
    if role not in _ROLES:
        raise _Bad(f"{field}.role", f"expected one of {', '.join(sorted(_ROLES))}, found {role!r}")
    return Message(
        role=cast(MessageRole, role),
        content=_expect(d.get("content"), str, f"{field}.content", "a string"),
        tool_calls=_tool_calls(d.get("tool_calls", []), f"{field}.tool_calls"),
        tool_call_id=_opt_str(d, "tool_call_id", field),
        name=_opt_str(d, "name", field),
        is_error=_expect(d.get("is_error", False), bool, f"{field}.is_error", "true or false"),
    )


def reply_from_dict(d: Any, field: str = "reply") -> Reply:
    """Rebuild a ``Reply`` from its recorded form (raises ``ValueError`` naming the field)."""
    _expect(d, dict, field, "a reply object")
    usage = _expect(d.get("usage", {}), dict, f"{field}.usage", "an object of token counts")
    counts = {}
    for k in ("input_tokens", "output_tokens", "cached_tokens"):
        n = _expect(usage.get(k, 0), int, f"{field}.usage.{k}", "a whole number")
        if n < 0:
            raise _Bad(f"{field}.usage.{k}", f"expected a count of 0 or more, found {n}")
        counts[k] = n
    return Reply(
        content=_expect(d.get("content"), str, f"{field}.content", "a string"),
        tool_calls=_tool_calls(d.get("tool_calls", []), f"{field}.tool_calls"),
        usage=ReplyUsage(**counts),
        model=_opt_str(d, "model", field),
        finish_reason=_opt_str(d, "finish_reason", field),
    )


def _parse_exchange(raw: bytes, number: int, hashes: list[str], path: Path) -> RecordedExchange:
    """Parse one exchange line; ``hashes`` holds the previous request's chain (updated here)."""
    obj = _load_line(raw, number, path)
    try:
        _expect(obj, dict, "$", 'an object {"request": ..., "reply": ...}')
        req = _expect(obj.get("request"), dict, "$.request", "a request object")
        prefix = _expect(req.get("prefix", 0), int, "$.request.prefix", "a whole number")
        if not 0 <= prefix <= len(hashes):
            raise _Bad(
                "$.request.prefix",
                f"it keeps {prefix} messages but the previous request has {len(hashes)}",
            )
        raw_messages = _expect(req.get("messages", []), list, "$.request.messages", "a list")
        # Re-normalize what was read, so hand-written defaults ("is_error": false) still match.
        messages = tuple(
            normalize_message(message_from_dict(m, f"$.request.messages[{i}]"))
            for i, m in enumerate(raw_messages)
        )
        tools = _expect(req.get("tools", []), list, "$.request.tools", "a list of tools")
        norm_tools = []
        for i, t in enumerate(tools):
            f = f"$.request.tools[{i}]"
            _expect(t, dict, f, 'an object {"name", "description", "parameters"}')
            norm_tools.append(
                {
                    "name": _expect(t.get("name"), str, f"{f}.name", "a string"),
                    "description": _expect(t.get("description"), str, f"{f}.description", "text"),
                    "parameters": _expect(t.get("parameters"), dict, f"{f}.parameters", "object"),
                }
            )
        meta = {
            "model": _opt_str(req, "model", "$.request"),
            "params": _expect(req.get("params", {}), dict, "$.request.params", "an object"),
            "tools": norm_tools,
        }
        reply = reply_from_dict(obj.get("reply"), "$.reply")
    except _Bad as bad:
        err = setup_error(f"line {number} is not a valid exchange: {bad.problem}.", path=path)
        err.line = number
        err.field = bad.field
        raise err from None
    del hashes[prefix:]
    last = hashes[-1] if hashes else ""
    new_hashes = []
    for m in messages:
        last = _chain(last, canonical(m))
        new_hashes.append(last)
    hashes.extend(new_hashes)
    return RecordedExchange(
        line=number,
        prefix=prefix,
        messages=messages,
        hashes=tuple(new_hashes),
        meta=meta,
        key=request_key(canonical(meta), last),
        reply=reply,
        reply_canonical=canonical(reply_to_dict(reply)),
    )
