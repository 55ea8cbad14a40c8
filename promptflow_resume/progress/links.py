"""Links between progress files: a workflow step's ``child`` and a child's ``parent``.

Whoever wrote a file chooses where its links lead, including back to the file itself or to a
run above it. Commands that follow links (``flow status``, ``flow share``) keep the files they
came through and refuse a link that returns to one (docs/spec.md 10.5)::

    raise child_cycle_error(path, "review", "progress.md", [path])
"""

from __future__ import annotations

from pathlib import Path

from ..base.errors import ProgressFormatError
from ..base.jsonvalues import excerpt, field_path
from ..base.safeopen import linked_file
from .schema import field_position


def child_cycle_error(
    path: Path, step_id: str, child: str, ancestors: list[Path], call_id: str | None = None
) -> ProgressFormatError:
    """The error for a ``steps.<id>.child`` (or, with ``call_id``, a subagent call's
    ``steps.<id>.agents.<call-id>.child``) that leads back to this run or one above it: a
    file from someone else can say so, and following it would never end (docs/spec.md 10.5)."""
    parts = (
        ["steps", step_id, "child"]
        if call_id is None
        else [
            "steps",
            step_id,
            "agents",
            call_id,
            "child",
        ]
    )
    line, column = field_position(path, parts)
    what = "this run itself" if len(ancestors) == 1 else "a run that contains this one"
    chain = " → ".join(str(a) for a in [*ancestors, path.parent / child])
    return ProgressFormatError(
        f"the child run `{excerpt(child)}` is {what} ({chain}); a child run cannot contain "
        "its parent.",
        path=path,
        line=line,
        column=column,
        field=field_path(parts),
        hint="Point the step at its own child file, or remove the `child:` line.",
    )


def child_file(parent_path: Path, step_id: str, link: str) -> Path:
    """The child run file ``steps.<step_id>.child`` of the run in ``parent_path`` names:
    inside the parent's folder, reached through no link, and a regular file if it exists
    (``SpecialFileError`` otherwise; docs/spec.md 10.4)."""
    return linked_file(
        parent_path.parent,
        link,
        what="child run file",
        source=parent_path,
        field=f"$.steps.{step_id}.child",
    )
