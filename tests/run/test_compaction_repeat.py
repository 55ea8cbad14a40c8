"""A window too small for the turns a step needs: compaction does not summarise one summary
again and again (each would be a model call that frees nothing).

Real runs of the counter workflow with the scripted provider, its summaries compacting it.
"""

from __future__ import annotations

import json
from pathlib import Path

from promptflow_resume.progress import load_progress
from tests import support
from tests.support.flowproc import flow, flow_env

FIXTURES = support.FIXTURES / "engine"


def test_a_lone_summary_is_not_summarised_again(tmp_path: Path) -> None:
    workflow = (FIXTURES / "counter.prompt.md").read_text(encoding="utf-8")
    workflow = workflow.replace("provider: scripted\n", "provider: scripted\ncontext_window: 260\n")
    (tmp_path / "counter.prompt.md").write_text(workflow, encoding="utf-8")
    script = (FIXTURES / "counter.script.yaml").read_text(encoding="utf-8")
    answer = json.dumps({"choice": "continue", "reason": "the bump only appends"})
    script += "decisions: " + json.dumps([{"content": answer}]) + "\n"
    (tmp_path / "counter.script.yaml").write_text(script, encoding="utf-8")
    # Killed with a bump in flight, resumed with a decision: the resume's note and the
    # decision leave little of the window to the turns after the first summary.
    args = ("run", "counter.prompt.md", "--recording", "counter.script.yaml")
    killed = flow(
        *args,
        "--progress",
        "run/progress.md",
        cwd=tmp_path,
        env=flow_env(FLOW_CRASH_AT="engine.tool_ran:1"),
    )
    assert killed.returncode == -9, killed.stderr
    result = flow("resume", "run/progress.md", "--decide", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run, _ = load_progress(tmp_path / "run" / "progress.md")
    summaries = [e for e in run.transcript if e.role == "compaction"]
    assert summaries  # the window is small enough to compact
    by_id = {e.id: e for e in run.transcript}
    for summary in summaries:
        assert summary.covers is not None
        first, last = summary.covers
        covered = [by_id[i] for i in range(first, last + 1) if i in by_id and i < summary.id]
        # Every summary stands for something no earlier summary already covers exactly.
        earlier = [s.covers for s in summaries if s.id < summary.id]
        assert summary.covers not in earlier, (summary.id, summary.covers, earlier)
        assert any(e.role != "compaction" for e in covered)
    assert result.stderr.count("compacting entries") == len(summaries)
