"""Where model requests may go: the endpoint presets, their hosts, and which endpoint a key
may be sent to (``docs/spec.md`` 5.1 and 10.2).

One table serves both questions: the ``openai`` provider picks a preset by host from it, and
``check_recorded`` decides whether an endpoint that only a progress file names may receive a
key. A progress file can come from anyone, so its ``config.base_url`` is used only when

- the provider sends no key (``echo``, ``replay``, ``scripted``);
- it equals an endpoint the person running flow gave this time (``--base-url``, or
  ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``AZURE_OPENAI_ENDPOINT``);
- it is a preset name (``openai``, ``github``, ``ollama``, ``azure``: their URL comes from
  this table or the person's own environment); or
- it is a known host of the provider over ``https`` on the default port.

Anything else, this machine's own ``localhost`` included, is refused before any request::

    check_recorded("openai", "https://api.openai.com/v1", given=None, source=path)  # fine
    check_recorded("openai", "http://evil.test/v1", given=None, source=path)  # raises
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ..base.errors import EndpointNotConfirmedError, ProviderSetupError

OPENAI_URL = "https://api.openai.com/v1"
GITHUB_MODELS_URL = "https://models.github.ai/inference"
OLLAMA_URL = "http://localhost:11434/v1"
ANTHROPIC_URL = "https://api.anthropic.com"

#: The ``openai`` provider's presets, chosen by name (``--base-url github``).
PRESETS = ("openai", "github", "ollama", "azure")

#: Host → preset of the ``openai`` provider (exact host names).
OPENAI_HOSTS: dict[str, str] = {
    "api.openai.com": "openai",
    "models.github.ai": "github",
    # GitHub Models' older endpoint, still served.
    "models.inference.ai.azure.com": "github",
}
#: Host suffix → preset: every Azure OpenAI resource has its own sub-domain.
OPENAI_DOMAINS: dict[str, str] = {
    ".openai.azure.com": "azure",
    ".cognitiveservices.azure.com": "azure",
}
#: The ``anthropic`` provider's own host.
ANTHROPIC_HOSTS = ("api.anthropic.com",)

#: Providers that send no request over the network, and so no key.
OFFLINE_PROVIDERS = frozenset({"echo", "replay", "scripted"})
#: Variables in which the person running flow names an endpoint themselves.
BASE_URL_VARIABLES = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "AZURE_OPENAI_ENDPOINT")


def url_problem(url: str) -> str | None:
    """What makes ``url`` no endpoint to send requests to (None: nothing): a scheme other than
    http or https, no host, or a port that is empty, not a number, or outside 1-65535.

    ``urlsplit`` takes ``http://127.0.0.1:/v1`` (an empty port) and the SDKs then retry a
    connection that can never be made, so the URL is refused before any request."""
    try:
        parts = urlsplit(url.strip())
    except ValueError as error:
        return f"it is not a URL ({error})"
    if parts.scheme.lower() not in ("http", "https"):
        return "it does not start with http:// or https://"
    if not parts.hostname:
        return "it names no host"
    if any(c.isspace() for c in parts.netloc):
        return "its host contains a space"
    _, colon, port = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")
    if colon and not port:
        return "its port is empty (a ':' with no number after it)"
    if port and not (port.isdigit() and 1 <= int(port) <= 65535):
        return f"its port {port!r} is not a number from 1 to 65535"
    return None


def check_base_url(url: str, provider: str) -> None:
    """Refuse (``ProviderSetupError``, exit 10, before a run exists) a base URL that names no
    endpoint (``url_problem``), wherever it came from: ``--base-url``, the workflow, the
    environment or a progress file."""
    problem = url_problem(url)
    if problem is None:
        return
    raise ProviderSetupError(
        f"the {provider} base URL {url!r} cannot be used: {problem}.",
        hint="Give the server's whole address, e.g. --base-url http://127.0.0.1:8000/v1 "
        "(or fix OPENAI_BASE_URL / ANTHROPIC_BASE_URL).",
    )


def preset_for_host(host: str) -> str | None:
    """The ``openai`` preset a host belongs to (``azure`` for any Azure resource), or None."""
    host = host.lower().rstrip(".")
    if host in OPENAI_HOSTS:
        return OPENAI_HOSTS[host]
    return next((p for suffix, p in OPENAI_DOMAINS.items() if host.endswith(suffix)), None)


def _same_url(a: str, b: str) -> bool:
    return a.strip().rstrip("/") == b.strip().rstrip("/")


def known_host(provider: str, url: str) -> bool:
    """True when ``url`` is a known host of ``provider`` over https on the default port."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # a port that is not a number
        return False
    host = (parts.hostname or "").lower().rstrip(".")
    if parts.scheme.lower() != "https" or port not in (None, 443):
        return False
    if provider == "anthropic":
        return host in ANTHROPIC_HOSTS
    if provider == "openai":
        return preset_for_host(host) is not None
    return False


def trusted(
    provider: str, recorded: str, *, given: str | None, env: Mapping[str, str] | None = None
) -> bool:
    """Whether a key of ``provider`` may go to ``recorded``, an endpoint a file named."""
    env = os.environ if env is None else env
    if provider in OFFLINE_PROVIDERS:
        return True
    chosen = [given or ""] + [env.get(name, "") for name in BASE_URL_VARIABLES]
    if any(c.strip() and _same_url(recorded, c) for c in chosen):
        return True
    if provider == "openai" and recorded.strip().lower() in PRESETS:
        return True
    return known_host(provider, recorded)


def check_recorded(
    provider: str,
    recorded: str | None,
    *,
    given: str | None,
    source: Path,
    field: str = "$.config.base_url",
    env: Mapping[str, str] | None = None,
) -> None:
    """Refuse (``EndpointNotConfirmedError``, exit 9) when the endpoint requests would go to
    was chosen by ``source`` alone. Call it with the provider as every override left it."""
    if given is not None or not recorded:
        return  # the person named the endpoint this time, or none is recorded
    if trusted(provider, recorded, given=None, env=env):
        return
    raise EndpointNotConfirmedError(
        f"the {provider} requests of this run would go to {recorded}, an endpoint named only "
        "by this file; flow sends no request, and so no API key, to a server that a file "
        "chose unless it is a preset host over https or one you name yourself.",
        path=source,
        field=field,
        hint=f"If you trust that server, confirm it with --base-url {recorded} (or set "
        "OPENAI_BASE_URL / ANTHROPIC_BASE_URL to it); otherwise pass the endpoint you use "
        "with --base-url.",
    )
