"""``flow status`` of a compacted run: how many compactions, what the newest covers, and the
next request's estimated size against the context window.

The runs are real: the counter workflow with a small ``context_window:`` so the scripted
provider's summaries compact it, or killed before it could.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from promptflow_resume.progress import load_progress
from tests import support
from tests.support.flowproc import flow, flow_env

FIXTURES = support.FIXTURES / "engine"
PROGRESS = "run/progress.md"
RUN = ("run", "counter.prompt.md", "--recording", "counter.script.yaml", "--progress", PROGRESS)


def _folder(where: Path, window: int | None) -> Path:
    where.mkdir()
    workflow = (FIXTURES / "counter.prompt.md").read_text(encoding="utf-8")
    if window is not None:
        workflow = workflow.replace(
            "provider: scripted\n", f"provider: scripted\ncontext_window: {window}\n"
        )
    (where / "counter.prompt.md").write_text(workflow, encoding="utf-8")
    shutil.copy(FIXTURES / "counter.script.yaml", where / "counter.script.yaml")
    return where


def _status(where: Path) -> tuple[dict[str, Any], str]:
    as_json = flow("status", PROGRESS, "--json", cwd=where)
    assert as_json.returncode == 0, as_json.stderr
    text = flow("status", PROGRESS, cwd=where)
    assert text.returncode == 0, text.stderr
    data: dict[str, Any] = json.loads(as_json.stdout)
    return data, text.stdout


def test_status_counts_the_compactions_and_names_what_the_newest_covers(tmp_path: Path) -> None:
    where = _folder(tmp_path / "w", 280)
    # Killed right after step 2's summary was saved: stopped, compacted, a request to come.
    killed = flow(*RUN, cwd=where, env=flow_env(FLOW_CRASH_AT="compaction.recorded"))
    assert killed.returncode == -9, killed.stderr
    run, _ = load_progress(where / PROGRESS)
    summaries = [e for e in run.transcript if e.role == "compaction"]
    assert summaries and summaries[-1].covers is not None
    first, last = summaries[-1].covers
    data, text = _status(where)
    assert data["compactions"] == {"count": len(summaries), "covers": [first, last]}
    context = data["context"]
    assert context["window"] == 280
    # The summary stands in for what it covers: the request is back under the threshold
    # (0.8 of the window) it had passed, which is what made the run compact.
    assert 0 < context["tokens"] <= 0.8 * 280
    assert context["percent"] == round(100 * context["tokens"] / 280)
    assert (
        f"compactions: {len(summaries)} (entries {first}-{last} summarised)" in text
        and f"next request ≈ {context['tokens']:,} of a 280-token context window "
        f"({context['percent']}%)"
        in text
    )


def test_status_of_a_run_never_compacted(tmp_path: Path) -> None:
    where = _folder(tmp_path / "w", None)
    killed = flow(*RUN, cwd=where, env=flow_env(FLOW_CRASH_AT="engine.step_completed:1"))
    assert killed.returncode == -9, killed.stderr
    data, text = _status(where)
    assert data["compactions"] == {"count": 0, "covers": None}
    # The scripted model has no known window: the size alone.
    assert data["context"]["window"] is None and data["context"]["percent"] is None
    assert data["context"]["tokens"] > 0
    assert "compactions: none" in text
    assert f"next request ≈ {data['context']['tokens']:,} tokens (no context window known" in text


def test_status_of_a_completed_run_names_its_compactions_but_no_next_request(
    tmp_path: Path,
) -> None:
    where = _folder(tmp_path / "w", 280)
    done = flow(*RUN, cwd=where)
    assert done.returncode == 0, done.stderr
    data, text = _status(where)
    count = data["compactions"]["count"]
    assert count > 0  # the 280-token window made the run compact on its way
    assert f"compactions: {count} (entries " in text
    assert "next request" not in text  # a completed run sends none
    # Scripts still get the estimate.
    assert data["context"]["window"] == 280 and data["context"]["tokens"] > 0
