"""The front matter of a progress file: a ``Run`` (without its transcript) as a plain dict.

Keys come in one fixed order so files diff cleanly; optional keys are left out when they are
empty or hold their default, and ``from_front_matter`` puts the default back, so the pair is an
exact inverse. Short records (usage, cursor, parameters, keywords, tool calls in flight)
are ``OneLine`` values that YAML writes on one line, which keeps the front matter short where
GitHub shows it as a table; a step's ``turns`` is written only where it differs from its
``usage.turns``::

    data = to_front_matter(run)            # ready for yamlio.dump or json.dumps
    again = from_front_matter(data, path="progress.md")   # validated; transcript empty
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, cast

from ..base.errors import ProgressSchemaError
from ..base.yamlio import OneLine, OneLineList
from .digest import transcript_digest
from .fmrecords import (
    approval_value,
    approvals_from,
    attempt_value,
    attempts_from,
    config_from,
    config_value,
    handoffs_from,
    handoffs_value,
    hooks_from,
    hooks_value,
    in_flight_from,
    in_flight_value,
    put,
    seal_from,
    snapshots_from,
    snapshots_value,
    step_value,
    steps_from,
    usage_from,
    usage_value,
    worktree_from,
)
from .model import (
    FORMAT_VERSION,
    Cursor,
    ErrorInfo,
    Kept,
    Redactions,
    Run,
    RunStatus,
    TraceRef,
    WorkflowRef,
)
from .unknown import merge, newer_only, split

#: Top-level keys in the order they are written.
KEY_ORDER: tuple[str, ...] = (
    "flow_progress",
    "flow_progress_minor",
    "min_flow",
    "run_id",
    "status",
    "reason",
    "until",
    "workflow",
    "created",
    "updated",
    "config",
    "inputs",
    "cursor",
    "steps",
    "in_flight",
    "hooks",
    "usage",
    "attempts",
    "last_error",
    "redactions",
    "keywords",
    "trace",
    "parent",
    "worktree",
    "snapshots",
    "seal",
    "approvals",
    "transcript",
)


def front_matter(run: Run, *, entries: int, digest: str, keep: bool = True) -> dict[str, Any]:
    """The front matter of ``run`` with the given transcript summary (used by the store): with
    ``keep``, the keys of ``run.kept`` put back where they were read (``unknown.merge``)."""
    kept = run.kept or Kept()
    out: dict[str, Any] = {
        "flow_progress": FORMAT_VERSION,
        "flow_progress_minor": kept.minor,
        "min_flow": kept.min_flow,
        "run_id": run.run_id,
    }
    out["status"] = run.status
    put(out, "reason", run.reason)
    put(out, "until", run.until)
    wf: dict[str, Any] = {"path": run.workflow.path}
    put(wf, "name", run.workflow.name)
    put(wf, "description", run.workflow.description)
    wf["hash"] = run.workflow.hash
    put(wf, "steps", dict(run.workflow.steps))
    if run.workflow.handoffs is not None:
        wf["handoffs"] = handoffs_value(run.workflow.handoffs)
    out["workflow"] = wf
    out["created"] = run.created
    out["updated"] = run.updated
    out["config"] = config_value(run.config)
    put(out, "inputs", dict(run.inputs))
    cursor: dict[str, Any] = OneLine()
    put(cursor, "step", run.cursor.step)
    cursor["index"] = run.cursor.index
    cursor["total"] = run.cursor.total
    out["cursor"] = cursor
    put(out, "steps", {sid: step_value(s) for sid, s in run.steps.items()})
    put(out, "in_flight", in_flight_value(run.in_flight))
    put(out, "hooks", hooks_value(run.hooks))
    out["usage"] = usage_value(run.usage)
    put(out, "attempts", [attempt_value(a) for a in run.attempts])
    if run.last_error is not None:
        err: dict[str, Any] = {
            "type": run.last_error.type,
            "message": run.last_error.message,
            "at": run.last_error.at,
        }
        put(err, "step", run.last_error.step)
        out["last_error"] = err
    if run.redactions != Redactions():
        out["redactions"] = OneLine(
            {"count": run.redactions.count, "where": OneLineList(run.redactions.where)}
        )
    put(out, "keywords", OneLineList(run.keywords))
    if run.trace is not None:
        trace: dict[str, Any] = {"id": run.trace.id}
        put(trace, "parent", run.trace.parent)
        out["trace"] = OneLine(trace)
    if run.parent is not None:
        out["parent"] = OneLine(run.parent)
    if run.worktree is not None:
        out["worktree"] = OneLine(
            {
                "path": run.worktree.path,
                "branch": run.worktree.branch,
                "base": run.worktree.base,
                "state": run.worktree.state,
            }
        )
    if run.snapshots is not None:
        out["snapshots"] = snapshots_value(run.snapshots)
    if run.seal is not None:
        seal: dict[str, Any] = {"by": run.seal.by, "run": run.seal.run}
        put(seal, "calls", dict(run.seal.calls))
        out["seal"] = seal
    put(out, "approvals", [approval_value(a) for a in run.approvals])
    out["transcript"] = {"entries": entries, "digest": digest}
    return merge(out, run.kept) if keep else out


def written_front_matter(
    run: Run, *, entries: int, digest: str, path: str | Path, context: str
) -> dict[str, Any]:
    """The front matter a writer writes for ``run``: what this flow writes, checked against the
    schema (``context`` starts the error of a failed check: a bug), then the keys ``run.kept``
    holds put back where they were read (docs/spec.md 2.5)."""
    from .schema import validate_front_matter

    own = front_matter(run, entries=entries, digest=digest, keep=False)
    validate_front_matter(own, path=path, context=context)
    return merge(own, run.kept)


def to_front_matter(run: Run) -> dict[str, Any]:
    """The front matter dict of ``run`` (key order fixed; empty optional keys omitted)."""
    return front_matter(run, entries=len(run.transcript), digest=transcript_digest(run.transcript))


def run_from_valid(data: dict[str, Any]) -> Run:
    """Build a ``Run`` from front matter that already passed the schema (no checks here)."""
    wf = data["workflow"]
    cursor = data["cursor"]
    last = data.get("last_error")
    red = data.get("redactions") or {}
    return Run(
        run_id=data["run_id"],
        workflow=WorkflowRef(
            path=wf["path"],
            hash=wf["hash"],
            steps=dict(wf.get("steps") or {}),
            name=wf.get("name"),
            description=wf.get("description"),
            handoffs=handoffs_from(wf.get("handoffs")),
        ),
        status=cast(RunStatus, data["status"]),
        created=data["created"],
        updated=data["updated"],
        config=config_from(data["config"]),
        cursor=Cursor(step=cursor.get("step"), index=cursor["index"], total=cursor["total"]),
        reason=data.get("reason"),
        until=data.get("until"),
        inputs=dict(data.get("inputs") or {}),
        steps=steps_from(data.get("steps")),
        in_flight=in_flight_from(data.get("in_flight")),
        hooks=hooks_from(data.get("hooks")),
        usage=usage_from(data.get("usage")),
        attempts=attempts_from(data.get("attempts")),
        last_error=(
            ErrorInfo(
                type=last["type"], message=last["message"], at=last["at"], step=last.get("step")
            )
            if last
            else None
        ),
        redactions=Redactions(count=red.get("count", 0), where=list(red.get("where") or [])),
        keywords=list(data.get("keywords") or []),
        parent=dict(data["parent"]) if data.get("parent") is not None else None,
        worktree=worktree_from(data.get("worktree")),
        trace=(
            TraceRef(id=data["trace"]["id"], parent=data["trace"].get("parent"))
            if isinstance(data.get("trace"), dict)
            else None
        ),
        snapshots=snapshots_from(data.get("snapshots")),
        seal=seal_from(data.get("seal")),
        approvals=approvals_from(data.get("approvals")),
    )


def normalize_yaml_values(value: Any) -> Any:
    """Turn YAML-only scalars into JSON ones: unquoted timestamps and dates become strings.

    A person who writes ``created: 2026-11-21T23:25:29Z`` without quotes means the string; the
    safe loader would construct a datetime, which JSON (and the schema) do not know.
    """
    if isinstance(value, dict):
        mapping = {k: normalize_yaml_values(v) for k, v in value.items()}
        # A kept value keeps its one-line style (a front matter rebuilt from a run's, replayed).
        return OneLine(mapping) if isinstance(value, OneLine) else mapping
    if isinstance(value, list):
        items = [normalize_yaml_values(v) for v in value]
        return OneLineList(items) if isinstance(value, OneLineList) else items
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, _dt.date):
        return value.isoformat()
    return value


def read_front_matter(
    data: dict[str, Any],
    *,
    path: str | Path = "progress.md",
    source: str | None = None,
    line_offset: int = 0,
    context: str = "",
) -> Run:
    """Build a ``Run`` (with an empty transcript) from a front matter of the current format:
    the keys this flow does not know are kept on ``Run.kept`` (docs/spec.md 2.5), the rest is
    checked against the schema. ``source`` (the YAML text, ``line_offset`` lines into the
    file) positions a schema error and gives kept values their YAML style."""
    from .schema import validate_front_matter

    data = normalize_yaml_values(data)
    try:
        validate_front_matter(data, path=path)
        known, kept = data, newer_only(data)
    except ProgressSchemaError:
        # Unknown keys, or a real error: checked again without the keys to keep.
        known, kept = split(data, source=source)
        validate_front_matter(
            known, path=path, source=source, line_offset=line_offset, context=context
        )
    run = run_from_valid(known)
    run.kept = kept
    return run


def from_front_matter(data: dict[str, Any], *, path: str | Path = "progress.md") -> Run:
    """Check ``data`` against the schema and build a ``Run`` (with an empty transcript)."""
    return read_front_matter(data, path=path)
