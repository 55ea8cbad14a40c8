"""The score: Jaccard overlap x recency, the 0.35 threshold, ordering, top 3, exact match."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from promptflow_resume.detect import THRESHOLD, RunSummary, jaccard, rank, recency_factor
from promptflow_resume.detect.score import parse_time, score
from promptflow_resume.detect.summary import canonical_json
from tests.support.detect import NOW, iso

HASH = "sha256:v1:" + "11" * 32


@pytest.mark.parametrize(
    ("new", "stored", "expected"),
    [
        ({"api", "auth"}, {"api", "auth"}, 1.0),
        ({"api", "auth"}, {"api", "db"}, 1 / 3),
        ({"api", "auth", "db", "test"}, {"api"}, 0.25),
        ({"api"}, {"db"}, 0.0),
        (set(), {"db"}, 0.0),
        (set(), set(), 0.0),
    ],
)
def test_jaccard(new: set[str], stored: set[str], expected: float) -> None:
    assert jaccard(new, stored) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("age", "factor"),
    [
        (timedelta(seconds=-30), 1.00),  # clock skew: a time in the future counts as now
        (timedelta(0), 1.00),
        (timedelta(hours=23, minutes=59), 1.00),
        (timedelta(days=1), 1.00),
        (timedelta(days=1, seconds=1), 0.85),
        (timedelta(days=3), 0.85),
        (timedelta(days=3, seconds=1), 0.65),
        (timedelta(days=7), 0.65),
        (timedelta(days=8), 0.40),
        (timedelta(days=14), 0.40),
        (timedelta(days=14, seconds=1), 0.20),
        (timedelta(days=400), 0.20),
    ],
)
def test_recency_buckets(age: timedelta, factor: float) -> None:
    assert recency_factor(age) == factor


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-21T12:00:00Z", "2026-11-21T12:00:00+00:00"),
        ("2026-11-21T13:00:00+01:00", "2026-11-21T12:00:00+00:00"),
        ("2026-11-21T12:00:00", "2026-11-21T12:00:00+00:00"),
        ("yesterday", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_time(text: str | None, expected: str | None) -> None:
    parsed = parse_time(text)
    assert (parsed.isoformat() if parsed else None) == expected


@pytest.mark.parametrize(
    ("shared", "extra", "age_days", "kept"),
    [
        # 2 of 4 words, fresh: 0.5 -> offered
        (2, 2, 0, True),
        # 2 of 4 words, 5 days old: 0.5 * 0.65 = 0.325 -> below 0.35
        (2, 2, 5, False),
        # 7 of 20: exactly 0.35 fresh -> kept (>=)
        (7, 13, 0, True),
        # all shared but a month old: 1.0 * 0.2 -> dropped
        (3, 0, 30, False),
        # all shared, 10 days: 0.4 -> kept
        (3, 0, 10, True),
    ],
)
def test_threshold(shared: int, extra: int, age_days: float, kept: bool) -> None:
    new = {f"w{i}" for i in range(shared)}
    stored = new | {f"x{i}" for i in range(extra)}
    value = score(new, stored, timedelta(days=age_days))
    assert (value >= THRESHOLD) is kept


def summary(
    name: str,
    keywords: str,
    *,
    age: timedelta = timedelta(hours=1),
    status: str = "interrupted",
    workflow_hash: str = "sha256:v1:" + "22" * 32,
    inputs: dict[str, object] | None = None,
    owner_alive: bool | None = None,
) -> RunSummary:
    return RunSummary(
        path=Path(f"/runs/{name}/progress.md"),
        run_id=name,
        status=status,
        workflow_hash=workflow_hash,
        updated=iso(NOW - age),
        keywords=tuple(sorted(keywords.split())),
        inputs_json=canonical_json(inputs or {}),
        owner_alive=owner_alive,
        steps_done=1,
        steps_total=2,
    )


def ranked(
    summaries: list[RunSummary], keywords: str = "api auth db test", **kw: object
) -> list[str]:
    candidates, _ = rank(
        summaries,
        keywords.split(),
        workflow_hash=str(kw.get("workflow_hash", HASH)),
        inputs_json=canonical_json(kw.get("inputs", {})),
        now=NOW,
    )
    return [c.run_id for c in candidates]


def test_best_first_at_most_three() -> None:
    runs = [
        summary("half", "api auth x y"),  # 2/6 = 0.33 -> out
        summary("most", "api auth db"),  # 3/4 = 0.75
        summary("all", "api auth db test"),  # 1.0
        summary("all-old", "api auth db test", age=timedelta(days=2)),  # 0.85
        summary("two", "api auth"),  # 0.5
        summary("none", "frontend cache"),
    ]
    assert ranked(runs) == ["all", "all-old", "most"]


def test_ties_go_to_the_more_recent_run_then_the_path() -> None:
    runs = [
        summary("b-older", "api auth", age=timedelta(hours=5)),
        summary("a-newer", "api auth", age=timedelta(hours=1)),
        summary("c-same", "api auth", age=timedelta(hours=1)),
    ]
    assert ranked(runs, "api auth") == ["a-newer", "c-same", "b-older"]


@pytest.mark.parametrize(
    ("status", "owner_alive", "offered"),
    [
        ("interrupted", None, True),
        ("failed", None, True),
        ("timeout", None, True),
        ("budget_exhausted", None, True),
        ("needs_review", None, True),
        ("paused", None, True),
        ("awaiting_input", None, True),
        ("running", False, True),  # its process died: resumable
        ("running", True, False),  # a live process owns it
        ("completed", None, False),
        ("invalid", None, False),
    ],
)
def test_only_resumable_runs_are_offered(
    status: str, owner_alive: bool | None, offered: bool
) -> None:
    runs = [summary("r", "api auth", status=status, owner_alive=owner_alive)]
    assert ranked(runs, "api auth") == (["r"] if offered else [])


def test_exact_match_needs_same_hash_and_same_inputs() -> None:
    inputs = {"framework": "fastapi", "n": 3}
    runs = [
        summary("other-inputs", "api", workflow_hash=HASH, inputs={"framework": "flask", "n": 3}),
        summary("other-hash", "api", inputs=inputs),
        summary("same", "zzz", workflow_hash=HASH, inputs={"n": 3, "framework": "fastapi"}),
    ]
    candidates, exact = rank(
        runs, ["api"], workflow_hash=HASH, inputs_json=canonical_json(inputs), now=NOW
    )
    assert exact is not None and exact.run_id == "same" and exact.exact
    # the exact match leads even though its keywords share nothing (score 0)
    assert candidates[0].run_id == "same"
    assert exact.score == 0.0


def test_exact_match_prefers_the_most_recent_and_ignores_age() -> None:
    runs = [
        summary("old", "api", workflow_hash=HASH, age=timedelta(days=60)),
        summary("newer", "api", workflow_hash=HASH, age=timedelta(days=20)),
    ]
    candidates, exact = rank(runs, ["api"], workflow_hash=HASH, inputs_json="{}", now=NOW)
    assert exact is not None and exact.run_id == "newer"
    assert [c.run_id for c in candidates] == ["newer"]  # "old" scores 0.2: not offered


def test_exact_match_of_a_live_run_is_not_resumed() -> None:
    runs = [summary("live", "api", workflow_hash=HASH, status="running", owner_alive=True)]
    _, exact = rank(runs, ["api"], workflow_hash=HASH, inputs_json="{}", now=NOW)
    assert exact is None


def test_candidate_reports_matched_words_similarity_and_recency() -> None:
    runs = [summary("r", "api auth cache", age=timedelta(days=2))]
    candidates, _ = rank(runs, ["api", "auth", "db"], workflow_hash=HASH, inputs_json="{}", now=NOW)
    (c,) = candidates
    assert c.matched == ("api", "auth")
    assert c.similarity == pytest.approx(0.5)
    assert c.recency == 0.85
    assert c.score == pytest.approx(0.425)
    assert not c.exact
