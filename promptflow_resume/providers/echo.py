"""The ``echo`` provider: a dry run that shows what would be sent, with no model at all.

It answers every request at once, without tool calls and with zero usage, with one line that
says what it received, so a workflow runs end to end (each step gets an output) and costs
nothing. ``format_request`` renders a request as plain text for a terminal; ``flow run
--provider echo`` prints it for each model call, so a person sees the exact messages, tools and
parameters a real model would get::

    provider = EchoProvider(ProviderSettings(name="echo"))
    print(format_request(request))
    reply = provider.complete(request)  # '[echo] received the prompt "Summarize ..." (...)'
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..chat import Message
from .provider import ProviderSettings, Reply, ReplyUsage, Request

#: How much of a message's first line the reply quotes.
_QUOTE_CHARS = 60
_RULE_WIDTH = 72


class EchoProvider:
    """Replies at once with a description of the request; deterministic, free, offline."""

    name = "echo"

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        """Describe ``request`` in one line; no tool calls, zero usage."""
        text = describe_request(request)
        if on_text is not None:
            on_text(text)
        return Reply(content=text, usage=ReplyUsage(), model="echo", finish_reason="stop")


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if len(line) <= _QUOTE_CHARS:
        return line
    cut = line[: _QUOTE_CHARS - 1]
    space = cut.rfind(" ")
    # End at a word boundary unless that would drop much of the quote.
    if space > _QUOTE_CHARS * 2 // 3:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def describe_request(request: Request) -> str:
    """The echo reply: what the last message was, and how many messages and tools were sent."""
    last: Message | None = next((m for m in reversed(request.messages) if not m.note), None)
    counts = (
        f"({_plural(len(request.messages), 'message')}, "
        f"{_plural(len(request.tools), 'tool')} offered)"
    )
    if last is None:
        return f"[echo] received no messages {counts}"
    quoted = json.dumps(_first_line(last.content), ensure_ascii=False)
    if last.role == "user":
        what = f"the prompt {quoted}"
    elif last.role == "tool":
        what = f"the result of {last.name or 'a tool'} {quoted}"
    else:
        what = f"a {last.role} message {quoted}"
    return f"[echo] received {what} {counts}"


def _rule(title: str) -> str:
    head = f"── {title} "
    return head + "─" * max(3, _RULE_WIDTH - len(head))


def format_request(request: Request) -> str:
    """Render a request as plain text (no markup) for a terminal: model, params, tools, then
    every message in order with its role, tool calls and tool results."""
    lines: list[str] = []
    params = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in request.params.items())
    lines.append(f"model: {request.model or '(provider default)'}")
    if params:
        lines.append(f"params: {params}")
    if request.tools:
        lines.append(f"tools offered ({len(request.tools)}):")
        for tool in request.tools:
            summary = _first_line(tool.description) or "(no description)"
            lines.append(f"  - {tool.name}: {summary}")
    else:
        lines.append("tools offered: none")
    for number, message in enumerate(request.messages, start=1):
        title = f"{number}. {message.role}"
        if message.role == "tool":
            title += f" result of {message.name or '?'} [{message.tool_call_id or '?'}]"
            if message.is_error:
                title += " (error)"
        if message.note:
            title += " (note from flow)"
        lines.append(_rule(title))
        lines.append(message.content if message.content else "(empty)")
        for call in message.tool_calls:
            lines.append(f"→ calls {call.name}({call.arguments}) [{call.id}]")
    return "\n".join(lines) + "\n"
