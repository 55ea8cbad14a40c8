"""The records of a run as front matter values, and back: usage, steps, attempts, the
configuration, tool calls in flight, handoffs, hooks, file snapshots, approvals, the seal and
the worktree. ``frontmatter`` assembles them into the whole front matter in its key order.

A value leaves out what holds its default (``put``), and the reader puts the default back, so
each pair is an exact inverse; short records are ``OneLine`` values that YAML writes on one
line::

    value = usage_value(run.usage)      # OneLine({"input_tokens": ..., ...})
    usage = usage_from(value)           # Usage(...) again
"""

from __future__ import annotations

from typing import Any, cast

from ..base.yamlio import OneLine, OneLineList
from .filesnapshots import FileSnapshot, Snapshots
from .hookledger import HookEvent, HookLedger, HookRun
from .model import (
    AgentChild,
    AllowLists,
    Approval,
    Attempt,
    HandoffChain,
    HandoffPart,
    InFlight,
    RefusedModel,
    RunConfig,
    Seal,
    StepState,
    StepStatus,
    Usage,
    WorktreeRef,
    WorktreeState,
)


def put(out: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` unless ``value`` is None or an empty dict or list (their defaults)."""
    if value is None or (isinstance(value, (dict, list)) and not value):
        return
    out[key] = value


def usage_value(u: Usage) -> dict[str, Any]:
    """``usage:`` (of the run, a step, an attempt or a child) on one line."""
    return OneLine(
        {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cached_tokens": u.cached_tokens,
            "cost_usd": u.cost_usd,
            "turns": u.turns,
        }
    )


def usage_from(data: Any) -> Usage:
    """Inverse of ``usage_value``; no usage recorded is zero usage."""
    if not isinstance(data, dict):
        return Usage()
    return Usage(
        input_tokens=int(data.get("input_tokens", 0)),
        output_tokens=int(data.get("output_tokens", 0)),
        cached_tokens=int(data.get("cached_tokens", 0)),
        cost_usd=float(data.get("cost_usd", 0.0)),
        turns=int(data.get("turns", 0)),
    )


def is_zero(u: Usage) -> bool:
    """Whether ``u`` is no usage at all (then it is not written)."""
    return u == Usage()


def record_value(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` on one line when they are all scalars (parameters, budget)."""
    if any(isinstance(v, (dict, list)) for v in values.values()):
        return dict(values)
    return OneLine(values)


def step_value(state: StepState) -> dict[str, Any]:
    """One step's record under ``steps:``; ``turns`` only where it differs from its usage's."""
    out: dict[str, Any] = {"status": state.status}
    if state.attempts:
        out["attempts"] = state.attempts
    put(out, "output_entry", state.output_entry)
    put(out, "started", state.started)
    put(out, "finished", state.finished)
    if state.turns != state.usage.turns:
        out["turns"] = state.turns
    if not is_zero(state.usage):
        out["usage"] = usage_value(state.usage)
    put(out, "child", state.child)
    if state.agents:
        out["agents"] = {call: _agent_child(a) for call, a in state.agents.items()}
    return out


def _agent_child(a: AgentChild) -> dict[str, Any]:
    out: dict[str, Any] = {"agent": a.agent, "child": a.child}
    if not is_zero(a.usage):
        out["usage"] = usage_value(a.usage)
    return out


def attempt_value(a: Attempt) -> dict[str, Any]:
    """One attempt's record under ``attempts:``."""
    out: dict[str, Any] = {"n": a.n, "started": a.started}
    put(out, "first_entry", a.first_entry)
    put(out, "ended", a.ended)
    put(out, "status", a.status)
    put(out, "reason", a.reason)
    if not is_zero(a.usage):
        out["usage"] = usage_value(a.usage)
    put(out, "notes", list(a.notes))
    put(out, "edits", list(a.edits))
    if a.mcp_tools:
        out["mcp_tools"] = OneLine(dict(a.mcp_tools))
    put(out, "model", a.model)
    put(
        out,
        "refused",
        [OneLine({"model": r.model, "message": r.message}) for r in a.refused],
    )
    if a.agents:
        out["agents"] = dict(a.agents)
    put(out, "hooks", dict(a.hooks))
    put(out, "until", a.until)
    put(out, "flow", a.flow)
    return out


def handoffs_value(chain: HandoffChain) -> dict[str, Any]:
    """``workflow.handoffs:``: the chain of handoffs the workflow follows."""
    out: dict[str, Any] = {"follow": chain.follow}
    put(out, "max", chain.max)
    put(out, "model", chain.model)
    out["parts"] = [
        OneLine({"step": p.step, "label": p.label, "agent": p.agent, "path": p.path})
        for p in chain.parts
    ]
    return out


def handoffs_from(data: dict[str, Any] | None) -> HandoffChain | None:
    """Inverse of ``handoffs_value`` (None: the workflow has no handoffs)."""
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
    put(out, "decision", r.decision)
    put(out, "reason", r.reason)
    put(out, "output", r.output)
    put(out, "args", r.args)
    put(out, "context", r.context)
    return OneLine(out)


def hooks_value(ledger: HookLedger) -> dict[str, Any] | None:
    """``hooks:``: the hook events still open and the count of hook runs; None for none."""
    if ledger == HookLedger():
        return None
    out: dict[str, Any] = {}
    put(
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


def hooks_from(data: Any) -> HookLedger:
    """Inverse of ``hooks_value``."""
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


def _snapshot(snap: FileSnapshot) -> dict[str, Any]:
    out: dict[str, Any] = OneLine({"entry": snap.entry})
    put(out, "call", snap.call_id)
    out["commit"] = snap.commit
    put(out, "added", OneLineList(snap.added))
    put(out, "modified", OneLineList(snap.modified))
    put(out, "deleted", OneLineList(snap.deleted))
    put(out, "renamed", OneLineList(OneLineList(pair) for pair in snap.renamed))
    if snap.more:
        out["more"] = snap.more
    if snap.stat:
        out["stat"] = snap.stat
    if snap.late:
        out["late"] = True
    return out


def snapshots_value(snaps: Snapshots) -> dict[str, Any]:
    """``snapshots:``: the repository, the ref and one record per call."""
    return {
        "root": snaps.root,
        "ref": snaps.ref,
        "calls": [_snapshot(s) for s in snaps.calls],
    }


def snapshots_from(data: Any) -> Snapshots | None:
    """Inverse of ``snapshots_value`` (None: the run takes no snapshots)."""
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


def approval_value(a: Approval) -> dict[str, Any]:
    """One call's record under ``approvals:``."""
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
        put(out, key, getattr(a, key))
    return out


def approvals_from(data: Any) -> list[Approval]:
    """Inverse of ``approval_value`` for each call."""
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


def seal_from(data: Any) -> Seal | None:
    """``seal:`` as a record (None: the run has none)."""
    if not isinstance(data, dict):
        return None
    return Seal(by=data["by"], run=data["run"], calls=dict(data.get("calls") or {}))


def worktree_from(data: Any) -> WorktreeRef | None:
    """``worktree:`` as a record (None: the run works in the checkout)."""
    if not isinstance(data, dict):
        return None
    return WorktreeRef(
        path=data["path"],
        branch=data["branch"],
        base=data["base"],
        state=cast(WorktreeState, data.get("state", "active")),
    )


def allow_lists_from(recorded: dict[str, Any]) -> AllowLists:
    """``config.permissions`` as written: the workflow's lists and the flags given."""
    given = recorded.get("given") or {}
    return AllowLists(
        commands=list(recorded.get("allow-commands") or []),
        hosts=list(recorded.get("allow-fetch") or []),
        given_commands=list(given.get("allow-commands") or []),
        given_hosts=list(given.get("allow-fetch") or []),
    )


def config_value(config: RunConfig) -> dict[str, Any]:
    """``config:``: the provider, models, parameters, budget, prices and permissions."""
    out: dict[str, Any] = {"provider": config.provider}
    put(out, "model", config.model)
    put(out, "models", OneLineList(config.models))
    put(out, "params", record_value(config.params))
    put(out, "budget", record_value(config.budget))
    put(out, "prices", {m: record_value(p) for m, p in config.prices.items()})
    put(out, "base_url", config.base_url)
    put(out, "recording", config.recording)
    allowed: dict[str, Any] = {}
    put(allowed, "allow-commands", OneLineList(config.permissions.commands))
    put(allowed, "allow-fetch", OneLineList(config.permissions.hosts))
    given: dict[str, Any] = {}
    put(given, "allow-commands", OneLineList(config.permissions.given_commands))
    put(given, "allow-fetch", OneLineList(config.permissions.given_hosts))
    put(allowed, "given", given)
    put(out, "permissions", allowed)
    return out


def config_from(config: dict[str, Any]) -> RunConfig:
    """Inverse of ``config_value``."""
    return RunConfig(
        provider=config["provider"],
        model=config.get("model"),
        params=dict(config.get("params") or {}),
        budget=dict(config.get("budget") or {}),
        base_url=config.get("base_url"),
        recording=config.get("recording"),
        models=list(config.get("models") or []),
        prices={str(m): dict(p) for m, p in (config.get("prices") or {}).items()},
        permissions=allow_lists_from(config.get("permissions") or {}),
    )


def steps_from(data: Any) -> dict[str, StepState]:
    """``steps:`` as records, by step id (inverse of ``step_value`` for each)."""
    return {
        sid: StepState(
            status=cast(StepStatus, s["status"]),
            attempts=s.get("attempts", 0),
            output_entry=s.get("output_entry"),
            started=s.get("started"),
            finished=s.get("finished"),
            usage=usage_from(s.get("usage")),
            turns=s["turns"] if "turns" in s else usage_from(s.get("usage")).turns,
            child=s.get("child"),
            agents={
                call: AgentChild(a["agent"], a["child"], usage_from(a.get("usage")))
                for call, a in (s.get("agents") or {}).items()
            },
        )
        for sid, s in (data or {}).items()
    }


def in_flight_value(calls: list[InFlight]) -> list[dict[str, Any]]:
    """``in_flight:``: each tool call whose start was recorded but not its result."""
    return [
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
        for f in calls
    ]


def in_flight_from(data: Any) -> list[InFlight]:
    """Inverse of ``in_flight_value``."""
    return [
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
        for f in data or []
    ]


def attempts_from(data: Any) -> list[Attempt]:
    """``attempts:`` as records (inverse of ``attempt_value`` for each)."""
    return [
        Attempt(
            n=a["n"],
            started=a["started"],
            first_entry=a.get("first_entry"),
            ended=a.get("ended"),
            status=a.get("status"),
            reason=a.get("reason"),
            usage=usage_from(a.get("usage")),
            notes=list(a.get("notes") or []),
            edits=list(a.get("edits") or []),
            mcp_tools=dict(a.get("mcp_tools") or {}),
            model=a.get("model"),
            refused=[
                RefusedModel(model=r["model"], message=r["message"]) for r in a.get("refused") or []
            ],
            agents=dict(a.get("agents") or {}),
            hooks=dict(a.get("hooks") or {}),
            until=a.get("until"),
            flow=a.get("flow"),
        )
        for a in data or []
    ]
