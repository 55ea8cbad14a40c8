"""Model names as people write them → a provider and the API's model id, and which of a
``model:`` list a run uses.

Prompt files and agents written for VS Code name models as the editor's model picker shows
them (``GPT-5.4``, ``Claude Sonnet 4.6 (copilot)``); others write the API's id
(``gpt-4o-mini``, ``claude-opus-4.7``). A name is looked up, first match winning, in:

1. the person's ``models:`` (``config.yaml`` in flow's folder, ``base.userconfig``);
2. flow's table, ``data/models.json`` (display names with a price in ``pricing.json``);
3. the families of that file, by pattern on the name made an id (lower case, spaces as
   ``-``; ``claude-*`` writes ``.`` as ``-``): ``gpt-*``, ``o1``…``o9``, ``claude-*``,
   ``gemini-*`` … A family whose vendor flow has no provider for (Google, xAI) is
   recognised, so it is reported rather than sent to another provider.

A name found nowhere is *unknown*: sent as written to the run's provider, and reported by
``flow check`` and at the start of a run with the way to fix it::

    ref = resolve_model("Claude Sonnet 4 (copilot)")
    ref.provider, ref.model                 # "anthropic", "claude-sonnet-4-0"
    resolve_model("GPT-5.3-Codex").model    # "gpt-5.3-codex"
    resolve_model("Raptor mini").source     # "unknown"

``choose_models`` picks, for a run that names no provider, the first model of the list
whose provider the person has credentials for, and keeps that provider's models of the list
(in the author's order) as its fallbacks (docs/spec.md 5.6).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from ..base.errors import InvalidFileError
from ..base.packagedata import read_text
from ..base.userconfig import config_path, user_config

#: The providers flow has a client for (offline ones aside): a model of another vendor is
#: never sent to them on the strength of its name.
CLIENT_PROVIDERS = ("openai", "anthropic")
#: Providers that need no key: they send nothing over the network.
OFFLINE = frozenset({"echo", "replay", "scripted"})
#: The environment variables that give each provider what it needs to send a request.
CREDENTIALS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY", "OLLAMA_HOST"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
}
#: The variable named when a provider has none of its credentials.
KEY_VARIABLE = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

_SUFFIX = re.compile(r"(?:\s*\((?:copilot|preview)\))+\s*$", re.I)
#: Where a name was found: the person's ``models:``, a display name of the table, an id the
#: table holds, a family's pattern, or nowhere.
Source = Literal["config", "table", "id", "family", "unknown"]


@dataclass(frozen=True)
class ModelRef:
    """One name of ``model:`` as flow understands it."""

    #: As the file (or ``--model``) wrote it.
    written: str
    #: ``openai``/``anthropic``; a vendor flow has no provider for (``google``, ``xai``); or
    #: None when the name is unknown.
    provider: str | None
    #: The id requests carry (the name itself when unknown).
    model: str
    source: Source

    @property
    def runnable(self) -> bool:
        """True when a provider flow has can send requests for this model."""
        return self.provider in CLIENT_PROVIDERS or self.source == "config"

    def problem(self) -> str | None:
        """Why a run could not send this model to the right provider, or None."""
        if self.source == "unknown":
            return (
                f"`{self.written}` is not a model name flow knows (its table, or a family: "
                "gpt-*, o1-o9, claude-*, gemini-*), so it is sent as written to the run's "
                "provider"
            )
        if not self.runnable:
            vendor = _table()["vendors"].get(self.provider or "", self.provider)
            return (
                f"`{self.written}` is a model of {vendor}, which flow has no provider for, so "
                "no request can be sent for it"
            )
        return None


def fix_line(written: str) -> str:
    """How a person makes flow understand ``written``: ``--model`` or their ``models:``."""
    return (
        f"give the model to use with --model (e.g. --model gpt-5.4 or --model claude-sonnet-4-6), "
        f"or name it in your own models: in {config_path()}: "
        f'`"{written}": {{provider: anthropic, model: claude-sonnet-4-6}}`'
    )


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(read_text("data/models.json"))
    data["by_name"] = {
        name.lower(): (provider, model) for name, (provider, model) in data["models"].items()
    }
    data["ids"] = {model for _, model in data["models"].values()}
    return data


def _key(name: str) -> str:
    return _SUFFIX.sub("", name.strip()).strip().lower()


def user_models() -> dict[str, tuple[str | None, str]]:
    """The person's ``models:``: name (lower case) → (provider or None, model id)."""
    raw = user_config().get("models")
    if raw is None:
        return {}
    where = config_path()
    if not isinstance(raw, dict):
        raise InvalidFileError("`models` must map names to a model.", path=where, field="$.models")
    found: dict[str, tuple[str | None, str]] = {}
    for name, value in raw.items():
        field = f"$.models.{name}"
        if isinstance(value, str) and value.strip():
            found[_key(str(name))] = (None, value.strip())
            continue
        if isinstance(value, dict) and isinstance(value.get("model"), str):
            provider = value.get("provider")
            if provider is not None and not isinstance(provider, str):
                raise InvalidFileError("`provider` must be a name.", path=where, field=field)
            found[_key(str(name))] = (provider, str(value["model"]).strip())
            continue
        raise InvalidFileError(
            "each model is a model id, or {provider: NAME, model: ID}.", path=where, field=field
        )
    return found


