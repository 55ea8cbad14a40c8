"""What one call asks for beyond the shared ``RunOptions``: a start's or a resume's own fields.

A start names its workflow (a path, or one loaded already) and its inputs (given as text, as
``--input`` gives them, or resolved already); a resume names how to settle what it finds
(``Choices``, ``--set``, a moved workflow, a question on a terminal, ``--decide``)::

    start_run(StartRequest("triage.prompt.md", GivenInputs({"topic": "bees"})), options)
    resume_run(path, options, ResumeRequest(choices=Choices(keep_completed=True)))

``run_status`` takes a ``ResumeRequest`` too: it shows what that resume would do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..workflow import load_inputs_file, load_workflow, resolve_inputs
from ..workflow.records import InputDecl, Workflow
from .handoffs import Chain
from .resumeplan import Choices, ResumePlan

#: Asks for an input the command line did not give (a terminal prompt).
AskInput = Callable[[InputDecl], str]


def stringify(values: Mapping[str, Any]) -> dict[str, str]:
    """Input values as the text ``--input`` would give (JSON for non-strings)."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


def prepare_inputs(
    workflow: Workflow,
    given: Mapping[str, str],
    inputs_file: str | Path | None,
    ask: AskInput | None,
) -> dict[str, Any]:
    """Typed input values from ``--inputs FILE`` and ``--input k=v`` (the latter wins)."""
    merged = stringify(load_inputs_file(inputs_file)) if inputs_file is not None else {}
    merged.update(given)
    return resolve_inputs(workflow, merged, ask=ask)


@dataclass(frozen=True)
class GivenInputs:
    """Input values as text (``--input k=v`` and ``--inputs FILE``), typed against the
    workflow's declarations when the run starts; ``ask`` asks for a missing one."""

    values: Mapping[str, str] = field(default_factory=dict)
    file: str | Path | None = None
    ask: AskInput | None = None

    def resolve(self, workflow: Workflow) -> dict[str, Any]:
        """The typed values for ``workflow``."""
        return prepare_inputs(workflow, self.values, self.file, self.ask)


@dataclass(frozen=True)
class ResolvedInputs:
    """Input values typed already (by ``prepare_inputs``, or a batch row's), used as they are."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def resolve(self, workflow: Workflow) -> dict[str, Any]:
        """The values themselves."""
        return dict(self.values)


@dataclass(frozen=True)
class StartRequest:
    """A new run: its workflow, inputs, where its progress file goes, and how it works."""

    #: A ``*.prompt.md`` path, or the workflow loaded already (``--single-prompt``).
    workflow: str | Path | Workflow
    inputs: GivenInputs | ResolvedInputs = field(default_factory=GivenInputs)
    #: ``--progress``: the progress file (None: ``.flow/runs/<run-id>/progress.md``).
    progress: str | Path | None = None
    #: ``--recording``: the session a ``replay`` or ``scripted`` provider plays.
    recording: str | Path | None = None
    #: ``--worktree``: work in a new git worktree on branch ``flow/<run-id>`` made from HEAD
    #: (see ``promptflow_resume.worktree``); the progress file stays where it is.
    worktree: bool = False
    #: ``--handoff`` / ``--handoffs auto``: the chain ``workflow`` (composed by
    #: ``handoffs.chained``) follows, recorded in the new run's file.
    handoffs: Chain | None = None

    def load(self) -> Workflow:
        """The workflow, loaded from its path unless it was given loaded."""
        if isinstance(self.workflow, Workflow):
            return self.workflow
        return load_workflow(self.workflow)


@dataclass(frozen=True)
class ResumeRequest:
    """How a resume settles what it finds (see ``reconcile`` for the rules)."""

    #: The decisions given (``--rerun-changed``, ``--retry-step`` ...); they win over
    #: ``decide``.
    choices: Choices = field(default_factory=Choices)
    #: ``--set name=value``: override inputs for the rest of the run.
    set_values: Mapping[str, str] = field(default_factory=dict)
    #: ``--workflow``: the workflow moved; use this file instead of the one recorded.
    workflow_path: str | Path | None = None
    #: Asked on a terminal when the workflow changed in steps that already ran; None: stop.
    confirm_change: Callable[[ResumePlan], Choices | None] | None = None
    #: ``--decide`` (or ``recovery: model`` in the workflow): the run's model chooses how an
    #: ambiguous state is resolved (see ``recovery``).
    decide: bool = False
