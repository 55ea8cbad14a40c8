"""The ``scripted`` provider: replies written in advance, for demos, tests and rehearsals.

A script is a YAML or JSON file (named by ``settings.recording`` or ``settings.extra["script"]``,
which may also hold the script itself as a mapping)::

    replies:
      - content: "I will read the notes first."
        tool_calls:
          - name: read_file
            arguments: {path: notes.md}      # a mapping, or JSON text used verbatim
        usage: {input_tokens: 120, output_tokens: 14}
      - "The notes say: ship on Friday."      # a bare string is a reply with that text
      - content: "Done."
        delay: 0.5                            # seconds to wait before replying
    failures:                                 # "fail on call N"
      1: {transient: true, status: 503, retry_after: 0.01, message: "overloaded"}
      3: {transient: false, reason: auth, message: "bad key", times: always}
    state: script.state.json                  # optional, see "Failures" below
    summary: "The notes were read."           # the answer to context-compaction requests
    decisions:                                # answers to recovery decisions (--decide)
      - '{"choice": "retry", "reason": "the command is safe to run again"}'

Which reply: the reply to a request is ``replies[k]`` where ``k`` is the number of assistant
messages already in the request (flow's own note messages are not counted). That depends on
the request alone, so a run stopped and resumed in a new process gets the same replies as one
that never stopped. Tool calls get the ids ``call_<k>_<i>`` unless the script gives an ``id``.
Running out of replies is a permanent ``ProviderError``. A compaction summary in the request
counts as the replies it stands for. A context-compaction request (``Request.purpose`` is
``Purpose.COMPACTION``) is answered with ``summary`` (by default a sentence naming how many
messages it summarised) and takes no reply from ``replies``.

Failures: ``failures`` is keyed by the same ``k`` (0 is the first model call of the
conversation). The call that would get ``replies[k]`` raises a ``ProviderError`` instead, the
first ``times`` times (default 1; ``always`` never stops) and then gets its reply, so a
transient failure exercises retrying. The count is kept in the provider object, i.e. per
process: a new process fails once more. With ``state: FILE`` (relative to the script) the
count is kept in that file instead, written before the error is raised, so "fail once" holds
across a crash and a ``flow resume`` — what a permanent failure needs to be resumable.

Decisions: a request whose ``purpose`` is ``Purpose.RECOVERY`` (``flow resume --decide``) is not
part of the conversation and does not take a reply: it gets ``decisions[n]``, where ``n`` counts the
recovery requests this provider object answered before (a ``flow resume`` asks at most once,
so each resume gets ``decisions[0]``). Running out of decisions is a permanent ``ProviderError``.

For library users and tests, ``ScriptedProvider.from_replies(["Hi", {...}])`` builds one
without a file; its ``calls`` lists every request it was sent, in order. A provider built from
settings (as ``flow run`` does) keeps only ``call_count``, unless ``settings.extra["keep_calls"]``
is true: each request holds the whole conversation, so keeping all of them would grow with the
square of a long run's length.
"""

from __future__ import annotations

import difflib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..base import yamlio
from ..base.durable import replace_file
from ..base.errors import ProviderError, ProviderSetupError
from ..base.jsonvalues import BadJson, field_path, loads_json
from ..base.safeopen import read_regular
from ..chat import Message, ToolCall
from .provider import ProviderSettings, Purpose, Reply, ReplyUsage, Request

#: Scripts larger than this are refused unread.
MAX_SCRIPT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ScriptedFailure:
    """How the call for one reply index fails, and how many times."""

    message: str = "scripted failure"
    transient: bool = True
    status: int | None = None
    retry_after: float | None = None
    #: How many calls fail before the reply is given; None means every call fails.
    times: int | None = 1
    #: ``ProviderError.reason``; by default what a real provider gives for such a failure.
    reason: str | None = None
    #: A ready-made error to raise instead (library use).
    error: ProviderError | None = None

    def to_error(self, k: int) -> ProviderError:
        """The error to raise for the call that would get ``replies[k]``."""
        if self.error is not None:
            return self.error
        default = "provider_error"
        if self.transient:
            default = "rate_limited" if self.status == 429 else "provider_transient"
        return ProviderError(
            f"{self.message} (scripted failure on model call #{k + 1}).",
            transient=self.transient,
            retry_after=self.retry_after,
            status_code=self.status,
            reason=self.reason or default,
        )


