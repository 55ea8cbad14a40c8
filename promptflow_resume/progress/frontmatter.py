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
from .filesnapshots import FileSnapshot, Snapshots
from .hookledger import HookEvent, HookLedger, HookRun
from .model import (
    FORMAT_VERSION,
    AgentChild,
    AllowLists,
    Approval,
    Attempt,
    Cursor,
    ErrorInfo,
    HandoffChain,
    HandoffPart,
    InFlight,
    Kept,
    Redactions,
    RefusedModel,
    Run,
    RunConfig,
    RunStatus,
    Seal,
    StepState,
    StepStatus,
    TraceRef,
    Usage,
    WorkflowRef,
    WorktreeRef,
    WorktreeState,
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


def _usage(u: Usage) -> dict[str, Any]:
    return OneLine(
        {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cached_tokens": u.cached_tokens,
            "cost_usd": u.cost_usd,
            "turns": u.turns,
        }
    )


def _is_zero(u: Usage) -> bool:
    return u == Usage()


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` unless ``value`` is None or an empty dict or list (their defaults)."""
    if value is None or (isinstance(value, (dict, list)) and not value):
        return
    out[key] = value


def _step(state: StepState) -> dict[str, Any]:
    out: dict[str, Any] = {"status": state.status}
    if state.attempts:
        out["attempts"] = state.attempts
    _put(out, "output_entry", state.output_entry)
    _put(out, "started", state.started)
    _put(out, "finished", state.finished)
    if state.turns != state.usage.turns:
        out["turns"] = state.turns
    if not _is_zero(state.usage):
        out["usage"] = _usage(state.usage)
    _put(out, "child", state.child)
    if state.agents:
        out["agents"] = {call: _agent_child(a) for call, a in state.agents.items()}
    return out


def _agent_child(a: AgentChild) -> dict[str, Any]:
    out: dict[str, Any] = {"agent": a.agent, "child": a.child}
    if not _is_zero(a.usage):
        out["usage"] = _usage(a.usage)
    return out


def _attempt(a: Attempt) -> dict[str, Any]:
    out: dict[str, Any] = {"n": a.n, "started": a.started}
    _put(out, "first_entry", a.first_entry)
    _put(out, "ended", a.ended)
    _put(out, "status", a.status)
    _put(out, "reason", a.reason)
    if not _is_zero(a.usage):
        out["usage"] = _usage(a.usage)
    _put(out, "notes", list(a.notes))
    _put(out, "edits", list(a.edits))
    if a.mcp_tools:
        out["mcp_tools"] = OneLine(dict(a.mcp_tools))
    _put(out, "model", a.model)
    _put(
        out,
        "refused",
        [OneLine({"model": r.model, "message": r.message}) for r in a.refused],
    )
    if a.agents:
        out["agents"] = dict(a.agents)
    _put(out, "hooks", dict(a.hooks))
    _put(out, "until", a.until)
    _put(out, "flow", a.flow)
    return out


def _handoffs(chain: HandoffChain) -> dict[str, Any]:
    out: dict[str, Any] = {"follow": chain.follow}
    _put(out, "max", chain.max)
    _put(out, "model", chain.model)
    out["parts"] = [
        OneLine({"step": p.step, "label": p.label, "agent": p.agent, "path": p.path})
        for p in chain.parts
    ]
    return out


def _handoffs_from(data: dict[str, Any] | None) -> HandoffChain | None:
    if data is None:
        return None
    return HandoffChain(
        follow=data["follow"],
        parts=[
            HandoffPart(step=p["step"], label=p["label"], agent=p["agent"], path=p["path"])
            for p in data.get("parts") or []
        ],
        max=data.get("max"),
        model=data.get("model"),
    )


def _hook_run(r: HookRun) -> dict[str, Any]:
    out: dict[str, Any] = {"hook": r.hook, "exit": r.exit, "ms": r.ms}
    if r.timed_out:
        out["timed_out"] = True
    _put(out, "decision", r.decision)
    _put(out, "reason", r.reason)
    _put(out, "output", r.output)
    _put(out, "args", r.args)
    _put(out, "context", r.context)
    return OneLine(out)


def _hooks(ledger: HookLedger) -> dict[str, Any] | None:
    if ledger == HookLedger():
        return None
    out: dict[str, Any] = {}
    _put(
        out,
        "open",
        [
            {
                "event": e.event,
                "key": e.key,
                "ran": [_hook_run(r) for r in e.ran],
                **({"seal": e.seal} if e.seal else {}),
            }
            for e in ledger.open
        ],
    )
    out["runs"] = ledger.runs
    return out


def _hooks_from(data: Any) -> HookLedger:
    if not isinstance(data, dict):
        return HookLedger()
    return HookLedger(
        open=[
            HookEvent(
                event=e["event"],
                key=e["key"],
                ran=[
                    HookRun(
                        hook=r["hook"],
                        exit=r["exit"],
                        ms=r["ms"],
                        timed_out=r.get("timed_out", False),
                        decision=r.get("decision"),
                        reason=r.get("reason"),
                        output=r.get("output"),
                        args=r.get("args"),
                        context=r.get("context"),
                    )
                    for r in e.get("ran") or []
                ],
                seal=e.get("seal"),
            )
            for e in data.get("open") or []
        ],
        runs=data.get("runs", 0),
    )


def _record(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` on one line when they are all scalars (parameters, budget)."""
    if any(isinstance(v, (dict, list)) for v in values.values()):
        return dict(values)
    return OneLine(values)


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
    _put(out, "reason", run.reason)
    _put(out, "until", run.until)
    wf: dict[str, Any] = {"path": run.workflow.path}
    _put(wf, "name", run.workflow.name)
    _put(wf, "description", run.workflow.description)
    wf["hash"] = run.workflow.hash
    _put(wf, "steps", dict(run.workflow.steps))
    if run.workflow.handoffs is not None:
        wf["handoffs"] = _handoffs(run.workflow.handoffs)
    out["workflow"] = wf
    out["created"] = run.created
    out["updated"] = run.updated
    config: dict[str, Any] = {"provider": run.config.provider}
    _put(config, "model", run.config.model)
    _put(config, "models", OneLineList(run.config.models))
    _put(config, "params", _record(run.config.params))
    _put(config, "budget", _record(run.config.budget))
    _put(config, "prices", {m: _record(p) for m, p in run.config.prices.items()})
    _put(config, "base_url", run.config.base_url)
    _put(config, "recording", run.config.recording)
    allowed: dict[str, Any] = {}
    _put(allowed, "allow-commands", OneLineList(run.config.permissions.commands))
    _put(allowed, "allow-fetch", OneLineList(run.config.permissions.hosts))
    given: dict[str, Any] = {}
    _put(given, "allow-commands", OneLineList(run.config.permissions.given_commands))
    _put(given, "allow-fetch", OneLineList(run.config.permissions.given_hosts))
    _put(allowed, "given", given)
    _put(config, "permissions", allowed)
    out["config"] = config
    _put(out, "inputs", dict(run.inputs))
    cursor: dict[str, Any] = OneLine()
    _put(cursor, "step", run.cursor.step)
    cursor["index"] = run.cursor.index
    cursor["total"] = run.cursor.total
    out["cursor"] = cursor
    _put(out, "steps", {sid: _step(s) for sid, s in run.steps.items()})
    _put(
        out,
        "in_flight",
        [
            OneLine(
                {
                    "call_id": f.call_id,
                    "tool": f.tool,
                    "step": f.step,
                    "entry": f.entry,
                    "started": f.started,
                    "idempotent": f.idempotent,
                    **({"expect": dict(f.expect)} if f.expect is not None else {}),
                    **({"server": OneLine(f.server)} if f.server is not None else {}),
                }
            )
            for f in run.in_flight
        ],
    )
    _put(out, "hooks", _hooks(run.hooks))
    out["usage"] = _usage(run.usage)
    _put(out, "attempts", [_attempt(a) for a in run.attempts])
    if run.last_error is not None:
        err: dict[str, Any] = {
            "type": run.last_error.type,
            "message": run.last_error.message,
            "at": run.last_error.at,
        }
        _put(err, "step", run.last_error.step)
        out["last_error"] = err
    if run.redactions != Redactions():
        out["redactions"] = OneLine(
            {"count": run.redactions.count, "where": OneLineList(run.redactions.where)}
        )
    _put(out, "keywords", OneLineList(run.keywords))
    if run.trace is not None:
        trace: dict[str, Any] = {"id": run.trace.id}
        _put(trace, "parent", run.trace.parent)
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
        out["snapshots"] = _snapshots(run.snapshots)
    if run.seal is not None:
        seal: dict[str, Any] = {"by": run.seal.by, "run": run.seal.run}
        _put(seal, "calls", dict(run.seal.calls))
        out["seal"] = seal
    _put(out, "approvals", [_approval(a) for a in run.approvals])
    out["transcript"] = {"entries": entries, "digest": digest}
    return merge(out, run.kept) if keep else out


def _snapshot(snap: FileSnapshot) -> dict[str, Any]:
    out: dict[str, Any] = OneLine({"entry": snap.entry})
    _put(out, "call", snap.call_id)
    out["commit"] = snap.commit
    _put(out, "added", OneLineList(snap.added))
    _put(out, "modified", OneLineList(snap.modified))
    _put(out, "deleted", OneLineList(snap.deleted))
    _put(out, "renamed", OneLineList(OneLineList(pair) for pair in snap.renamed))
    if snap.more:
        out["more"] = snap.more
    if snap.stat:
        out["stat"] = snap.stat
    if snap.late:
        out["late"] = True
    return out


def _snapshots(snaps: Snapshots) -> dict[str, Any]:
    return {
        "root": snaps.root,
        "ref": snaps.ref,
        "calls": [_snapshot(s) for s in snaps.calls],
    }


def _snapshots_from(data: Any) -> Snapshots | None:
    if not isinstance(data, dict):
        return None
    return Snapshots(
        root=data["root"],
        ref=data["ref"],
        calls=[
            FileSnapshot(
                entry=c["entry"],
                commit=c.get("commit"),
                call_id=c.get("call"),
                added=list(c.get("added") or []),
                modified=list(c.get("modified") or []),
                deleted=list(c.get("deleted") or []),
                renamed=[list(pair) for pair in c.get("renamed") or []],
                more=c.get("more", 0),
                stat=c.get("stat", ""),
                late=c.get("late", False),
            )
            for c in data.get("calls") or []
        ],
    )


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


def _usage_from(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    return Usage(
        input_tokens=int(data.get("input_tokens", 0)),
        output_tokens=int(data.get("output_tokens", 0)),
        cached_tokens=int(data.get("cached_tokens", 0)),
        cost_usd=float(data.get("cost_usd", 0.0)),
        turns=int(data.get("turns", 0)),
    )


def run_from_valid(data: dict[str, Any]) -> Run:
    """Build a ``Run`` from front matter that already passed the schema (no checks here)."""
    wf = data["workflow"]
    config = data["config"]
    cursor = data["cursor"]
    steps = {
        sid: StepState(
            status=cast(StepStatus, s["status"]),
            attempts=s.get("attempts", 0),
            output_entry=s.get("output_entry"),
            started=s.get("started"),
            finished=s.get("finished"),
            usage=_usage_from(s.get("usage")),
            turns=s["turns"] if "turns" in s else _usage_from(s.get("usage")).turns,
            child=s.get("child"),
            agents={
                call: AgentChild(a["agent"], a["child"], _usage_from(a.get("usage")))
                for call, a in (s.get("agents") or {}).items()
            },
        )
        for sid, s in (data.get("steps") or {}).items()
    }
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
            handoffs=_handoffs_from(wf.get("handoffs")),
        ),
        status=cast(RunStatus, data["status"]),
        created=data["created"],
        updated=data["updated"],
        config=RunConfig(
            provider=config["provider"],
            model=config.get("model"),
            params=dict(config.get("params") or {}),
            budget=dict(config.get("budget") or {}),
            base_url=config.get("base_url"),
            recording=config.get("recording"),
            models=list(config.get("models") or []),
            prices={str(m): dict(p) for m, p in (config.get("prices") or {}).items()},
            permissions=_allow_lists(config.get("permissions") or {}),
        ),
        cursor=Cursor(step=cursor.get("step"), index=cursor["index"], total=cursor["total"]),
        reason=data.get("reason"),
        until=data.get("until"),
        inputs=dict(data.get("inputs") or {}),
        steps=steps,
        in_flight=[
            InFlight(
                call_id=f["call_id"],
                tool=f["tool"],
                step=f["step"],
                entry=f["entry"],
                started=f["started"],
                idempotent=f["idempotent"],
                expect=dict(f["expect"]) if "expect" in f else None,
                server=dict(f["server"]) if "server" in f else None,
            )
            for f in data.get("in_flight") or []
        ],
        hooks=_hooks_from(data.get("hooks")),
        usage=_usage_from(data.get("usage")),
        attempts=[
            Attempt(
                n=a["n"],
                started=a["started"],
                first_entry=a.get("first_entry"),
                ended=a.get("ended"),
                status=a.get("status"),
                reason=a.get("reason"),
                usage=_usage_from(a.get("usage")),
                notes=list(a.get("notes") or []),
                edits=list(a.get("edits") or []),
                mcp_tools=dict(a.get("mcp_tools") or {}),
                model=a.get("model"),
                refused=[
                    RefusedModel(model=r["model"], message=r["message"])
                    for r in a.get("refused") or []
                ],
                agents=dict(a.get("agents") or {}),
                hooks=dict(a.get("hooks") or {}),
                until=a.get("until"),
                flow=a.get("flow"),
            )
            for a in data.get("attempts") or []
        ],
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
        worktree=_worktree_from(data.get("worktree")),
        trace=(
            TraceRef(id=data["trace"]["id"], parent=data["trace"].get("parent"))
            if isinstance(data.get("trace"), dict)
            else None
        ),
        snapshots=_snapshots_from(data.get("snapshots")),
        seal=_seal_from(data.get("seal")),
        approvals=_approvals_from(data.get("approvals")),
    )


def _approval(a: Approval) -> dict[str, Any]:
    out: dict[str, Any] = {
        "call_id": a.call_id,
        "tool": a.tool,
        "step": a.step,
        "entry": a.entry,
        "preview": a.preview,
        "why": a.why,
        "decision": a.decision,
    }
    for key in ("by", "at", "host", "reason"):
        _put(out, key, getattr(a, key))
    return out


def _approvals_from(data: Any) -> list[Approval]:
    return [
        Approval(
            call_id=a["call_id"],
            tool=a["tool"],
            step=a["step"],
            entry=a["entry"],
            preview=a["preview"],
            why=a["why"],
            decision=a.get("decision", "pending"),
            by=a.get("by"),
            at=a.get("at"),
            host=a.get("host"),
            reason=a.get("reason"),
        )
        for a in data or []
    ]


def _seal_from(data: Any) -> Seal | None:
    if not isinstance(data, dict):
        return None
    return Seal(by=data["by"], run=data["run"], calls=dict(data.get("calls") or {}))


def _worktree_from(data: Any) -> WorktreeRef | None:
    if not isinstance(data, dict):
        return None
    return WorktreeRef(
        path=data["path"],
        branch=data["branch"],
        base=data["base"],
        state=cast(WorktreeState, data.get("state", "active")),
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


def _allow_lists(recorded: dict[str, Any]) -> AllowLists:
    """``config.permissions`` as written: the workflow's lists and the flags given."""
    given = recorded.get("given") or {}
    return AllowLists(
        commands=list(recorded.get("allow-commands") or []),
        hosts=list(recorded.get("allow-fetch") or []),
        given_commands=list(given.get("allow-commands") or []),
        given_hosts=list(given.get("allow-fetch") or []),
    )
