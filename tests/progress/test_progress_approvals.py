"""The ``approvals:`` of a progress file (docs/spec.md 4.17): round trip, schema, body view."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptflow_resume.base.errors import ProgressSchemaError
from promptflow_resume.progress import load_progress, parse, render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Approval, Run

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=60)
_ID = st.from_regex(r"call_[a-zA-Z0-9]{1,8}", fullmatch=True)


def _example() -> Run:
    run = example_run()
    for entry in run.transcript:
        entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    return run


def _held(call_id: str = "call_1", **extra: object) -> Approval:
    fields: dict[str, object] = {
        "tool": "create_file",
        "step": "report",
        "entry": 8,
        "preview": '{"path": "a.txt"}',
        "why": "approve: edit",
        **extra,
    }
    return Approval(call_id=call_id, **fields)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(_ID, min_size=1, max_size=3, unique=True),
    decision=st.sampled_from(["pending", "approved", "denied"]),
    preview=_TEXT,
    reason=st.one_of(st.none(), _TEXT.filter(bool)),
)
def test_approvals_round_trip(
    ids: list[str], decision: str, preview: str, reason: str | None
) -> None:
    run = _example()
    run.status = "awaiting_approval"
    run.approvals = [
        _held(i, preview=preview, decision=decision, by="Ann", at=run.created, host="box",
              reason=reason)
        for i in ids
    ]  # fmt: skip
    again, _ = parse(render(run), path="progress.md")
    assert again == run


def test_the_body_shows_pending_calls_and_how_to_decide() -> None:
    run = _example()
    run.status = "awaiting_approval"
    run.approvals = [_held("call_1"), _held("call_2", decision="approved", by="Ann")]
    text = render(run)
    assert "Tool calls waiting for approval" in text
    assert "`flow approve PROGRESS --call call_1`" in text
    assert "**approved** by Ann" in text


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  decision: pending", "  decision: maybe", "$.approvals[0].decision"),
        ("  why: 'approve: edit'\n", "", "$.approvals[0].why"),
    ],
)
def test_bad_approval_records_are_schema_errors(
    tmp_path: Path, old: str, new: str, field: str
) -> None:
    run = _example()
    run.approvals = [_held()]
    text = render(run)
    assert old in text
    path = tmp_path / "progress.md"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ProgressSchemaError) as caught:
        load_progress(path)
    assert caught.value.field == field
