"""What ``flow check`` shows: a workflow's plan as JSON-ready data, and as readable text."""

from __future__ import annotations

from typing import Any

from ..base.wording import count
from .hashing import short_hash
from .prompts import step_tools
from .records import Diagnostic, InputDecl, Workflow
from .toolnames import is_editor_only
from .values import value_text
from .variables import ALWAYS_RESOLVED, EDITOR_VARIABLES, FILE_VARIABLES


def plan_dict(path: str, wf: Workflow | None, diagnostics: list[Diagnostic]) -> dict[str, Any]:
    """The ``flow check --json`` record for one file (stable keys; documented in the spec)."""
    errors = sum(1 for d in diagnostics if d.severity == "error")
    plan: dict[str, Any] = {
        "path": path,
        "ok": errors == 0,
        "errors": errors,
        "warnings": len(diagnostics) - errors,
    }
    if wf is not None:
        plan.update(
            name=wf.name,
            description=wf.description,
            hash=wf.hash,
            provider=wf.provider,
            model=wf.model,
            models=list(wf.models),
            params=wf.params,
            budget={k: v for k, v in vars(wf.budget).items() if v is not None},
            retry=dict(vars(wf.retry)),
            context_lines=len(wf.context.splitlines()),
            steps=[
                {
                    "index": s.index,
                    "id": s.id,
                    "title": s.title,
                    "kind": s.kind,
                    "line": s.line,
                    "tools": list(step_tools(wf, s)),
                    "max_turns": s.max_turns,
                    "command": s.command,
                    "command_args": s.command_args,
                    "hash": s.hash,
                    # Only workflow steps carry these, so other steps' records stay as they were.
                    **(
                        {
                            "workflow": s.workflow,
                            "workflow_inputs": dict(s.workflow_inputs),
                            "workflow_hash": s.child.hash if s.child is not None else None,
                        }
                        if s.kind == "workflow"
                        else {}
                    ),
                }
                for s in wf.steps
            ],
            inputs=[_input_record(wf, d) for d in wf.inputs.values()],
            variables=_variable_records(wf),
            tools=_tool_records(wf),
            unknown_keys=[k for k in wf.front_matter if k not in _known_keys()],
        )
    plan["diagnostics"] = [d.to_dict() for d in diagnostics]
    return plan


def _known_keys() -> tuple[str, ...]:
    from .header import KNOWN_KEYS

    return KNOWN_KEYS


def _input_source(decl: InputDecl) -> str:
    if decl.default is not None:
        shown = repr(decl.default) if isinstance(decl.default, str) else value_text(decl.default)
        return f"default {shown}"
    if decl.placeholder:
        return f"asked on a terminal, else {decl.placeholder!r}"
    if not decl.required:
        return "optional"
    return "required"


def _input_record(wf: Workflow, decl: InputDecl) -> dict[str, Any]:
    used_in = sorted(
        {v.step or "(context)" for v in wf.variables if v.kind == "input" and v.name == decl.name}
    )
    return {
        "name": decl.name,
        "type": decl.type,
        "declared": decl.declared,
        "required": decl.required and decl.default is None,
        "default": decl.default,
        "placeholder": decl.placeholder,
        "choices": list(decl.choices) if decl.choices is not None else None,
        "description": decl.description,
        "value": _input_source(decl),
        "used_in": used_in,
    }


def _variable_records(wf: Workflow) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for v in wf.variables:
        if v.kind == "input":
            resolves = f"input {v.name}"
        elif v.kind == "step":
            resolves = f"output of step {v.name}"
        elif v.name in ALWAYS_RESOLVED:
            resolves = EDITOR_VARIABLES[v.name]
        elif v.name in FILE_VARIABLES:
            resolves = "needs --file PATH"
        else:
            resolves = "no value in a terminal"
        records.append(
            {
                "text": v.text,
                "kind": v.kind,
                "name": v.name,
                "line": v.line,
                "column": v.column,
                "step": v.step,
                "resolves": resolves,
            }
        )
    return records


def _tool_records(wf: Workflow) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    listed = wf.tool_map if "tools" in wf.front_matter else {n: (n,) for n in wf.tools}
    names = dict(listed)
    for step in wf.steps:
        for name in step.tools or ():
            names.setdefault(name, (name,))
    for name, targets in names.items():
        record: dict[str, Any] = {"name": name, "resolves_to": list(targets)}
        if name in wf.commands:
            cmd = wf.commands[name]
            record.update(kind="command", idempotent=cmd.idempotent, timeout=cmd.timeout)
        elif not targets:
            record.update(kind="editor-only" if is_editor_only(name) else "unknown")
        elif targets == (name,):
            record.update(kind="builtin")
        else:
            record.update(kind="prompt-file name")
        records.append(record)
    for name, cmd in wf.commands.items():
        if name not in names:
            records.append(
                {
                    "name": name,
                    "resolves_to": [name],
                    "kind": "command",
                    "idempotent": cmd.idempotent,
                    "timeout": cmd.timeout,
                }
            )
    return records


