"""``flow share``, ``flow log`` and ``flow show`` of runs with ``decision`` and ``compaction``
entries.

The runs are real: the counter workflow with a small ``context_window:`` (so the scripted
provider's summaries compact it), SIGKILLed with a non-idempotent call in flight and resumed
with ``--decide`` (answered by the script's ``decisions:`` list).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import Run
from tests import support
from tests.support.flowproc import flow, flow_env

FIXTURES = support.FIXTURES / "engine"
PROGRESS = "run/progress.md"
CRASH = {"FLOW_CRASH_AT": "engine.tool_ran:1"}
DECISION_USAGE = {"input_tokens": 40, "output_tokens": 7}


def _folder(where: Path, choice: str, *, window: int | None = 280) -> Path:
    """The counter workflow (compacting at ``window``) and a script deciding ``choice``."""
    where.mkdir()
    workflow = (FIXTURES / "counter.prompt.md").read_text(encoding="utf-8")
    if window is not None:
        workflow = workflow.replace(
            "provider: scripted\n", f"provider: scripted\ncontext_window: {window}\n"
        )
    (where / "counter.prompt.md").write_text(workflow, encoding="utf-8")
    script = (FIXTURES / "counter.script.yaml").read_text(encoding="utf-8")
    answer = json.dumps({"choice": choice, "reason": "the bump only appends a line"})
    script += "decisions: " + json.dumps([{"content": answer, "usage": DECISION_USAGE}]) + "\n"
    script += 'summary: "The counter was bumped."\n'
    (where / "counter.script.yaml").write_text(script, encoding="utf-8")
    return where


def _crashed(where: Path) -> None:
    run = ("run", "counter.prompt.md", "--recording", "counter.script.yaml")
    killed = flow(*run, "--progress", PROGRESS, cwd=where, env=flow_env(**CRASH))
    assert killed.returncode == -9, killed.stderr


def _log(progress: Path, cwd: Path) -> dict[str, Any]:
    result = flow("log", str(progress), "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _summed(data: dict[str, Any], key: str) -> int:
    return sum(a["usage"][key] for a in data["attempts"])


def _entries(run: Run, role: str) -> list[tuple[str, str | None, tuple[int, int] | None]]:
    return [(e.content, e.step, e.covers) for e in run.transcript if e.role == role]


def test_log_accounts_for_a_decision_that_stopped_the_run(tmp_path: Path) -> None:
    where = _folder(tmp_path / "w", "ask", window=None)
    _crashed(where)
    stopped = flow("resume", PROGRESS, "--decide", cwd=where)
    assert stopped.returncode == 8, stopped.stderr
    data = _log(where / PROGRESS, where)
    # The decision's call is in the run's usage: an attempt of the log must hold it too.
    assert data["usage"]["input_tokens"] == 100 + 40
    assert _summed(data, "input_tokens") == data["usage"]["input_tokens"]
    assert _summed(data, "output_tokens") == data["usage"]["output_tokens"]
    last = data["attempts"][-1]
    assert last["status"] == "needs_review"
    assert last["usage"]["input_tokens"] == 40
    assert any(n.startswith("recovery decision: ask — ") for n in last["notes"])
    text = flow("log", PROGRESS, cwd=where)
    assert "recovery decision: ask" in text.stdout
    assert "40 in / 7 out tokens" in text.stdout


def test_log_names_the_compaction_and_decision_calls(tmp_path: Path) -> None:
    where = _folder(tmp_path / "w", "continue")
    _crashed(where)
    resumed = flow("resume", PROGRESS, "--decide", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    run, _ = load_progress(where / PROGRESS)
    compactions = _entries(run, "compaction")
    assert compactions
    data = _log(where / PROGRESS, where)
    assert _summed(data, "input_tokens") == data["usage"]["input_tokens"]
    notes = data["attempts"][-1]["notes"]
    (summary,) = [n for n in notes if n.startswith("context compaction: ")]
    count = len(compactions)
    assert summary.startswith(
        f"context compaction: {count} {'summary' if count == 1 else 'summaries'}"
    )
    assert " in / " in summary and " out tokens" in summary
    assert "recovery decision: continue — the bump only appends a line" in notes
    assert "recovery decision's call: 40 in / 7 out tokens, $0.0000" in notes


def test_show_renders_decision_and_compaction_entries(tmp_path: Path) -> None:
    where = _folder(tmp_path / "w", "continue")
    _crashed(where)
    assert flow("resume", PROGRESS, "--decide", cwd=where).returncode == 0
    run, _ = load_progress(where / PROGRESS)
    (decision,) = [e for e in run.transcript if e.role == "decision"]
    compaction = next(e for e in run.transcript if e.role == "compaction")
    assert compaction.covers is not None
    first, last = compaction.covers
    shown = flow("show", PROGRESS, cwd=where)
    assert shown.returncode == 0, shown.stderr
    assert f"{decision.id} · recovery decision · inspect" in shown.stdout
    assert "choice: continue" in shown.stdout and "usage: 40 in / 7 out tokens" in shown.stdout
    assert f"stands for entries {first}–{last} in requests" in shown.stdout
    page_path = tmp_path / "run.html"
    html = flow("show", PROGRESS, "--html", str(page_path), cwd=where)
    assert html.returncode == 0, html.stderr
    page = page_path.read_text(encoding="utf-8")
    assert f'id="entry-{decision.id}" data-role="decision"' in page
    assert "<li>choice: continue</li>" in page
    # The covered range links to the entries it stands for.
    assert (
        f'stands for entries <a href="#entry-{first}">{first}</a>–'
        f'<a href="#entry-{last}">{last}</a>' in page
    )


def test_a_shared_copy_with_decision_and_compaction_resumes(tmp_path: Path) -> None:
    where = _folder(tmp_path / "w", "ask")
    _crashed(where)
    assert flow("resume", PROGRESS, "--decide", cwd=where).returncode == 8
    # A person chose: run the call again; the run is killed right after its first summary.
    again = flow(
        "resume",
        PROGRESS,
        "--rerun-unsafe",
        cwd=where,
        env=flow_env(FLOW_CRASH_AT="compaction.recorded"),
    )
    assert again.returncode == -9, again.stderr
    original, _ = load_progress(where / PROGRESS)
    assert _entries(original, "decision") and _entries(original, "compaction")
    copy = tmp_path / "shared" / "run.md"
    shared = flow("share", PROGRESS, "-o", str(copy), cwd=where)
    assert shared.returncode == 0, shared.stderr
    copied, _ = load_progress(copy)
    for role in ("decision", "compaction"):
        assert _entries(copied, role) == _entries(original, role)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(where, elsewhere, ignore=shutil.ignore_patterns("run"))
    resumed = flow("resume", str(copy), "--workflow", "counter.prompt.md", cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    done, _ = load_progress(copy)
    assert done.status == "completed"
    assert _entries(done, "decision") == _entries(original, "decision")
    n = len(_entries(original, "compaction"))
    assert _entries(done, "compaction")[:n] == _entries(original, "compaction")
    data = _log(copy, elsewhere)
    assert _summed(data, "input_tokens") == data["usage"]["input_tokens"]
