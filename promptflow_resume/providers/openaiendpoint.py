"""Where the ``openai`` provider sends requests, and with which key: a preset (``openai``,
``github``, ``ollama``, ``azure``) or a server's URL, the key from the environment variable
that preset (or ``api_key_env``) names; no network::

    endpoint = resolve_endpoint(ProviderSettings(name="openai", base_url="github"))
    endpoint.base_url, endpoint.key_env  # "https://models.github.ai/inference", "GITHUB_TOKEN"
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..base.errors import ProviderSetupError
from .endpoints import (
    GITHUB_MODELS_URL,
    OLLAMA_URL,
    OPENAI_URL,
    PRESETS,
    check_base_url,
    preset_for_host,
)
from .provider import ProviderSettings

#: The Azure OpenAI API version used when neither the workflow nor OPENAI_API_VERSION names one.
AZURE_API_VERSION = "2024-10-21"
#: Sent as the key to servers that need none: the SDK insists on a non-empty one.
NO_KEY = "no-key-required"


@dataclass(frozen=True)
class Endpoint:
    """Where requests go and how they are authenticated."""

    preset: str
    #: Human name of the service, used in error messages.
    label: str
    base_url: str
    api_key: str
    #: The environment variable the key came from (or should come from), for hints.
    key_env: str | None
    #: Azure only: the ``api-version`` query parameter.
    api_version: str | None = None

    @property
    def openai_hosted(self) -> bool:
        """OpenAI's own API or Azure's: both want ``max_completion_tokens``."""
        return self.preset in ("openai", "azure")


def _env_value(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _missing_key(var: str, label: str, how: str) -> ProviderSetupError:
    return ProviderSetupError(
        f"no API key for {label}: the environment variable {var} is not set.",
        hint=f"Set {var} to {how} and run again; flow reads keys only from the environment "
        "and never writes them to the progress file.",
    )


def _ollama_url(env: Mapping[str, str]) -> str:
    """Ollama's URL from ``OLLAMA_HOST`` (``host``, ``host:port`` or a URL), else the default."""
    host = _env_value(env, "OLLAMA_HOST")
    if not host:
        return OLLAMA_URL
    if "://" not in host:
        host = f"http://{host}"
    parts = urlsplit(host)
    hostname = parts.hostname or "localhost"
    # OLLAMA_HOST often names the address the server listens on, not one to connect to.
    if hostname in ("0.0.0.0", "::"):
        hostname = "localhost"
    if ":" in hostname:
        hostname = f"[{hostname}]"
    return f"{parts.scheme}://{hostname}:{parts.port or 11434}/v1"


def resolve_endpoint(settings: ProviderSettings, env: Mapping[str, str] | None = None) -> Endpoint:
    """Decide base URL, key and preset from the settings and the environment; no network.

    Raises ``ProviderSetupError`` for an unknown preset or a missing required key.
    """
    env = os.environ if env is None else env
    extra = settings.extra or {}
    preset = str(extra.get("preset") or "").strip().lower() or None
    base_url = (settings.base_url or "").strip() or None
    if base_url is not None and base_url.lower() in PRESETS:
        preset = preset or base_url.lower()
        base_url = None
    if preset is not None and preset not in PRESETS:
        raise ProviderSetupError(
            f"unknown openai preset {preset!r}.",
            hint=f"Use one of: {', '.join(PRESETS)}, or give the server's URL as the base URL.",
        )
    key_env_override = extra.get("api_key_env")

    if preset is None:
        base_url = base_url or _env_value(env, "OPENAI_BASE_URL") or OPENAI_URL
        preset = preset_for_host(urlsplit(base_url).hostname or "") or "custom"
    if base_url is not None:
        check_base_url(base_url, "openai")

    if isinstance(key_env_override, str) and key_env_override.strip():
        var = key_env_override.strip()
        key = _env_value(env, var)
        if key is None:
            raise _missing_key(
                var, "this endpoint", "the endpoint's key (`api_key_env` names this variable)"
            )
    else:
        var, key = "", None

    if preset == "github":
        var = var or "GITHUB_TOKEN"
        key = key or _env_value(env, var)
        if key is None:
            raise _missing_key(var, "GitHub Models", "a GitHub token with the `models` scope")
        return Endpoint("github", "GitHub Models", base_url or GITHUB_MODELS_URL, key, var)
    if preset == "ollama":
        url = base_url or _ollama_url(env)
        return Endpoint("ollama", f"Ollama at {url}", url, key or NO_KEY, var or None)
    if preset == "azure":
        var = var or "AZURE_OPENAI_API_KEY"
        key = key or _env_value(env, var)
        if key is None:
            raise _missing_key(var, "Azure OpenAI", "the key of your Azure OpenAI resource")
        endpoint = base_url or _env_value(env, "AZURE_OPENAI_ENDPOINT")
        if endpoint is None:
            raise ProviderSetupError(
                "no Azure OpenAI endpoint: the environment variable AZURE_OPENAI_ENDPOINT is "
                "not set and no base URL was given.",
                hint="Set AZURE_OPENAI_ENDPOINT to https://<resource>.openai.azure.com (or pass "
                "it as the base URL) and run again.",
            )
        version = (
            str(extra.get("api_version") or "").strip()
            or _env_value(env, "OPENAI_API_VERSION")
            or AZURE_API_VERSION
        )
        return Endpoint("azure", "Azure OpenAI", endpoint, key, var, api_version=version)
    if preset == "openai":
        var = var or "OPENAI_API_KEY"
        key = key or _env_value(env, var)
        if key is None:
            raise _missing_key(var, "OpenAI", "a key from platform.openai.com")
        return Endpoint("openai", "OpenAI", base_url or OPENAI_URL, key, var)
    # A self-hosted or third-party server: a key only if one is set.
    assert base_url is not None
    var = var or "OPENAI_API_KEY"
    key = key or _env_value(env, var)
    return Endpoint("custom", f"the server at {base_url}", base_url, key or NO_KEY, var)
