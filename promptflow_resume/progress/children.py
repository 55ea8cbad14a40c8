"""The tree of runs: a run's child runs (sub-workflows), read back from their progress files.

A workflow step that runs another workflow links to the child's own progress file
(``steps.<id>.child``), stored under the parent's folder as ``<stem>.steps/<step-id>/``
(docs/spec.md 4.10). ``flow status`` and ``flow list`` show children under their parent;
reading them needs nothing of the engine::

    for node in children_of_file(Path(".flow/runs/<run-id>/progress.md")):
        print(node.step, node.status, node.total_usage().cost_usd)

A child whose link leads back to a run above it is listed as invalid, never followed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import FlowError
from ..base.safeopen import linked_file
from .links import child_cycle_error
from .loading import load_progress
from .model import Run, Usage
from .state import run_state

#: The largest depth of workflows running workflows (a guard; cycles are refused at load).
MAX_DEPTH = 16


def child_folder(parent_path: Path) -> str:
    """The folder, relative to the parent's, that holds its children: ``<stem>.steps``."""
    name = parent_path.name
    stem = name[: -len(".md")] if name.endswith(".md") else name
    return f"{stem}.steps"


def is_child_path(path: Path) -> bool:
    """True for a progress file stored as a child: ``…/<stem>.steps/<step-id>/<file>``, or a
    subagent's ``…/<stem>.steps/<step-id>/agents/<call-id>/<file>``."""
    if path.parent.parent.name.endswith(".steps"):
        return True
    return path.parent.parent.name == "agents" and path.parents[3].name.endswith(".steps")


def folder_name(call_id: str) -> str:
    """A tool call id as one safe folder name: letters, digits, ``-`` and ``_`` kept, the
    rest (and an empty or over-long id) replaced by a short hash of the whole id."""
    import hashlib
    import re

    if re.fullmatch(r"[A-Za-z0-9_-]{1,80}", call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8")).hexdigest()[:16]
    kept = re.sub(r"[^A-Za-z0-9_-]+", "-", call_id)[:40].strip("-")
    return f"{kept}-{digest}" if kept else f"call-{digest}"


def usage_difference(a: Usage, b: Usage) -> Usage:
    """``a - b``, field by field."""
    return Usage(
        input_tokens=a.input_tokens - b.input_tokens,
        output_tokens=a.output_tokens - b.output_tokens,
        cached_tokens=a.cached_tokens - b.cached_tokens,
        cost_usd=round(a.cost_usd - b.cost_usd, 6),
        turns=a.turns - b.turns,
    )


@dataclass
class ChildNode:
    """One child run under its parent, for ``flow status`` and ``flow list``."""

    step: str
    path: Path
    run_id: str | None
    status: str
    reason: str | None
    steps_done: int
    steps_total: int
    usage: Usage
    children: list[ChildNode] = field(default_factory=list)
    #: Why the child's file could not be read (then the other fields are defaults).
    error: str | None = None
    #: A subagent call's child: the agent's name and the tool call id (None for a step's).
    agent: str | None = None
    call: str | None = None
    #: A subagent's usage that its parent has added to its own (None for a step's child,
    #: whose parent step's usage says it).
    rolled_up: Usage | None = None

    def total_usage(self) -> Usage:
        """The child's usage (its own children's usage is rolled up into it already, or is
        counted here when a grandchild is still running)."""
        total = Usage(**vars(self.usage))
        for child in self.children:
            recorded = (
                child.rolled_up if child.rolled_up is not None else self.usage_of_step(child.step)
            )
            total.add(_unrolled(child, recorded))
        return total

    #: The child's own step usages, to tell what of a grandchild is not rolled up yet.
    step_usage: dict[str, Usage] = field(default_factory=dict)

    def usage_of_step(self, step_id: str) -> Usage:
        """The usage recorded for one of this child's steps."""
        return self.step_usage.get(step_id, Usage())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``step``, ``path``, ``run_id``, ``status`` … ``children``."""
        return {
            "step": self.step,
            "path": str(self.path),
            "run_id": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "steps_done": self.steps_done,
            "steps_total": self.steps_total,
            "usage": self.total_usage().to_dict(),
            "error": self.error,
            **({"agent": self.agent, "call": self.call} if self.agent is not None else {}),
            "children": [c.to_dict() for c in self.children],
        }


def _unrolled(child: ChildNode, recorded: Usage) -> Usage:
    """What a child used beyond what its parent step records (a child still running)."""
    return usage_difference(child.total_usage(), recorded)


def child_runs(
    run: Run, path: Path, *, depth: int = 0, _above: tuple[Path, ...] = ()
) -> list[ChildNode]:
    """The child runs of ``run`` (stored at ``path``), each with its own children, in step order
    (a step's subagent calls after its workflow child, in call order).

    A child that leads back to a run above it is listed as invalid, not followed."""
    nodes: list[ChildNode] = []
    if depth >= MAX_DEPTH:
        return nodes
    above = (*_above, path)
    for step_id, state in run.steps.items():
        if state.child:
            nodes.append(_node(path, step_id, state.child, depth, above))
        for call_id, link in state.agents.items():
            node = _node(path, step_id, link.child, depth, above, call_id)
            node.agent, node.call, node.rolled_up = link.agent, call_id, link.usage
            nodes.append(node)
    return nodes


def _node(
    path: Path,
    step_id: str,
    link: str,
    depth: int,
    above: tuple[Path, ...],
    call_id: str | None = None,
) -> ChildNode:
    where = path.parent / link
    node = ChildNode(
        step=step_id,
        path=where,
        run_id=None,
        status="not started",
        reason=None,
        steps_done=0,
        steps_total=0,
        usage=Usage(),
    )
    if os.path.realpath(where) in {os.path.realpath(p) for p in above}:
        node.status = "invalid"
        node.error = str(child_cycle_error(path, step_id, link, list(above), call_id))
        return node
    if not os.path.lexists(where):
        return node
    field = f"$.steps.{step_id}.agents.{call_id}.child" if call_id else f"$.steps.{step_id}.child"
    try:
        target = linked_file(path.parent, link, what="child run file", source=path, field=field)
        child, _report = load_progress(target)
    except FlowError as error:
        node.status, node.error = "invalid", str(error)
        return node
    node.run_id = child.run_id
    # As every reader says it: a dead owner's "running" child is interrupted.
    effective = run_state(where, child.status, child.reason)
    node.status, node.reason = effective.status, effective.reason
    node.steps_done, node.steps_total = child.step_counts()
    node.usage = child.usage
    node.step_usage = {sid: s.usage for sid, s in child.steps.items()}
    node.children = child_runs(child, where, depth=depth + 1, _above=above)
    return node


def usage_with_children(run: Run, children: list[ChildNode]) -> Usage:
    """The run's usage plus what its children used that is not rolled up into it yet."""
    total = Usage(**vars(run.usage))
    for child in children:
        state = run.steps.get(child.step)
        recorded = child.rolled_up if child.rolled_up is not None else None
        if recorded is None:
            recorded = state.usage if state is not None else Usage()
        total.add(_unrolled(child, recorded))
    return total


def children_of_file(path: Path) -> list[ChildNode]:
    """The child runs of the run stored at ``path`` ([] when it has none or cannot be read).

    Only a run whose ``<stem>.steps`` folder exists is read in full, so listing thousands of
    runs without sub-workflows reads no more than before."""
    if not (path.parent / child_folder(path)).is_dir():
        return []
    try:
        run, _report = load_progress(path)
    except FlowError:
        return []
    return child_runs(run, path)