def family(model: str) -> str | None:
    """The provider (or vendor) whose family ``model`` (an id, lower case) belongs to."""
    for entry in _table()["families"]:
        if fnmatch.fnmatchcase(model, entry["pattern"]):
            return str(entry["provider"])
    return None


def _family_id(key: str) -> tuple[str | None, str]:
    """The id a display name stands for by its family, and that family's provider."""
    candidate = re.sub(r"\s+", "-", key)
    for entry in _table()["families"]:
        written = candidate.replace(".", entry["dots"]) if entry.get("dots") else candidate
        if fnmatch.fnmatchcase(written, entry["pattern"]):
            return str(entry["provider"]), written
    return None, candidate


def resolve_model(name: str, user: Mapping[str, tuple[str | None, str]] | None = None) -> ModelRef:
    """What ``name`` stands for (see the module's docstring for the order)."""
    key = _key(name)
    mine = (user_models() if user is None else user).get(key)
    if mine is not None:
        provider, model = mine
        return ModelRef(name, provider or family(model.lower()), model, "config")
    found = _table()["by_name"].get(key)
    if found is not None:
        return ModelRef(name, found[0], found[1], "table")
    provider, model = _family_id(key)
    if provider is not None:
        # An id the table holds (`claude-opus-4.7` written for claude-opus-4-7) is the table's.
        known = model in _table()["ids"]
        return ModelRef(name, provider, model, "id" if known else "family")
    return ModelRef(name, None, name.strip(), "unknown")


def model_id(name: str) -> tuple[str | None, str]:
    """The provider flow would send ``name`` to (None when unknown or not one of flow's) and
    the model id."""
    ref = resolve_model(name)
    return (ref.provider if ref.runnable else None), ref.model


def has_credentials(provider: str, env: Mapping[str, str] | None = None) -> bool:
    """True when the environment gives ``provider`` what it needs to send a request (a key,
    or for ``openai`` an endpoint of one's own); an offline provider always has."""
    if provider in OFFLINE:
        return True
    env = os.environ if env is None else env
    return any(env.get(name, "").strip() for name in CREDENTIALS.get(provider, ()))


@dataclass(frozen=True)
class ModelChoice:
    """What a new run sends requests to: the provider, its models in order (the first is the
    model; the rest its fallbacks), and lines for the person about the rest of the list."""

    provider: str
    models: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def config(self) -> dict[str, Any]:
        """The run's ``provider``, ``model`` and ``models`` (its fallbacks: none for one
        model, as ``--model`` and a list of one are no list)."""
        return {
            "provider": self.provider,
            "model": self.models[0] if self.models else None,
            "models": list(self.models) if len(self.models) > 1 else [],
        }


def choose_models(
    refs: Sequence[ModelRef],
    *,
    provider: str | None = None,
    env: Mapping[str, str] | None = None,
    default: str = "openai",
) -> ModelChoice:
    """The provider and models a new run uses from ``refs`` (``model:`` in order).

    With ``provider`` (``--provider`` or the file's ``provider:``) the list keeps that
    provider's models and the unknown names; without, the first model whose provider has
    credentials wins and that provider's models follow in the author's order.
    """
    if provider is not None:
        # The person named the provider: a name flow does not know is theirs to know (a
        # local server's model), and only another provider's models are left out.
        kept = [r for r in refs if r.provider in (None, provider) or r.source == "config"]
        left = [r for r in refs if r not in kept and r.runnable]
        notes = [
            f"`{r.written}` is a model of the {r.provider} provider and this run's provider is "
            f"{provider}: it is not tried."
            for r in left
            if kept
        ]
        return ModelChoice(provider, tuple(r.model for r in (kept or refs)), tuple(notes))
    notes = [f"{r.problem()}; {fix_line(r.written)}." for r in refs if r.problem() is not None]
    usable = [r for r in refs if r.runnable]
    if not usable:
        return ModelChoice(default, tuple(r.model for r in refs), tuple(notes))
    chosen = next((r for r in usable if has_credentials(str(r.provider), env)), usable[0])
    name = str(chosen.provider)
    others = [r for r in usable if r.provider != name]
    if others and chosen is not usable[0]:
        skipped = ", ".join(f"`{r.written}`" for r in usable[: usable.index(chosen)])
        notes.append(
            f"{skipped} left out: no credentials for their provider; the run uses "
            f"`{chosen.written}` ({name})."
        )
    elif others and not has_credentials(name, env):
        keys = ", ".join(
            sorted({KEY_VARIABLE.get(str(r.provider), str(r.provider)) for r in usable})
        )
        notes.append(f"no provider of the model list has credentials (set one of {keys}).")
    return ModelChoice(name, tuple(r.model for r in usable if r.provider == name), tuple(notes))