@dataclass(frozen=True)
class ScriptedReply:
    """One reply of a script; tool call ids are filled in when it is given."""

    content: str = ""
    #: (id or None, name, arguments as JSON text)
    tool_calls: tuple[tuple[str | None, str, str], ...] = ()
    usage: ReplyUsage = field(default_factory=ReplyUsage)
    model: str | None = None
    finish_reason: str | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Script:
    """A parsed script: replies in order, failures by reply index, optional state file."""

    replies: tuple[ScriptedReply, ...]
    failures: Mapping[int, ScriptedFailure] = field(default_factory=dict)
    state: Path | None = None
    #: Where the script came from, for messages (a path, or a description).
    source: str = "the script"
    path: Path | None = None
    #: The answer to context-compaction requests (None: a sentence counting the messages).
    summary: str | None = None
    #: Answers to recovery-decision requests, in order.
    decisions: tuple[ScriptedReply, ...] = ()


# --- parsing -----------------------------------------------------------------------------

_TOP_KEYS = ("replies", "failures", "state", "description", "summary", "decisions")
_REPLY_KEYS = ("content", "tool_calls", "usage", "model", "finish_reason", "delay")
_CALL_KEYS = ("name", "arguments", "id")
_USAGE_KEYS = ("input_tokens", "output_tokens", "cached_tokens")
_FAILURE_KEYS = ("message", "transient", "status", "retry_after", "times", "reason")

Part = str | int


