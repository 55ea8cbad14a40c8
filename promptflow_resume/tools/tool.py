"""What a tool is: a spec the model sees and a ``run`` that returns a result.

Tools come from the workflow file only (built-ins it names and commands it declares), never
from a progress file, so a shared progress file cannot make flow run anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..chat import ToolSpec
from ..workflow.records import Workflow
from ..workflow.skillfile import Skill
from .consent import Consent


@dataclass(frozen=True)
class ToolContext:
    """Where a tool runs: the workspace root it is confined to, the environment, who
    consents to model-chosen commands and fetches (None: nobody, so they are refused), and
    the skills the run may load (the read tools may also read inside their folders)."""

    workspace: Path
    env: dict[str, str] = field(default_factory=dict)
    consent: Consent | None = None
    skills: tuple[Skill, ...] = ()
    #: With tracing on, the W3C ``traceparent`` of the call's ``execute_tool`` span: an MCP
    #: call sends it in its request's ``_meta`` (docs/spec.md 13).
    traceparent: str | None = None
    #: The tools the model was offered for this call (None: not known), so a tool's advice
    #: names only tools the model has.
    offered: tuple[str, ...] | None = None

    def skill_folders(self) -> tuple[Path, ...]:
        """The folders of the skills the model may load: readable besides the workspace."""
        return tuple(s.folder for s in self.skills if s.model_invocable)


@dataclass(frozen=True)
class ToolResult:
    """A tool's outcome as the model will see it. ``data`` holds bytes for a sidecar file,
    ``media_type`` their MIME type (it gives the sidecar its extension), and ``cut`` says that
    ``content`` is a preview of ``data``: the engine then tells the model where the whole is."""

    content: str
    is_error: bool = False
    exit_code: int | None = None
    data: bytes | None = None
    media_type: str | None = None
    cut: bool = False


class Tool(Protocol):
    """A callable tool."""

    spec: ToolSpec
    #: True when running it twice has the same effect as once (safe to re-run on resume).
    idempotent: bool

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run with the model's arguments; errors the model should see are results, not raises."""
        ...


class ToolFactory(Protocol):
    """What an entry of ``tools.TOOLS`` names: makes the tool a run of ``workflow`` in
    ``workspace`` offers (a tool class is one). Most tools need neither; the test tools take
    the workflow's declared test command."""

    def __call__(self, workflow: Workflow, workspace: Path, /) -> Tool:
        """A fresh tool for one run."""
        ...


class Standalone:
    """Base of the tools made alike for every run: as a ``ToolFactory`` it is given the
    workflow and workspace and keeps neither (each call's ``ToolContext`` says where it runs)."""

    def __init__(self, workflow: Workflow | None = None, workspace: Path | None = None) -> None:
        """Nothing to keep from the run."""
