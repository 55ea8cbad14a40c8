"""Prices given with ``--price`` and ``--prices``: recorded in the run, used for costs and
budgets; a cost budget on a model without any price stops the run (docs/spec.md 5.4)."""

from __future__ import annotations

from pathlib import Path

from promptflow_resume.progress import load_progress
from tests.support.flowproc import flow

WORKFLOW = """\
---
provider: scripted
model: {model}
---
Answer briefly.

## Step 1: One
Say one.

## Step 2: Two
Say two.
"""

#: 1,000 input tokens of which 400 were read from the prompt cache, and 100 output tokens.
SCRIPT = """\
replies:
  - {content: "One.", usage: {input_tokens: 1000, output_tokens: 100, cached_tokens: 400}}
  - {content: "Two.", usage: {input_tokens: 1000, output_tokens: 100, cached_tokens: 400}}
"""


def _case(where: Path, model: str) -> None:
    (where / "wf.prompt.md").write_text(WORKFLOW.format(model=model), encoding="utf-8")
    (where / "script.yaml").write_text(SCRIPT, encoding="utf-8")


def _run(where: Path, *extra: str) -> tuple[int, str]:
    result = flow(
        *("run", "wf.prompt.md", "--recording", "script.yaml", "--progress", "p.md", "--new"),
        *extra,
        cwd=where,
    )
    return result.returncode, result.stderr


def test_a_cost_budget_on_a_model_without_a_price_stops_and_names_the_fix(
    tmp_path: Path,
) -> None:
    _case(tmp_path, "llama3")
    code, stderr = _run(tmp_path, "--max-cost", "1")
    assert code == 1, stderr
    run, _ = load_progress(tmp_path / "p.md")
    assert run.status == "budget_exhausted" and run.usage.turns == 0
    assert "model `llama3` has no price" in (run.reason or "")
    assert "--price llama3=0/0 for a local model" in (run.reason or "")
    # Declared free, the same run goes on and costs nothing; the price is recorded.
    resumed = flow("resume", "p.md", "--price", "llama3=0/0", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    run, _ = load_progress(tmp_path / "p.md")
    assert run.status == "completed" and run.usage.turns == 2
    assert run.usage.cost_usd == 0.0
    assert run.config.prices == {"llama3": {"input": 0.0, "output": 0.0}}
    assert "  prices:\n    llama3: {input: 0.0, output: 0.0}\n" in (tmp_path / "p.md").read_text()


def test_without_a_budget_an_unpriced_model_runs_and_shows_tokens_only(tmp_path: Path) -> None:
    _case(tmp_path, "llama3")
    code, stderr = _run(tmp_path)
    assert code == 0, stderr
    run, _ = load_progress(tmp_path / "p.md")
    assert run.usage.cost_usd == 0.0 and run.usage.input_tokens == 2000


def test_a_given_price_prices_cached_tokens_at_its_cached_rate(tmp_path: Path) -> None:
    _case(tmp_path, "my-model")
    code, stderr = _run(tmp_path, "--price", "my-model=1/2/0.5")
    assert code == 0, stderr
    run, _ = load_progress(tmp_path / "p.md")
    # Per call: 600 uncached x $1 + 400 cached x $0.50 + 100 out x $2, per million.
    assert abs(run.usage.cost_usd - 2 * 0.001) < 1e-12
    assert run.config.prices == {"my-model": {"input": 1.0, "output": 2.0, "cached_input": 0.5}}


def test_a_given_price_replaces_the_tables_and_a_prices_file_works_alike(tmp_path: Path) -> None:
    _case(tmp_path, "gpt-4o")
    (tmp_path / "prices.yaml").write_text(
        "gpt-4o: {input: 10, output: 20}\nother: {input: 1, output: 1}\n", encoding="utf-8"
    )
    code, stderr = _run(tmp_path, "--prices", "prices.yaml")
    assert code == 0, stderr
    run, _ = load_progress(tmp_path / "p.md")
    # No cached rate given: cached tokens cost the input rate. (1000 x 10 + 100 x 20) / 1e6.
    assert abs(run.usage.cost_usd - 2 * 0.012) < 1e-12
    assert set(run.config.prices) == {"gpt-4o", "other"}


def test_a_budget_holds_at_the_given_price(tmp_path: Path) -> None:
    _case(tmp_path, "my-model")
    # The first call's estimate (output at 4,096 tokens x $100 / million) is over $0.30.
    code, stderr = _run(tmp_path, "--price", "my-model=1/100", "--max-cost", "0.3")
    assert code == 1, stderr
    run, _ = load_progress(tmp_path / "p.md")
    assert run.status == "budget_exhausted" and run.usage.turns == 0
    assert "cost budget: $0.0000 spent of $0.30" in (run.reason or "")


def test_bad_prices_are_refused_before_anything_runs(tmp_path: Path) -> None:
    _case(tmp_path, "llama3")
    code, stderr = _run(tmp_path, "--price", "llama3=1")
    assert code == 9
    assert "expected MODEL=IN/OUT or MODEL=IN/OUT/CACHED" in stderr and "Traceback" not in stderr
    code, stderr = _run(tmp_path, "--price", "llama3=1/-2")
    assert code == 9 and "'-2' is not a price" in stderr
    (tmp_path / "prices.yaml").write_text("llama3: {input: 1, ouput: 2}\n", encoding="utf-8")
    code, stderr = _run(tmp_path, "--prices", "prices.yaml")
    assert code == 4 and "$.llama3.ouput" in stderr and "unknown key 'ouput'" in stderr
    code, stderr = _run(tmp_path, "--prices", "missing.yaml")
    assert code == 5 and "missing.yaml" in stderr
    assert not (tmp_path / "p.md").exists()
