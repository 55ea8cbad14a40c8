"""Helpers shared by the detector tests: progress files on disk and workflow records.

(Holds no tests itself.) Progress files are written the way the progress store writes them:
front matter keys in its order, dumped by ``yamlio``, then a short Markdown body.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from promptflow_resume.base import yamlio
from promptflow_resume.base.retrypolicy import RetryPolicy
from promptflow_resume.progress.seal import Key
from promptflow_resume.workflow.records import Budget, Step, Workflow

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=timezone.utc)
HASH = "sha256:v1:" + "ab" * 32


def iso(moment: datetime) -> str:
    """``2026-11-21T12:00:00Z``."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_workflow(
    name: str = "api-server",
    description: str | None = "Build a REST API with JWT login",
    steps: Sequence[tuple[str, str]] = (("Plan", "Plan the endpoints."),),
    *,
    context: str = "",
    hash: str = HASH,
    path: Path | None = None,
) -> Workflow:
    """A Workflow record as the loader returns it."""
    records = tuple(
        Step(
            id=f"s{i}",
            title=title,
            index=i,
            kind="prompt",
            body=body,
            hash=f"sha256:v1:{i:064x}",
            line=3 * i,
        )
        for i, (title, body) in enumerate(steps, start=1)
    )
    return Workflow(
        path=path or Path(f"{name}.prompt.md"),
        name=name,
        description=description,
        front_matter={},
        context=context,
        steps=records,
        inputs={},
        commands={},
        tools=(),
        provider=None,
        model=None,
        params={},
        budget=Budget(),
        retry=RetryPolicy(),
        hash=hash,
    )


def front_matter(
    run_id: str,
    *,
    status: str = "interrupted",
    keywords: Iterable[str] | None = ("api", "auth"),
    updated: datetime | None = None,
    workflow_hash: str = "sha256:v1:" + "cd" * 32,
    inputs: Mapping[str, Any] | None = None,
    name: str = "api-server",
    description: str | None = "Build a REST API with JWT login",
    workflow_path: str = "../../../api-server.prompt.md",
    steps_done: int = 1,
    steps_total: int = 3,
    cost: float = 0.12,
    reason: str | None = None,
    sealed: bool = False,
) -> dict[str, Any]:
    """A front matter dict in the progress store's key order (``sealed``: as flow on this
    machine writes it, with the run's seal under this test's key)."""
    moment = updated or NOW - timedelta(hours=1)
    data: dict[str, Any] = {"flow_progress": 1, "run_id": run_id, "status": status}
    if reason:
        data["reason"] = reason
    workflow: dict[str, Any] = {"path": workflow_path, "name": name}
    if description:
        workflow["description"] = description
    workflow["hash"] = workflow_hash
    workflow["steps"] = {f"s{i}": f"sha256:v1:{i:064x}" for i in range(1, steps_total + 1)}
    data["workflow"] = workflow
    data["created"] = iso(moment - timedelta(minutes=30))
    data["updated"] = iso(moment)
    data["config"] = {"provider": "scripted", "model": "test"}
    if inputs:
        data["inputs"] = dict(inputs)
    data["cursor"] = {
        "step": f"s{min(steps_done + 1, steps_total)}",
        "index": min(steps_done + 1, steps_total),
        "total": steps_total,
    }
    data["steps"] = {
        f"s{i}": (
            {"status": "completed", "attempts": 1, "started": iso(moment), "turns": 2}
            if i <= steps_done
            else {"status": "pending"}
        )
        for i in range(1, steps_total + 1)
    }
    data["usage"] = {
        "input_tokens": 1000,
        "output_tokens": 200,
        "cached_tokens": 0,
        "cost_usd": cost,
        "turns": 2,
    }
    data["attempts"] = [{"n": 1, "started": iso(moment), "status": status}]
    if keywords is not None:
        data["keywords"] = list(keywords)
    if sealed:
        key = Key.ensure()
        seal = key.run_seal(run_id, data["created"], data["config"]["provider"], None)
        data["seal"] = {"by": key.id, "run": seal}
    data["transcript"] = {"entries": 4, "digest": "sha256:v1:" + "ef" * 32}
    return data


def write_text_progress(path: Path, front: Mapping[str, Any] | str, body: str = "") -> Path:
    """Write a progress file with the given front matter (a dict, or YAML text as is)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = front if isinstance(front, str) else yamlio.dump(dict(front))
    path.write_text(
        "---\n" + text + "---\n" + (body or "# Run\n\n## Step 1: Plan\n\nHello.\n"),
        encoding="utf-8",
    )
    return path


def write_run(runs: Path, run_id: str, **fields: Any) -> Path:
    """Write ``runs/<run_id>/progress.md`` (see ``front_matter`` for the fields)."""
    return write_text_progress(runs / run_id / "progress.md", front_matter(run_id, **fields))
