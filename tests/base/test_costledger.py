"""The shared cost ledger: admission, settling, dead owners, and processes racing on it."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from promptflow_resume.base.costledger import CostLedger
from promptflow_resume.base.errors import InvalidFileError


def test_a_call_is_admitted_only_when_spent_held_and_estimate_fit(tmp_path: Path) -> None:
    ledger = CostLedger(tmp_path / "budget.json", owner="row1")
    ledger.reset(1.0, 0.25)
    first = ledger.reserve(0.5)
    assert first is not None
    # 0.25 spent + 0.5 held + 0.3 > 1.0: refused, and the ledger says the budget is used up.
    assert ledger.reserve(0.3) is None
    state = ledger.read()
    assert state.refused and state.exhausted() and state.held == 0.5
    ledger.settle(first, 0.75)  # more than its estimate: spent passes what was admitted
    state = ledger.read()
    assert state.reserved == {} and state.spent_usd == 1.0
    # A new limit (a resume with a larger --max-cost) starts afresh.
    ledger.reset(2.0, 1.0)
    assert not ledger.read().exhausted()
    assert ledger.reserve(1.0) is not None


def test_a_dead_owners_reservations_count_as_spent(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    CostLedger(path, owner="batch").reset(1.0, 0.0)
    assert CostLedger(path, owner="row3").reserve(0.2) is not None
    assert CostLedger(path, owner="row30").reserve(0.1) is not None
    CostLedger(path, owner="batch").release_owner("row3")
    state = CostLedger(path, owner="batch").read()
    assert state.spent_usd == pytest.approx(0.2)
    assert list(state.reserved) and all(k.startswith("row30#") for k in state.reserved)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "not valid JSON"),
        ('{"flow_budget": 2}', "format 1"),
        ('{"flow_budget": 1, "limit_usd": NaN, "spent_usd": 0}', "'limit_usd'"),
        ('{"flow_budget": 1, "limit_usd": 1, "spent_usd": "x"}', "'spent_usd'"),
    ],
)
def test_a_broken_ledger_is_refused_not_read_as_an_empty_budget(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "budget.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidFileError, match=words):
        CostLedger(path, owner="row1").reserve(0.0)


def _spend(path: str, owner: str, estimate: float, actual: float, out: object) -> None:
    ledger = CostLedger(path, owner=owner)
    calls = 0
    while (held := ledger.reserve(estimate)) is not None:
        ledger.settle(held, actual)
        calls += 1
    out.put(calls)  # type: ignore[attr-defined]


def test_four_processes_racing_stay_within_one_call_each(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    limit, estimate, actual = 0.01, 0.0001, 0.0005  # every call costs 5x its estimate
    CostLedger(path, owner="batch").reset(limit, 0.0)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    procs = [
        context.Process(target=_spend, args=(str(path), f"row{n}", estimate, actual, results))
        for n in range(4)
    ]
    for proc in procs:
        proc.start()
    calls = sum(results.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["reserved"] == {} and doc["refused"] is True
    assert doc["spent_usd"] == pytest.approx(calls * actual)
    assert limit - estimate < doc["spent_usd"] <= limit + 4 * actual