def _table(rows: list[list[str]], indent: str = "    ") -> list[str]:
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]


def format_plan(plan: dict[str, Any]) -> str:
    """The readable plan printed by ``flow check``."""
    lines = [plan["path"]]
    if "skill" in plan:
        skill = plan["skill"]
        about = skill["description"]
        about = about if len(about) <= 100 else about[:99] + "…"
        lines.append(f"  skill     {skill['name']} — {about}")
        lines.append(f"  hash      {skill['hash']}")
        lines.append(f"  files     {', '.join(skill['files']) or 'none besides SKILL.md'}")
    if "hooks" in plan:
        lines.extend(_hook_lines(plan))
    if "steps" in plan:
        lines.extend(_workflow_lines(plan))
    lines.extend(_diagnostic_lines(plan))
    return "\n".join(lines)


def _workflow_lines(plan: dict[str, Any]) -> list[str]:
    """A workflow's part of its plan: name, hash, model, budget, then its steps, inputs,
    variables and tools as tables."""
    title = plan["name"] + (f" — {plan['description']}" if plan["description"] else "")
    lines = [f"  workflow  {title}", f"  hash      {plan['hash']}"]
    # A list of models reads in the order they are tried.
    chosen = " → ".join(plan.get("models") or ()) or plan["model"]
    model = " · ".join(x for x in (plan["provider"], chosen) if x) or "(from the command line)"
    params = ", ".join(f"{k}={v}" for k, v in plan["params"].items())
    lines.append(f"  model     {model}" + (f" ({params})" if params else ""))
    if plan["budget"]:
        budget = " · ".join(
            f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in plan["budget"].items()
        )
        lines.append(f"  budget    {budget}")
    context = count(plan["context_lines"], "line") if plan["context_lines"] else "none"
    lines.append(f"  context   {context}")
    lines.append(f"  steps ({len(plan['steps'])})")
    rows = [
        [f"{s['index']}.", s["id"], s["title"], s["kind"], _step_does(s), short_hash(s["hash"])]
        for s in plan["steps"]
    ]
    lines.extend(_table(rows))
    if plan["inputs"]:
        lines.append(f"  inputs ({len(plan['inputs'])})")
        rows = []
        for i in plan["inputs"]:
            where = "used in " + ", ".join(i["used_in"]) if i["used_in"] else "unused"
            declared = "" if i["declared"] else " (not declared)"
            rows.append([i["name"], i["type"], i["value"], where + declared])
        lines.extend(_table(rows))
    if plan["variables"]:
        lines.append(f"  variables ({len(plan['variables'])})")
        rows = [
            [v["text"], f"line {v['line']}", f"in {v['step'] or 'context'}", v["resolves"]]
            for v in plan["variables"]
        ]
        lines.extend(_table(rows))
    if plan["tools"]:
        lines.append(f"  tools ({len(plan['tools'])})")
        lines.extend(_table([[t["name"], _tool_status(t)] for t in plan["tools"]]))
    return lines


def _step_does(s: dict[str, Any]) -> str:
    """What a step of the plan does, in a few words: its command, workflow or tools."""
    if s["kind"] == "command":
        args = " ".join(f"{k}={v}" for k, v in s["command_args"].items())
        return f"run: {s['command']}" + (f" {args}" if args else "")
    if s["kind"] == "human":
        return "waits for a person's answer"
    if s["kind"] == "workflow":
        args = ", ".join(f"{k}={v}" for k, v in s["workflow_inputs"].items())
        return f"workflow: {s['workflow']}" + (f" · inputs: {args}" if args else "")
    what = "tools: " + (", ".join(s["tools"]) or "none")
    if s["max_turns"]:
        what += f" · max_turns {s['max_turns']}"
    return what


def _tool_status(t: dict[str, Any]) -> str:
    """What a tool of the plan is, and whether the model is offered it."""
    if t["kind"] == "command":
        idem = "idempotent" if t["idempotent"] else "not idempotent"
        return f"command, {idem}, timeout {t['timeout']:g}s"
    if t["kind"] == "unknown":
        problem = t.get("problem")  # e.g. the MCP server lacks it (mcp_check)
        return f"not offered: {problem}" if problem else "unknown: not offered to the model"
    if t["kind"] == "editor-only":
        return "editor-only: not offered outside VS Code"
    if t["kind"] == "builtin":
        return "built-in"
    return "-> " + ", ".join(t["resolves_to"])


