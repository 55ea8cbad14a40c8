"""Model providers, registered by name.

The registry maps a name to ``module:Class`` so that a provider's SDK is imported only when
that provider is used (``flow --help`` never imports ``openai``). The workflow schema's
``provider`` enum is checked against ``REGISTRY`` by a test, so they cannot drift::

    provider = create_provider(ProviderSettings(name="echo"))
    reply = provider.complete(Request(messages=(Message("user", "hi"),)))
"""

from __future__ import annotations

import importlib
from typing import cast

from ..base.errors import ProviderSetupError
from .base import Provider, ProviderSettings

REGISTRY: dict[str, str] = {
    "echo": "promptflow_resume.providers.echo:EchoProvider",
    "replay": "promptflow_resume.providers.replay:ReplayProvider",
    "scripted": "promptflow_resume.providers.scripted:ScriptedProvider",
    "openai": "promptflow_resume.providers.openai:OpenAIProvider",
    "anthropic": "promptflow_resume.providers.anthropic:AnthropicProvider",
}


def create_provider(settings: ProviderSettings) -> Provider:
    """Build the provider named in ``settings``; unknown names get a clear error."""
    target = REGISTRY.get(settings.name)
    if target is None:
        known = ", ".join(sorted(REGISTRY))
        raise ProviderSetupError(
            f"unknown provider {settings.name!r}.",
            hint=f"Use one of: {known} (set `provider:` in the workflow or pass --provider).",
        )
    module_name, _, class_name = target.partition(":")
    module = importlib.import_module(module_name)
    return cast(Provider, getattr(module, class_name)(settings))
