"""Benchmark of the real-model providers' own cost, next to the SDKs they wrap.

Measures, on this machine:

- start-up: importing the provider modules (which must not import the SDKs) against importing
  the ``openai`` and ``anthropic`` SDKs themselves (fresh interpreters, median of several);
- building a provider (SDK import already done, client construction);
- one model call against the local test server, through the provider and through the SDK's
  ``create(messages=...)``, for a short history and a long one (10 and 1,000 messages). The
  provider passes its JSON body as ``extra_body``, skipping the SDK's per-message type walk;
  the ratio shows what that saves;
- pricing: one ``cost_usd`` and one ``estimate_request_cost`` on a 1,000-message request.

Prints one table with the ratio of each number to its goal::

    python bench/providers_bench.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promptflow_resume.chat import Message, MessageRole
from promptflow_resume.providers.anthropic import AnthropicProvider
from promptflow_resume.providers.openai import OpenAIProvider, to_openai_messages
from promptflow_resume.providers.pricing import cost_usd, estimate_request_cost
from promptflow_resume.providers.provider import ProviderSettings, ReplyUsage, Request
from tests.support.providers_server import (
    Canned,
    ModelServer,
    anthropic_message,
    openai_completion,
)

IMPORT_REPEATS = 5
CALL_REPEATS = 60


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``fn`` in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def paired_ms(a: Callable[[], Any], b: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Medians of ``a`` and ``b`` timed alternately, so drift affects both alike."""
    times_a: list[float] = []
    times_b: list[float] = []
    for _ in range(repeats):
        for fn, times in ((a, times_a), (b, times_b)):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times_a), statistics.median(times_b)


def import_ms(*modules: str) -> float:
    """Median import time of ``modules`` in fresh interpreters, from ``python -X importtime``.

    The interpreter's own start-up is not counted, so the number does not drift with the load
    of the machine as much as timing whole processes would.
    """
    code = "import " + ", ".join(modules)
    roots = {m.split(".")[0] for m in modules}
    samples = []
    for _ in range(IMPORT_REPEATS):
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            check=True,
            capture_output=True,
            text=True,
        )
        total_us = 0
        for line in result.stderr.splitlines():
            if not line.startswith("import time:") or "|" not in line:
                continue
            _, cumulative, name = line.split("|")
            # Top-level entries of the packages asked for (a parent package is imported as
            # its own top-level entry); interpreter start-up (site, encodings) is left out.
            top_level = name.startswith(" ") and not name.startswith("  ")
            if top_level and name.strip().split(".")[0] in roots:
                total_us += int(cumulative)
        samples.append(total_us / 1000)
    return statistics.median(samples)


def history(n: int) -> Request:
    messages = [Message("system", "You are a careful assistant.")]
    for i in range(n - 1):
        role: MessageRole = "user" if i % 2 == 0 else "assistant"
        messages.append(Message(role, f"message {i}: " + "lorem ipsum dolor sit amet " * 8))
    return Request(messages=tuple(messages), model="gpt-4o")


def main() -> None:
    os.environ.pop("OPENAI_API_KEY", None)
    os.environ["ANTHROPIC_API_KEY"] = "bench-key"
    rows: list[tuple[str, float, float]] = []
    speedups: list[tuple[int, float]] = []

    rows.append(
        (
            "import provider modules (no SDK)",
            import_ms(
                "promptflow_resume.providers.openai", "promptflow_resume.providers.anthropic"
            ),
            50.0,
        )
    )
    rows.append(("import openai SDK (for comparison)", import_ms("openai"), 0.0))
    rows.append(("import anthropic SDK (for comparison)", import_ms("anthropic"), 0.0))

    with ModelServer() as server:
        settings = ProviderSettings(name="openai", model="gpt-4o", base_url=server.url + "/v1")
        rows.append(("build OpenAIProvider", median_ms(lambda: OpenAIProvider(settings), 10), 50.0))
        provider = OpenAIProvider(settings)
        sdk_client = provider._client
        for n in (10, 1000):
            request = history(n)

            def via_provider(req: Request = request) -> None:
                server.push(Canned(body=openai_completion("ok")))
                provider.complete(req)

            def via_sdk(req: Request = request) -> None:
                server.push(Canned(body=openai_completion("ok")))
                sdk_client.chat.completions.create(
                    model="gpt-4o", messages=to_openai_messages(req.messages)
                )

            ours, bare = paired_ms(via_provider, via_sdk, CALL_REPEATS)
            goal = 10.0 if n <= 10 else 50.0
            rows.append((f"openai call, {n} messages, provider", ours, goal))
            rows.append((f"openai call, {n} messages, SDK create(messages=...)", bare, 0.0))
            speedups.append((n, bare / ours))

        anth = AnthropicProvider(
            ProviderSettings(name="anthropic", model="claude-sonnet-4-6", base_url=server.url)
        )
        request = history(1000)

        def anthropic_call() -> None:
            server.push(Canned(body=anthropic_message("ok")))
            anth.complete(request)

        rows.append(
            (
                "anthropic call, 1000 messages, provider",
                median_ms(anthropic_call, CALL_REPEATS),
                50.0,
            )
        )

    usage = ReplyUsage(input_tokens=12_000, output_tokens=800, cached_tokens=4_000)
    rows.append(
        ("cost_usd, one reply", median_ms(lambda: cost_usd("gpt-4o-2024-08-06", usage), 200), 0.1)
    )
    big = history(1000)
    rows.append(
        (
            "estimate_request_cost, 1000 messages",
            median_ms(lambda: estimate_request_cost("gpt-4o", big), 50),
            5.0,
        )
    )

    print(f"{'measure':<52} {'ms':>10} {'goal ms':>9} {'ratio':>7}")
    for name, value, goal in rows:
        ratio = f"{value / goal:.2f}" if goal else "-"
        goal_text = f"{goal:g}" if goal else "-"
        print(f"{name:<52} {value:>10.3f} {goal_text:>9} {ratio:>7}")
    for n, factor in speedups:
        print(
            f"openai, {n} messages: the provider's call is {factor:.1f}x as fast as the SDK's own"
        )


if __name__ == "__main__":
    main()