def _diagnostic_lines(plan: dict[str, Any]) -> list[str]:
    """The plan's last lines: how many errors and warnings, then each with its place."""
    diagnostics = plan["diagnostics"]
    if not diagnostics:
        return ["  ok: no problems found"]
    lines = [
        "  "
        + ", ".join(
            x
            for x in (
                count(plan["errors"], "error") if plan["errors"] else "",
                count(plan["warnings"], "warning") if plan["warnings"] else "",
            )
            if x
        )
    ]
    for d in diagnostics:
        loc = plan["path"]
        if d["line"] is not None:
            loc += f":{d['line']}" + (f":{d['column']}" if d["column"] is not None else "")
        field = f" {d['field']}:" if d["field"] else ""
        lines.append(f"    {loc}: {d['severity']}:{field} {d['message']}")
    return lines


def _hook_lines(plan: dict[str, Any]) -> list[str]:
    """A hooks file's part of its plan: its hash, then each hook it runs."""
    lines = [f"  hooks     {plan['hash']}", f"  runs ({len(plan['hooks'])})"]
    rows = []
    for h in plan["hooks"]:
        how = f"timeout {h['timeout']:g}s"
        if h["cwd"]:
            how += f" · cwd {h['cwd']}"
        if h["env"]:
            how += " · env " + ", ".join(h["env"])
        if h["matcher"]:
            how += f" · tools matching {h['matcher']}"
        rows.append([f"{h['event']}[{h['index']}]", h["bash"], how])
    lines.extend(_table(rows))
    return lines


def format_summary(plan: dict[str, Any]) -> str:
    """One line for a file in a folder-wide ``flow check``: its verdict and first problem."""
    counts = ", ".join(
        x
        for x in (
            count(plan["errors"], "error") if plan["errors"] else "",
            count(plan["warnings"], "warning") if plan["warnings"] else "",
        )
        if x
    )
    steps = f"{count(len(plan['steps']), 'step')}" if "steps" in plan else ""
    if plan.get("kind") == "skill":
        steps = "skill"
    elif "hooks" in plan:
        steps = count(len(plan["hooks"]), "hook")
    if not counts:
        return f"{plan['path']}: ok ({steps})"
    first = next(
        (d for d in plan["diagnostics"] if d["severity"] == "error"), plan["diagnostics"][0]
    )
    where = f"line {first['line']}: " if first["line"] is not None else ""
    verdict = "ok" if plan["ok"] else "FAILED"
    detail = f"{steps}; {counts}" if steps else counts
    return f"{plan['path']}: {verdict} ({detail}); first: {where}{first['message']}"


def format_tally(plans: list[dict[str, Any]]) -> str:
    """The last line of a many-file ``flow check``: files by verdict, problems by kind."""
    failed = sum(1 for p in plans if not p["ok"])
    warned = sum(1 for p in plans if p["ok"] and p["warnings"])
    verdicts = [
        f"{len(plans) - failed - warned} ok",
        f"{warned} with warnings" if warned else "",
        f"{failed} with errors" if failed else "",
    ]
    by_code: dict[str, int] = {}
    for plan in plans:
        for d in plan["diagnostics"]:
            code = d["code"] or d["severity"]
            by_code[code] = by_code.get(code, 0) + 1
    errors = sum(p["errors"] for p in plans)
    warnings = sum(p["warnings"] for p in plans)
    problems = ", ".join(
        x
        for x in (
            count(errors, "error") if errors else "",
            count(warnings, "warning") if warnings else "",
        )
        if x
    )
    text = f"{count(len(plans), 'file')}: " + ", ".join(v for v in verdicts if v)
    if problems:
        kinds = ", ".join(f"{code} {n}" for code, n in sorted(by_code.items(), key=lambda x: -x[1]))
        text += f"; {problems} ({kinds})"
    return text + "."


def tool_tally(plans: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Over many files: how many offer each tool, and name each editor-only or unknown tool."""
    tally: dict[str, dict[str, int]] = {"offered": {}, "editor-only": {}, "unknown": {}}
    for plan in plans:
        offered: set[str] = set()
        for step in plan.get("steps", ()):
            offered.update(step.get("tools") or ())
        for name in offered:
            tally["offered"][name] = tally["offered"].get(name, 0) + 1
        for record in plan.get("tools", ()):
            kind = record["kind"]
            if kind in ("editor-only", "unknown"):
                tally[kind][record["name"]] = tally[kind].get(record["name"], 0) + 1
    return tally


def format_tool_tally(plans: list[dict[str, Any]]) -> str:
    """The tools part of the tally after several files: what would be offered, and not."""
    tally = tool_tally(plans)

    def listed(counts: dict[str, int]) -> str:
        ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        return ", ".join(f"{name} ({n})" for name, n in ordered) or "none"

    return "\n".join(
        [
            f"tools over {count(len(plans), 'file')} (files that offer each):",
            f"  offered      {listed(tally['offered'])}",
            f"  editor-only  {listed(tally['editor-only'])}",
            f"  unknown      {listed(tally['unknown'])}",
        ]
    )
