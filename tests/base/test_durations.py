"""One duration grammar for every option and field: `--timeout`, `max_seconds`, `--older-than`."""

from __future__ import annotations

from datetime import timedelta

import pytest

from promptflow_resume.base.durations import option_seconds, parse_age, parse_duration
from promptflow_resume.base.errors import InputError
from promptflow_resume.workflow import parse_workflow


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("10m", 600.0),
        ("1h30m", 5400.0),
        ("2d", 172800.0),
        ("1w", 604800.0),
        ("250ms", 0.25),
        (" 1H 30M ", 5400.0),
        ("1.5", 1.5),
    ],
)
def test_the_grammar(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert option_seconds("--timeout", text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5s", "5 weeks", "1e3", "nan", "0", "0s"])
def test_a_bad_timeout_names_the_option(text: str) -> None:
    with pytest.raises(InputError) as info:
        option_seconds("--timeout", text)
    assert info.value.message.startswith(f"--timeout {text!r} is not a duration")


def test_a_bare_age_counts_days_and_takes_the_same_units() -> None:
    assert parse_age("7") == timedelta(days=7)
    assert parse_age("1h30m") == timedelta(minutes=90)
    assert parse_age("0") == timedelta(0)


def test_the_workflow_budget_and_the_command_line_agree() -> None:
    workflow = parse_workflow("---\nbudget:\n  timeout: 2d\n---\nHello.\n", path="w.prompt.md")
    assert workflow.budget.max_seconds == option_seconds("--timeout", "2d") == 172800.0
