"""``flow list``: the runs in some folders, each run of a sub-workflow under its parent.

A child run (``…/<stem>.steps/<step-id>/progress.md``) is not listed as a run of its own: it
is shown under the run whose step started it (docs/spec.md 4.10)::

    for listed in list_run_trees([Path(".flow/runs")], include_completed=True):
        print(listed.summary.run_id, [child.step for child in listed.children])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core import list_runs
from .summary import RunSummary

if TYPE_CHECKING:
    from ..progress.children import ChildNode


@dataclass(frozen=True)
class RunTree:
    """One listed run and its child runs (each with its own children)."""

    summary: RunSummary
    children: list[ChildNode]

    def to_dict(self) -> dict[str, Any]:
        """The run's ``--json`` form with a ``children`` list."""
        return {**self.summary.to_dict(), "children": [c.to_dict() for c in self.children]}


def list_run_trees(
    folders: Sequence[Path] = (),
    *,
    root: Path | None = None,
    include_completed: bool = False,
    status: str | None = None,
) -> list[RunTree]:
    """``list_runs`` (same order and filters) without child runs, each run with its children."""
    # Loaded here: reading a run's children loads progress files in full, which the detector
    # (imported by every `flow run`) never needs.
    from ..progress.children import children_of_file, is_child_path

    runs = list_runs(folders, root=root, include_completed=include_completed, status=status)
    return [
        RunTree(summary, children_of_file(Path(summary.path)))
        for summary in runs
        if not is_child_path(Path(summary.path))
    ]
