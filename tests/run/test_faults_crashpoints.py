"""SIGKILL at the crash points the counter workflow of ``test_crash.py`` never passes.

Sidecar files (large tool outputs, and the archives a rewound step leaves) are written with
their own temp-file-and-rename; a kill on either side of the rename must leave a loadable run
that resumes to the uninterrupted transcript, with no half-written or orphaned file left in
the sidecar folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from tests.support.faults import (
    HOSTILE,
    Transcript,
    copy_fixtures,
    flow,
    flow_env,
    transcript,
)

ARGS = ("run", "bigout.prompt.md", "--recording", "bigout.script.yaml", "--new")
POINTS = ("sidecar.after_temp", "sidecar.after_rename")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Transcript:
    where = copy_fixtures(
        tmp_path_factory.mktemp("ref"), "bigout.prompt.md", "bigout.script.yaml", source=HOSTILE
    )
    result = flow(*ARGS, "--progress", "run/progress.md", cwd=where)
    assert result.returncode == 0, result.stderr
    return transcript(where / "run" / "progress.md")


def _sidecars_are_exactly_the_linked_ones(progress: Path) -> None:
    run, _ = load_progress(progress)  # verifies every linked sidecar's hash too
    linked = {e.sidecar.split("/")[1] for e in run.transcript if e.sidecar}
    folder = progress.parent / "progress.files"
    present = {p.name for p in folder.iterdir() if not p.name.startswith("archive-")}
    assert present == linked, f"left in {folder}: {present - linked}"


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_around_a_sidecar_write_resumes_cleanly(
    tmp_path: Path, reference: Transcript, point: str
) -> None:
    where = copy_fixtures(tmp_path, "bigout.prompt.md", "bigout.script.yaml", source=HOSTILE)
    progress = where / "run" / "progress.md"
    killed = flow(
        *ARGS, "--progress", "run/progress.md", cwd=where, env=flow_env(FLOW_CRASH_AT=point)
    )
    assert killed.returncode == -9, killed.stderr
    load_progress(progress)
    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert transcript(progress) == reference
    _sidecars_are_exactly_the_linked_ones(progress)


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_while_archiving_a_rewound_step_resumes_cleanly(
    tmp_path: Path, reference: Transcript, point: str
) -> None:
    where = copy_fixtures(tmp_path, "bigout.prompt.md", "bigout.script.yaml", source=HOSTILE)
    progress = where / "run" / "progress.md"
    assert flow(*ARGS, "--progress", "run/progress.md", cwd=where).returncode == 0
    # A person sets the last step back to pending: its entries are archived on resume.
    text = progress.read_text(encoding="utf-8")
    edited = text.replace(
        "  summarize:\n    status: completed", "  summarize:\n    status: pending"
    )
    assert edited != text
    progress.write_text(edited, encoding="utf-8")
    before = progress.read_bytes()
    killed = flow("resume", "run/progress.md", cwd=where, env=flow_env(FLOW_CRASH_AT=point))
    assert killed.returncode == -9, killed.stderr
    assert progress.read_bytes() == before  # nothing was folded before the archive was safe
    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert transcript(progress) == reference
    assert list((progress.parent / "progress.files").glob("archive-*"))
    _sidecars_are_exactly_the_linked_ones(progress)
