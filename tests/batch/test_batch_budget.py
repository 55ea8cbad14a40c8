"""A batch's ``--max-cost`` holds across parallel workers (docs/spec.md 8.3).

Every model call of every row reserves its estimate on the batch's ledger (``budget.json``)
before it is made; the total spent may pass the limit only by the calls in flight when the
last call was admitted, at most one per worker. The server's replies cost a known amount
(100 input and 20 output tokens on gpt-4o: $0.00045), and the workflow's ``max_tokens: 1``
makes every estimate far below that, the worst case for the bound.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptflow_resume.batch import load_batch
from promptflow_resume.progress import load_progress
from tests.support.batch_server import WORKFLOW, RowServer, write_case
from tests.support.flowproc import flow, flow_env

#: What one reply of the row server costs: gpt-4o at $2.50 in and $10 out per million.
CALL_COST = (100 * 2.50 + 20 * 10.0) / 1_000_000
WORKERS = 4
LIMIT = 0.003

#: The batch workflow with a tiny output limit: estimates (input chars / 4, output at 1
#: token, priced as gpt-4o-mini) are tens of times below what each call really costs.
LOW_ESTIMATE = WORKFLOW.replace(
    "model: gpt-4o-mini\n", "model: gpt-4o-mini\nparams:\n  max_tokens: 1\n"
)


def _batch(folder: Path, server: RowServer, *extra: str) -> dict[str, object]:
    result = flow(
        *("batch", "triage.prompt.md", "--data", "rows.jsonl", "--out", "out"),
        *("--base-url", server.url, "--workers", str(WORKERS), "--json", *extra),
        cwd=folder,
        env=flow_env(OPENAI_API_KEY="sk-test-batch"),
        timeout=180,
    )
    assert result.returncode in (0, 1), result.stderr
    summary: dict[str, object] = json.loads(result.stdout)
    return summary


def _spent(folder: Path) -> float:
    """The batch's spending as the rows' own progress files record it."""
    rows = sorted((folder / "out" / "rows").glob("*/progress.md"))
    return sum(load_progress(p)[0].usage.cost_usd for p in rows)


def test_four_workers_overshoot_the_limit_by_at_most_one_call_each(tmp_path: Path) -> None:
    topics = [f"topic{n}" for n in range(16)]
    write_case(tmp_path, topics, LOW_ESTIMATE)
    # A slow server keeps all four workers in flight when the budget runs out.
    with RowServer(delay=0.3) as server:
        summary = _batch(tmp_path, server, "--max-cost", str(LIMIT))
    assert summary["status"] == "budget_exhausted"
    spent = _spent(tmp_path)
    # The bound: the limit plus one call per worker (each call's excess over its estimate
    # is below its cost).
    assert spent <= LIMIT + WORKERS * CALL_COST + 1e-9
    # The budget was used: the last refusal came when at most the estimates in flight
    # (under $0.0001) were left.
    assert spent >= LIMIT - 0.0001
    ledger = json.loads((tmp_path / "out" / "budget.json").read_text())
    assert ledger["reserved"] == {} and ledger["refused"] is True
    assert abs(ledger["spent_usd"] - spent) < 1e-9
    batch = load_batch(tmp_path / "out" / "batch.md")
    statuses = [r.status for r in batch.rows]
    assert "budget_exhausted" in statuses and "completed" in statuses
    stopped = next(r for r in batch.rows if r.status == "budget_exhausted")
    row_run = load_progress(tmp_path / "out" / stopped.progress)[0]
    assert "the batch's cost budget" in (row_run.reason or "")
    assert "resume the batch with a larger --max-cost" in (row_run.reason or "")
    # Every call the server answered is recorded in some row: none was made unpaid for.
    assert len(server.requests) * CALL_COST >= spent - 1e-9


def test_a_higher_limit_resumes_the_stopped_rows_and_completes(tmp_path: Path) -> None:
    write_case(tmp_path, [f"topic{n}" for n in range(6)], LOW_ESTIMATE)
    with RowServer(delay=0.1) as server:
        first = _batch(tmp_path, server, "--max-cost", "0.002")
        assert first["status"] == "budget_exhausted"
        result = flow(
            *("resume", "out/batch.md", "--max-cost", "1", "--base-url", server.url, "--json"),
            cwd=tmp_path,
            env=flow_env(OPENAI_API_KEY="sk-test-batch"),
            timeout=180,
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "completed"
    # Six rows of three calls each, every call paid once.
    assert abs(_spent(tmp_path) - 6 * 3 * CALL_COST) < 1e-9
    ledger = json.loads((tmp_path / "out" / "budget.json").read_text())
    assert ledger["limit_usd"] == 1.0 and ledger["refused"] is False


def test_without_max_cost_there_is_no_ledger_and_given_prices_reach_every_row(
    tmp_path: Path,
) -> None:
    write_case(tmp_path, ["a", "b"])
    with RowServer() as server:
        summary = _batch(tmp_path, server, "--price", "gpt-4o=1/1")
    assert summary["status"] == "completed"
    assert not (tmp_path / "out" / "budget.json").exists()
    assert load_batch(tmp_path / "out" / "batch.md").prices == {
        "gpt-4o": {"input": 1.0, "output": 1.0}
    }
    for row in (1, 2):
        run = load_progress(tmp_path / "out" / "rows" / f"{row:04d}" / "progress.md")[0]
        assert run.config.prices == {"gpt-4o": {"input": 1.0, "output": 1.0}}
        # Three calls of 100 + 20 tokens at $1 per million.
        assert abs(run.usage.cost_usd - 3 * 120 / 1_000_000) < 1e-12


@pytest.mark.slow  # starting Ray is ~10 s of both cores
def test_ray_tasks_share_the_same_ledger(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install '.[ray]')")
    write_case(tmp_path, [f"topic{n}" for n in range(8)], LOW_ESTIMATE)
    with RowServer(delay=0.3) as server:
        result = flow(
            *("batch", "triage.prompt.md", "--data", "rows.jsonl", "--out", "out"),
            *("--engine", "ray", "--base-url", server.url, "--workers", "2"),
            *("--max-cost", str(LIMIT)),
            cwd=tmp_path,
            env=flow_env(OPENAI_API_KEY="sk-test-batch", RAY_AUTH_MODE="disabled"),
            timeout=300,
        )
    assert result.returncode == 1, result.stderr
    assert load_batch(tmp_path / "out" / "batch.md").status == "budget_exhausted"
    spent = _spent(tmp_path)
    assert LIMIT - 0.0001 <= spent <= LIMIT + 2 * CALL_COST + 1e-9
    ledger = json.loads((tmp_path / "out" / "budget.json").read_text())
    assert ledger["reserved"] == {} and abs(ledger["spent_usd"] - spent) < 1e-9
