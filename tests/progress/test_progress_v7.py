"""Format version 7: file snapshots (``snapshots:``, docs/spec.md 12) in the front matter."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptflow_resume.base.errors import ProgressSchemaError
from promptflow_resume.progress import FORMAT_VERSION, load_progress, parse, render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.filesnapshots import FileSnapshot, Snapshots
from promptflow_resume.progress.migrations import MIGRATIONS, v6_to_v7
from promptflow_resume.progress.model import Run
from tests import support

_PATH = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40)
_COMMIT = st.from_regex(r"[0-9a-f]{40}", fullmatch=True)


def _example() -> Run:
    run = example_run()
    for entry in run.transcript:
        entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    return run


@settings(max_examples=60, deadline=None)
@given(
    commits=st.lists(st.one_of(st.none(), _COMMIT), min_size=1, max_size=4),
    paths=st.lists(_PATH, max_size=4),
    renamed=st.lists(st.lists(_PATH, min_size=2, max_size=2), max_size=2),
    late=st.booleans(),
    more=st.integers(min_value=0, max_value=5),
)
def test_snapshots_round_trip(
    commits: list[str | None], paths: list[str], renamed: list[list[str]], late: bool, more: int
) -> None:
    run = _example()
    run.snapshots = Snapshots(
        root="../..",
        ref=f"refs/flow/{run.run_id}/snapshots",
        calls=[
            FileSnapshot(
                entry=i * 2,
                commit=c,
                call_id=f"call_{i}" if i else None,
                added=paths,
                modified=paths[:1],
                deleted=paths[1:],
                renamed=renamed,
                more=more,
                stat="+1 -0" if paths else "",
                late=late,
            )
            for i, c in enumerate(commits)
        ],
    )
    again, _ = parse(render(run), path="progress.md")
    assert again == run


def test_a_version_6_file_reads_as_a_run_without_snapshots() -> None:
    # The golden file a format 6 flow wrote (tests/fixtures/progress/formats/README.md).
    assert MIGRATIONS[6] is v6_to_v7
    golden = support.FIXTURES / "progress" / "formats" / "v6.md"
    assert "snapshots:" not in golden.read_text(encoding="utf-8")
    again, _ = load_progress(golden)
    assert again.snapshots is None
    assert render(again).startswith(f"---\nflow_progress: {FORMAT_VERSION}\n")


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ("commit: zz", "commit"),
        ("ref: refs/heads/main", "ref"),
        ("entry: -1", "entry"),
    ],
)
def test_bad_snapshot_records_are_schema_errors(tmp_path: Path, bad: str, field: str) -> None:
    run = _example()
    run.snapshots = Snapshots(
        root=".",
        ref=f"refs/flow/{run.run_id}/snapshots",
        calls=[FileSnapshot(entry=0, commit="a" * 40)],
    )
    text = render(run)
    key, _, _value = bad.partition(": ")
    good = {"commit": "a" * 40, "ref": f"refs/flow/{run.run_id}/snapshots", "entry": "0"}[key]
    path = tmp_path / "progress.md"
    path.write_text(text.replace(f"{key}: {good}", bad, 1))
    with pytest.raises(ProgressSchemaError) as caught:
        load_progress(path)
    assert field in str(caught.value)