class _Checker:
    """Type checks on a loaded script that fail at path:line:col with the field path."""

    def __init__(self, source: str, path: Path | None, node: yaml.Node | None) -> None:
        self.source = source
        self.path = path
        self.node = node

    def fail(
        self, parts: Sequence[Part], problem: str, *, at_key: bool = False
    ) -> ProviderSetupError:
        """An error at the field ``parts`` (at its key rather than its value if ``at_key``)."""
        err = ProviderSetupError(
            f"invalid script: {problem}.",
            hint="Fix the script at that place; its format is documented in "
            "`python -m pydoc promptflow_resume.providers.scripted`.",
        )
        err.path = str(self.path) if self.path else self.source
        err.field = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
        mark = self._mark(parts, at_key)
        if mark is not None:
            err.line, err.column = mark.line + 1, mark.column + 1
        return err

    def _mark(self, parts: Sequence[Part], at_key: bool) -> yaml.Mark | None:
        node = self.node
        if node is None:
            return None
        for n, part in enumerate(parts):
            child: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                pair = next(((k, v) for k, v in node.value if str(k.value) == str(part)), None)
                if pair is not None:
                    child = pair[0] if at_key and n == len(parts) - 1 else pair[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                child = node.value[part] if part < len(node.value) else None
            if child is None:
                break
            node = child
        return node.start_mark

    def mapping(self, value: Any, parts: Sequence[Part], allowed: Sequence[str]) -> dict[Any, Any]:
        if not isinstance(value, dict):
            raise self.fail(parts, f"expected a mapping with keys {', '.join(allowed)}")
        for key in value:
            if str(key) not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                also = f" (did you mean {close[0]!r}?)" if close else ""
                raise self.fail(
                    [*parts, str(key)],
                    f"unknown key {key!r}{also}; expected one of {', '.join(allowed)}",
                    at_key=True,
                )
        return value

    def string(self, value: Any, parts: Sequence[Part]) -> str:
        if not isinstance(value, str):
            raise self.fail(parts, f"expected text, found {_show(value)}")
        return value

    def count(self, value: Any, parts: Sequence[Part]) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(parts, f"expected a whole number of 0 or more, found {_show(value)}")
        return value

    def seconds(self, value: Any, parts: Sequence[Part]) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self.fail(
                parts, f"expected seconds (a number of 0 or more), found {_show(value)}"
            )
        return float(value)


def _show(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


def parse_script(
    data: Any,
    *,
    source: str = "the script",
    path: Path | None = None,
    node: yaml.Node | None = None,
) -> Script:
    """Check a loaded script and turn it into a ``Script`` (errors name the field)."""
    ck = _Checker(source, path, node)
    top = ck.mapping(data, [], _TOP_KEYS)
    raw_replies = top.get("replies")
    if not isinstance(raw_replies, list):
        raise ck.fail(["replies"], "expected `replies:` with a list of replies")
    replies = tuple(_parse_reply(ck, r, i) for i, r in enumerate(raw_replies))
    raw_decisions = top.get("decisions") or []
    if not isinstance(raw_decisions, list):
        raise ck.fail(["decisions"], "expected a list of replies to recovery decisions")
    decisions = tuple(_parse_reply(ck, r, i, "decisions") for i, r in enumerate(raw_decisions))
    failures: dict[int, ScriptedFailure] = {}
    raw_failures = top.get("failures") or {}
    if not isinstance(raw_failures, dict):
        raise ck.fail(["failures"], "expected a mapping from reply index to failure")
    for key, spec in raw_failures.items():
        # JSON object keys are strings; YAML keys are ints. Both mean the reply index.
        k = int(key) if isinstance(key, str) and key.isdigit() else key
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ck.fail(
                ["failures", str(key)], "keys must be reply indexes 0, 1, 2, ...", at_key=True
            )
        failures[k] = _parse_failure(ck, spec, ["failures", str(key)])
    state: Path | None = None
    if top.get("state") is not None:
        state = Path(ck.string(top["state"], ["state"]))
        if path is not None and not state.is_absolute():
            state = path.parent / state
    summary = ck.string(top["summary"], ["summary"]) if top.get("summary") is not None else None
    return Script(
        replies=replies,
        failures=failures,
        state=state,
        source=source,
        path=path,
        summary=summary,
        decisions=decisions,
    )


def _parse_reply(ck: _Checker, raw: Any, i: int, where: str = "replies") -> ScriptedReply:
    at: list[Part] = [where, i]
    if isinstance(raw, str):
        return ScriptedReply(content=raw)
    d = ck.mapping(raw, at, _REPLY_KEYS)
    calls: list[tuple[str | None, str, str]] = []
    raw_calls = d.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ck.fail([*at, "tool_calls"], "expected a list of tool calls")
    for j, c in enumerate(raw_calls):
        cat: list[Part] = [*at, "tool_calls", j]
        cd = ck.mapping(c, cat, _CALL_KEYS)
        name = ck.string(cd.get("name"), [*cat, "name"])
        args = cd.get("arguments", {})
        if isinstance(args, dict):
            arguments = json.dumps(args, ensure_ascii=False, default=str)
        elif isinstance(args, str):
            arguments = args  # verbatim, so a script can also send malformed JSON on purpose
        else:
            raise ck.fail([*cat, "arguments"], "expected a mapping or JSON text")
        call_id = None if cd.get("id") is None else ck.string(cd["id"], [*cat, "id"])
        calls.append((call_id, name, arguments))
    usage = ReplyUsage()
    if d.get("usage") is not None:
        ud = ck.mapping(d["usage"], [*at, "usage"], _USAGE_KEYS)
        usage = ReplyUsage(**{k: ck.count(v, [*at, "usage", k]) for k, v in ud.items()})
    return ScriptedReply(
        content="" if d.get("content") is None else ck.string(d["content"], [*at, "content"]),
        tool_calls=tuple(calls),
        usage=usage,
        model=None if d.get("model") is None else ck.string(d["model"], [*at, "model"]),
        finish_reason=(
            None
            if d.get("finish_reason") is None
            else ck.string(d["finish_reason"], [*at, "finish_reason"])
        ),
        delay=ck.seconds(d.get("delay", 0), [*at, "delay"]),
    )


def _parse_failure(ck: _Checker, raw: Any, at: list[Part]) -> ScriptedFailure:
    d = ck.mapping(raw, at, _FAILURE_KEYS)
    transient = d.get("transient", True)
    if not isinstance(transient, bool):
        raise ck.fail([*at, "transient"], "expected true or false")
    status = d.get("status")
    if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
        raise ck.fail([*at, "status"], f"expected an HTTP status code, found {_show(status)}")
    times_raw = d.get("times", 1)
    times: int | None
    if times_raw == "always":
        times = None
    else:
        times = ck.count(times_raw, [*at, "times"])
        if times == 0:
            raise ck.fail([*at, "times"], "expected 1 or more, or `always`")
    return ScriptedFailure(
        message=ck.string(d.get("message", "scripted failure"), [*at, "message"]),
        transient=transient,
        status=status,
        retry_after=None
        if d.get("retry_after") is None
        else ck.seconds(d["retry_after"], [*at, "retry_after"]),
        times=times,
        reason=None if d.get("reason") is None else ck.string(d["reason"], [*at, "reason"]),
    )


def load_script(path: str | Path) -> Script:
    """Read a YAML or JSON script file (``.json`` is read as JSON, anything else as YAML)."""
    # Lexically, so "run/../x" names x even before run/ exists (paths relative to a
    # progress folder that is not created yet).
    p = Path(os.path.normpath(path))
    try:
        data = read_regular(p, MAX_SCRIPT_BYTES, what="script", follow=True)
        if data is None or len(data) > MAX_SCRIPT_BYTES:
            raise FileNotFoundError(p) if data is None else OSError("over the 16 MiB limit")
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ProviderSetupError(
            f"the script {p} does not exist.",
            hint="Pass the path of a YAML or JSON script with a `replies:` list.",
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        e = ProviderSetupError(f"cannot read the script: {err}.")
        e.path = str(p)
        raise e from None
    node: yaml.Node | None = None
    if p.suffix.lower() == ".json":
        try:
            data = loads_json(text)
        except json.JSONDecodeError as err:
            e = ProviderSetupError(
                f"invalid JSON: {err.msg}.", hint="Fix the JSON syntax at that position."
            )
            e.path, e.line, e.column = str(p), err.lineno, err.colno
            raise e from None
        except BadJson as err:
            e = ProviderSetupError(
                f"the script holds a value flow refuses: {err.problem}.",
                hint="Fix that value in the script.",
            )
            e.path, e.line, e.column = str(p), err.line, err.column
            e.field = field_path(err.parts) if err.parts is not None else None
            raise e from None
    else:
        try:
            node = yamlio.compose(text, path=p)
            data = yamlio.load(text, path=p)
        except yamlio.YamlError as err:
            e = ProviderSetupError(err.message, hint=err.hint)
            e.path, e.line, e.column = err.path, err.line, err.column
            raise e from None
    return parse_script(data, source=str(p), path=p, node=node)


def _script_from_settings(settings: ProviderSettings) -> Script:
    given = settings.extra.get("script", settings.recording)
    if isinstance(given, Mapping):
        return parse_script(dict(given), source="the script in the provider settings")
    if isinstance(given, str | os.PathLike):
        return load_script(Path(given))
    raise ProviderSetupError(
        "the scripted provider needs a script, and none was given.",
        hint="Name a YAML or JSON file with a `replies:` list as the provider's recording "
        "(or settings.extra['script']).",
    )


# --- the provider --------------------------------------------------------------------------


class ScriptedProvider:
    """Gives ``replies[k]`` for a request holding ``k`` assistant messages; see the module doc."""

    name = "scripted"

    def __init__(self, settings: ProviderSettings) -> None:
        self._setup(_script_from_settings(settings), bool(settings.extra.get("keep_calls")))

    @classmethod
    def from_script(cls, script: Script, *, keep_calls: bool = True) -> ScriptedProvider:
        """A provider for an already parsed script."""
        provider = cls.__new__(cls)
        provider._setup(script, keep_calls)
        return provider

    @classmethod
    def from_replies(
        cls,
        replies: Sequence[str | Reply | Mapping[str, Any]],
        *,
        failures: Mapping[int, Mapping[str, Any] | ProviderError] | None = None,
        state_path: str | Path | None = None,
        keep_calls: bool = True,
    ) -> ScriptedProvider:
        """A provider from replies given in code: text, ``Reply`` objects or script mappings.

        ``failures`` maps a reply index to a script failure mapping or to an error to raise.
        """
        ck = _Checker("the replies given to ScriptedProvider.from_replies", None, None)
        parsed: list[ScriptedReply] = []
        for i, r in enumerate(replies):
            if isinstance(r, Reply):
                parsed.append(
                    ScriptedReply(
                        content=r.content,
                        tool_calls=tuple((c.id or None, c.name, c.arguments) for c in r.tool_calls),
                        usage=r.usage,
                        model=r.model,
                        finish_reason=r.finish_reason,
                    )
                )
            else:
                parsed.append(_parse_reply(ck, dict(r) if isinstance(r, Mapping) else r, i))
        fails: dict[int, ScriptedFailure] = {}
        for k, spec in (failures or {}).items():
            if isinstance(spec, ProviderError):
                fails[k] = ScriptedFailure(error=spec)
            else:
                fails[k] = _parse_failure(ck, dict(spec), ["failures", str(k)])
        script = Script(
            replies=tuple(parsed),
            failures=fails,
            state=Path(state_path) if state_path is not None else None,
            source=ck.source,
        )
        return cls.from_script(script, keep_calls=keep_calls)

    def _setup(self, script: Script, keep_calls: bool) -> None:
        self.script = script
        #: Every request this provider was sent, in order (failed calls included), if kept.
        self.calls: list[Request] = []
        self.call_count = 0
        self._keep_calls = keep_calls
        self._fired: dict[int, int] = {}
        # Counting assistant messages is linear in the conversation; remember the count for
        # the previous request so a growing conversation costs only its new tail per call.
        self._seen: tuple[Message, ...] = ()
        self._seen_count = 0
        self._decided = 0

    def reply_index(self, request: Request) -> int:
        """``k``: the number of (non-note) assistant messages already in ``request``."""
        raw = tuple(request.messages)
        n = len(self._seen)
        if len(raw) >= n and raw[:n] == self._seen:
            count, tail = self._seen_count, raw[n:]
        else:
            count, tail = 0, raw
        count += sum((m.role == "assistant" and not m.note) + m.replaces_replies for m in tail)
        self._seen, self._seen_count = raw, count
        return count

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        """Give the scripted reply for ``request`` (or its scripted failure)."""
        self.call_count += 1
        if self._keep_calls:
            self.calls.append(request)
        if request.purpose is Purpose.COMPACTION:
            return self._summary(request)
        if request.purpose is Purpose.RECOVERY:
            return self._decision()
        k = self.reply_index(request)
        failure = self.script.failures.get(k)
        if failure is not None and self._take_failure(k, failure):
            raise failure.to_error(k)
        replies = self.script.replies
        if k >= len(replies):
            err = ProviderError(
                f"the script has {len(replies)} replies and the run asks for reply {k + 1} "
                f"(the conversation already holds {k} assistant messages).",
                transient=False,
                hint="Add replies to the script's `replies:` list, or let the workflow take "
                "fewer steps or turns.",
            )
            if self.script.path is not None:
                err.path = str(self.script.path)
            raise err
        scripted = replies[k]
        if scripted.delay:
            time.sleep(scripted.delay)
        calls = tuple(
            ToolCall(id=cid or f"call_{k}_{i}", name=name, arguments=args)
            for i, (cid, name, args) in enumerate(scripted.tool_calls)
        )
        if on_text is not None and scripted.content:
            on_text(scripted.content)
        return Reply(
            content=scripted.content,
            tool_calls=calls,
            usage=scripted.usage,
            model=scripted.model or request.model or "scripted",
            finish_reason=scripted.finish_reason or ("tool_calls" if calls else "stop"),
        )

    def _summary(self, request: Request) -> Reply:
        """The answer to a context-compaction request: the script's ``summary``."""
        text = self.script.summary
        if text is None:
            text = f"Summary of {len(request.messages)} earlier messages: the work went on."
        return Reply(
            content=text,
            usage=ReplyUsage(
                input_tokens=sum(len(m.content) for m in request.messages) // 4,
                output_tokens=max(1, len(text) // 4),
            ),
            model=request.model or "scripted",
            finish_reason="stop",
        )

    def _decision(self) -> Reply:
        """The next of the script's ``decisions:`` (a recovery request)."""
        n = self._decided
        decisions = self.script.decisions
        if n >= len(decisions):
            err = ProviderError(
                f"the script has {len(decisions)} decisions and flow asks for decision {n + 1}.",
                transient=False,
                hint="Add a reply to the script's `decisions:` list.",
            )
            if self.script.path is not None:
                err.path = str(self.script.path)
            raise err
        self._decided += 1
        scripted = decisions[n]
        return Reply(
            content=scripted.content,
            usage=scripted.usage,
            model=scripted.model or "scripted",
            finish_reason="stop",
        )

    def _take_failure(self, k: int, failure: ScriptedFailure) -> bool:
        """Whether this call fails; counts it (in the state file when there is one) first."""
        state = self.script.state
        fired = _read_state(state) if state is not None else self._fired
        done = fired.get(k, 0)
        if failure.times is not None and done >= failure.times:
            return False
        fired[k] = done + 1
        if state is not None:
            _write_state(state, fired)
        return True


def _read_state(path: Path) -> dict[int, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {int(k): int(v) for k, v in data["fired"].items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        e = ProviderSetupError(
            "the scripted provider's state file is damaged.",
            hint="Delete it to start counting scripted failures afresh.",
        )
        e.path = str(path)
        raise e from None


def _write_state(path: Path, fired: dict[int, int]) -> None:
    """Write the failure counts atomically, so a crash right after still sees them."""
    text = json.dumps({"fired": {str(k): v for k, v in sorted(fired.items())}}) + "\n"
    replace_file(path, text.encode("utf-8"))
