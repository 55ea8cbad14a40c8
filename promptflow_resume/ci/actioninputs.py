"""The action's inputs (``INPUT_*``), read and checked once (docs/spec.md 11.3).

Every input is a string the workflow author wrote in ``with:``; a wrong one is an InputError
(exit 9) naming the input, and the value of a secret one (the seal key, the token) is never
shown."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import InputError
from ..run.runoptions import Limits, Permissions, RunOptions
from .event import DEFAULT_COMMENTERS, JobEvent

_TRUE = {"yes", "true", "1", "on"}
_FALSE = {"no", "false", "0", "off", ""}


def _flag(env: Mapping[str, str], name: str) -> bool:
    value = env.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InputError(
        f"the action's input {input_name(name)} must be yes or no; got {value!r}.",
        hint="Write yes or no (true/false also work).",
    )


def input_name(variable: str) -> str:
    """``INPUT_MAX_COST`` -> ``max-cost``: how the workflow author wrote it."""
    return variable.removeprefix("INPUT_").lower().replace("_", "-")


def _words(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A list input: items separated by newlines or commas (a glob keeps its spaces)."""
    parts = re.split(r"[\n,]", env.get(name, ""))
    return tuple(p.strip() for p in parts if p.strip())


def _lines(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in env.get(name, "").splitlines() if line.strip())


@dataclass(frozen=True)
class CiInputs:
    """The action's inputs, read from ``INPUT_*`` and checked once."""

    workspace: Path
    workflow: str | None
    task: str | None
    inputs: tuple[str, ...]
    provider: str | None
    model: str | None
    base_url: str | None
    progress: Path
    allow_commands: tuple[str, ...]
    approve: tuple[str, ...]
    max_cost: float | None
    worktree: bool
    share: bool
    #: ``MODEL=IN/OUT`` lines: prices of models flow's table lacks (``--price``).
    prices: tuple[str, ...] = ()
    #: The associations whose ``/flow`` comments are obeyed.
    commenters: tuple[str, ...] = DEFAULT_COMMENTERS
    #: The job's token (``github.token``): reads the pull request, fetches and pushes.
    token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], event: JobEvent) -> CiInputs:
        """Read and check the inputs (an InputError, exit 9, names the input to fix)."""
        where = env.get("GITHUB_WORKSPACE")
        if not where:
            raise InputError(
                "flow ci runs as a step of a GitHub Actions job: GITHUB_WORKSPACE is not set.",
                hint="Use the action (uses: OWNER/promptflow-resume@VERSION), or set "
                "GITHUB_WORKSPACE and the INPUT_* variables docs/spec.md 11.3 lists.",
            )
        workspace = Path(where)
        progress = env.get("INPUT_PROGRESS", "").strip() or _default_progress(env, event)
        if not progress.endswith(".md"):
            raise InputError(
                f"the action's input progress must name a .md file; got {progress!r}.",
                hint="For example: progress: flow-runs/pr-${{ github.event.number }}.md",
            )
        return cls(
            workspace=workspace,
            workflow=env.get("INPUT_WORKFLOW", "").strip() or None,
            task=env.get("INPUT_TASK", "").strip() or None,
            inputs=_lines(env, "INPUT_INPUTS"),
            provider=env.get("INPUT_PROVIDER", "").strip() or None,
            model=env.get("INPUT_MODEL", "").strip() or None,
            base_url=env.get("INPUT_BASE_URL", "").strip() or None,
            progress=workspace / progress,
            allow_commands=_words(env, "INPUT_ALLOW_COMMANDS"),
            approve=_words(env, "INPUT_APPROVE"),
            max_cost=_max_cost(env),
            worktree=_flag(env, "INPUT_WORKTREE"),
            share=_flag(env, "INPUT_SHARE"),
            prices=_lines(env, "INPUT_PRICES"),
            commenters=_words(env, "INPUT_COMMENTERS") or DEFAULT_COMMENTERS,
            token=env.get("INPUT_TOKEN", "").strip() or None,
        )

    def options(self) -> RunOptions:
        """The run options the inputs give (nobody to ask: a job has no terminal)."""
        from ..front import given_prices

        return RunOptions(
            provider=self.provider,
            model=self.model,
            base_url=self.base_url,
            limits=Limits(max_cost=self.max_cost, prices=given_prices(list(self.prices), None)),
            workspace=self.workspace,
            permissions=Permissions(commands=self.allow_commands),
            approve=self.approve,
            # A command the model chooses that no allow-list allows waits for /flow approve.
            consent_stop=True,
        )


def _max_cost(env: Mapping[str, str]) -> float | None:
    text = env.get("INPUT_MAX_COST", "").strip()
    try:
        cost = float(text) if text else None
    except ValueError:
        cost = None
    if text and (cost is None or not cost > 0):
        raise InputError(
            f"the action's input max-cost must be a positive number of US dollars; got {text!r}.",
            hint="For example: max-cost: 0.50",
        )
    return cost


def _default_progress(env: Mapping[str, str], event: JobEvent) -> str:
    if event.pull is not None:
        return f"flow-runs/pr-{event.pull.number}.md"
    return f"flow-runs/run-{env.get('GITHUB_RUN_ID', 'local')}.md"
