"""What a model provider is: messages and tool specs in, one assistant reply out.

A provider is any object with ``name`` and ``complete(request, on_text=None) -> Reply``.
Failures are raised as ``ProviderError`` with ``transient`` set for errors worth retrying
(rate limits, 5xx, timeouts, dropped connections) and ``retry_after`` when the server says.
Retrying is not the provider's job: ``providers.retry`` does it for every provider alike.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..base.errors import ProviderSetupError
from ..chat import Message, ToolCall, ToolSpec


class Purpose(enum.Enum):
    """What a model call is for. Providers send the same either way; the scripted provider
    answers each from its own part of the script."""

    #: The workflow's conversation.
    STEP = "step"
    #: Summarise older turns (docs/spec.md 4.9); scripted: its ``summary:``.
    COMPACTION = "compaction"
    #: A recovery decision (``flow resume --decide``); scripted: its ``decisions:``.
    RECOVERY = "recovery"


@dataclass(frozen=True)
class Request:
    """Everything a provider needs for one model call."""

    #: A tuple, or the engine's ``conversation.Messages`` (shares the earlier turns' messages).
    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...] = ()
    model: str | None = None
    #: temperature, max_tokens, top_p, ... as the workflow gives them.
    params: dict[str, Any] = field(default_factory=dict)
    #: What the call is for (``Purpose``).
    purpose: Purpose = Purpose.STEP


@dataclass(frozen=True)
class ReplyUsage:
    """Token counts the provider reported for one reply."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


@dataclass(frozen=True)
class Timing:
    """How a streamed reply arrived (seconds, from the request's send): the provider's
    ``generation.Generation`` measures it."""

    #: From sending the request to the first piece of reply (time to first token).
    first_token: float | None
    #: From the first piece to the end of the reply.
    generating: float
    #: Pieces (deltas) received.
    pieces: int

    def rate(self, output_tokens: int) -> float | None:
        """Output tokens per second while generating (None when it cannot be told)."""
        tokens = output_tokens or self.pieces
        if self.first_token is None or tokens < 2 or self.generating <= 0:
            return None
        # The first token arrives at the start of the generating time: the rest took it.
        return (tokens - 1) / self.generating


@dataclass(frozen=True)
class Reply:
    """One assistant message: text, tool calls, usage."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: ReplyUsage = field(default_factory=ReplyUsage)
    model: str | None = None
    finish_reason: str | None = None
    #: When the reply streamed: time to first token and generating time (None otherwise).
    timing: Timing | None = None


#: Seconds without a token (a byte) that end a model request, unless ``--idle-timeout`` says.
DEFAULT_IDLE_TIMEOUT = 120.0


@dataclass(frozen=True)
class ProviderSettings:
    """How to build a provider: from the workflow, the command line and the environment."""

    name: str
    model: str | None = None
    base_url: str | None = None
    #: Stream the replies (the providers that can): the idle timeout then means "no token for
    #: that long". The checkpoint holds whole replies only.
    stream: bool = True
    #: ``replay``: the recording to replay. ``--record``: where to write one.
    recording: str | None = None
    record_to: str | None = None
    #: The idle timeout in seconds: no token (no byte) for this long ends the request. A
    #: request that is not streamed must be answered whole within it.
    timeout: float = DEFAULT_IDLE_TIMEOUT
    #: A limit on the whole request in seconds (None: none); past it the request stops and
    #: is not sent again (``ProviderTimeoutError``).
    request_timeout: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Provider(Protocol):
    """The provider interface: what every provider ``providers.REGISTRY`` makes implements."""

    name: str

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        """Send one request and return the whole assistant reply."""
        ...


class ProviderFactory(Protocol):
    """What an entry of ``providers.REGISTRY`` names: makes a provider from its settings (a
    provider class is one). A missing SDK, key or model raises ``ProviderSetupError``."""

    def __call__(self, settings: ProviderSettings, /) -> Provider:
        """The provider for ``settings``."""
        ...


def require_model(provider: str, model: str | None) -> str:
    """``model``, or the setup error a provider that needs a model name raises without one."""
    if not model:
        raise ProviderSetupError(
            f"no model named for the {provider} provider.",
            hint="Set `model:` in the workflow's front matter or pass --model.",
        )
    return model
