"""A run's recorded permissions and their changes (docs/spec.md 10.7).

The workflow's ``allow-commands:`` and ``allow-fetch:`` change no hash, so a pull request that
adds ``allow-commands: ["*"]`` would otherwise go unnoticed when a run resumes. A run records
both lists in its progress file (``config.permissions``) each time it starts or goes on; a
resume compares them with the workflow's lists now and reports what was added or removed. The
record only tells a change: consent itself always comes from the workflow and the flags::

    change = permissions_change(run.config.permissions, allow_lists(workflow))
    if change is not None and change.widened: ...   # ask, or --accept-permissions
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base.permissions import AllowLists
from ..workflow.records import Workflow
from .consent import patterns


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    return list(patterns(value if isinstance(value, list) else []))


def allow_lists(workflow: Workflow) -> AllowLists:
    """The workflow's ``allow-commands:`` and ``allow-fetch:`` lists, as consent reads them."""
    front = workflow.front_matter
    return AllowLists(
        commands=_strings(front.get("allow-commands")), hosts=_strings(front.get("allow-fetch"))
    )


@dataclass(frozen=True)
class PermissionsChange:
    """What the workflow allows now that it did not when the run last went on, and back."""

    added_commands: tuple[str, ...]
    removed_commands: tuple[str, ...]
    added_hosts: tuple[str, ...]
    removed_hosts: tuple[str, ...]

    @property
    def widened(self) -> bool:
        """True when anything was added: the model may now do something it could not."""
        return bool(self.added_commands or self.added_hosts)

    def line(self) -> str:
        """One line naming every addition and removal."""
        parts = [
            f"{key} {verb} {', '.join(f'`{v}`' for v in values)}"
            for key, verb, values in (
                ("allow-commands", "added", self.added_commands),
                ("allow-commands", "removed", self.removed_commands),
                ("allow-fetch", "added", self.added_hosts),
                ("allow-fetch", "removed", self.removed_hosts),
            )
            if values
        ]
        return "the workflow's permissions changed since the run last went on: " + "; ".join(parts)


def permissions_change(recorded: AllowLists, now: AllowLists) -> PermissionsChange | None:
    """The change from ``recorded`` to ``now``, or None when both allow the same."""
    change = PermissionsChange(
        added_commands=tuple(p for p in now.commands if p not in recorded.commands),
        removed_commands=tuple(p for p in recorded.commands if p not in now.commands),
        added_hosts=tuple(h for h in now.hosts if h not in recorded.hosts),
        removed_hosts=tuple(h for h in recorded.hosts if h not in now.hosts),
    )
    return change if change != PermissionsChange((), (), (), ()) else None
