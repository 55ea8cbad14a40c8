"""Format version 5: a run's model list and what each attempt did with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptflow_resume.base.errors import ProgressSchemaError
from promptflow_resume.progress import FORMAT_VERSION, load_progress, parse, render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Attempt, RefusedModel, Run

_NAME = st.from_regex(r"[a-z][a-z0-9.:-]{0,20}", fullmatch=True)
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=60)


def _example() -> Run:
    run = example_run()
    for entry in run.transcript:
        entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    return run


@settings(max_examples=60, deadline=None)
@given(
    models=st.lists(_NAME, min_size=2, max_size=4, unique=True),
    used=st.one_of(st.none(), _NAME),
    refused=st.lists(st.tuples(_NAME, _TEXT), max_size=3),
)
def test_models_and_refusals_round_trip(
    models: list[str], used: str | None, refused: list[tuple[str, str]]
) -> None:
    run = _example()
    run.config.model, run.config.models = models[0], models
    run.attempts = [
        Attempt(
            n=1,
            started=run.created,
            model=used,
            refused=[RefusedModel(model=m, message=t) for m, t in refused],
        )
    ]
    again, _ = parse(render(run), path="progress.md")
    assert again == run


def test_a_version_4_file_reads_as_one_model_with_nothing_refused(tmp_path: Path) -> None:
    run = _example()
    run.attempts = [Attempt(n=1, started=run.created)]
    text = render(run)
    assert "models:" not in text and "refused" not in text
    path = tmp_path / "progress.md"
    path.write_text(text.replace(f"flow_progress: {FORMAT_VERSION}\n", "flow_progress: 4\n", 1))
    again, _ = load_progress(path)
    assert again == run and again.config.models == [] and again.attempts[0].refused == []


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  provider: ", "  models: [only-one]\n  provider: ", "$.config.models"),
        ("- n: 1\n", "- n: 1\n  refused: [{model: m}]\n", "$.attempts[0].refused[0]"),
    ],
)
def test_bad_model_records_are_schema_errors(
    tmp_path: Path, old: str, new: str, field: str
) -> None:
    run = _example()
    run.attempts = [Attempt(n=1, started=run.created)]
    text = render(run)
    assert old in text
    path = tmp_path / "progress.md"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ProgressSchemaError) as info:
        load_progress(path)
    assert info.value.field is not None and info.value.field.startswith(field)


def test_the_model_is_tried_first_even_when_edited_to_one_the_list_lacks() -> None:
    run = _example()
    run.config.model, run.config.models = "a", ["a", "b", "c"]
    assert run.config.model_order() == ["a", "b", "c"]
    run.config.model = "b"
    assert run.config.model_order() == ["b", "a", "c"]
    run.config.model = "z"
    assert run.config.model_order() == ["z", "a", "b", "c"]
    run.config.models = []
    assert run.config.model_order() == ["z"]
