"""Model providers, registered by name.

``REGISTRY`` maps a name to the ``module:Class`` that implements it, so a provider's SDK is
imported only when that provider is used (``flow --help`` never imports ``openai``). flow's
own providers are registered below with the call another package would use for its own
(``REGISTRY.register("mine", "my_package.provider:MyProvider")``, a class that takes
``ProviderSettings`` and implements ``Provider``). The workflow schema's ``provider`` enum is
checked against ``REGISTRY`` by a test, so they cannot drift::

    provider = create_provider(ProviderSettings(name="echo"))
    reply = provider.complete(Request(messages=(Message("user", "hi"),)))
"""

from __future__ import annotations

from ..base.errors import ProviderSetupError
from ..base.registry import Registry
from .provider import Provider, ProviderFactory, ProviderSettings

#: Provider name → the class that implements it; in the order ``flow run --help`` lists them.
REGISTRY: Registry[ProviderFactory] = Registry("provider")
REGISTRY.register("openai", "promptflow_resume.providers.openai:OpenAIProvider")
REGISTRY.register("anthropic", "promptflow_resume.providers.anthropic:AnthropicProvider")
REGISTRY.register("replay", "promptflow_resume.providers.replay:ReplayProvider")
REGISTRY.register("echo", "promptflow_resume.providers.echo:EchoProvider")
REGISTRY.register("scripted", "promptflow_resume.providers.scripted:ScriptedProvider")

#: The providers that answer without a network (from a file, or at once): a request to one is
#: over before anyone could ask how it goes.
OFFLINE_PROVIDERS: frozenset[str] = frozenset({"replay", "echo", "scripted"})


def create_provider(settings: ProviderSettings) -> Provider:
    """Build the provider named in ``settings``; unknown names get a clear error."""
    if settings.name not in REGISTRY:
        known = ", ".join(sorted(REGISTRY))
        raise ProviderSetupError(
            f"unknown provider {settings.name!r}.",
            hint=f"Use one of: {known} (set `provider:` in the workflow or pass --provider).",
        )
    return REGISTRY.load(settings.name)(settings)
