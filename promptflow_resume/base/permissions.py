"""The workflow's allow-lists as a record: which model-chosen commands and fetches it allowed.

The record lives in the ground layer because two parts that know nothing of each other read it:
the progress format keeps it in a run's ``config.permissions``, and the tools compare it with
the workflow's lists now (``tools/allowlists.py``, docs/spec.md 10.7).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class AllowLists:
    """The workflow's ``allow-commands:`` and ``allow-fetch:`` when the run last went on: what
    model-chosen commands and fetches it allowed, so a change is noticed on resume (spec 10.7).
    Empty in files written before it was recorded."""

    commands: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    #: ``--allow-commands`` and ``--allow-fetch`` of the last attempt: the person's own, for
    #: that process only. Recorded so that views (``flow show --summary``) say what the run
    #: was allowed; never read to allow anything (spec 10.7).
    given_commands: list[str] = field(default_factory=list)
    given_hosts: list[str] = field(default_factory=list)

    def with_given(self, commands: Sequence[str], hosts: Sequence[str]) -> AllowLists:
        """These lists with the flags an attempt was given."""
        return AllowLists(list(self.commands), list(self.hosts), list(commands), list(hosts))
