"""``check_workflows``: the library behind ``flow check`` (files, folders, exit codes)."""

from __future__ import annotations

import shutil
from pathlib import Path

from promptflow_resume import check_workflows
from promptflow_resume.base.errors import EXIT_INVALID_FILE, EXIT_NOT_FOUND, EXIT_OK
from promptflow_resume.workflow import workflow_files
from tests import support

FIXTURES = support.FIXTURES / "workflows"


def test_a_folder_stands_for_the_workflow_files_directly_in_it(tmp_path: Path) -> None:
    for name in ("steps-mixed.prompt.md", "copilot-plain.prompt.md"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "notes.md").write_text("not a workflow\n", encoding="utf-8")
    (tmp_path / "deeper").mkdir()
    shutil.copy(FIXTURES / "tabs-setext.prompt.md", tmp_path / "deeper" / "x.prompt.md")
    assert [p.name for p in workflow_files(tmp_path)] == [
        "copilot-plain.prompt.md",
        "steps-mixed.prompt.md",
    ]
    report = check_workflows([tmp_path])
    assert report.exit_code == EXIT_OK
    assert [plan["path"] for plan in report.checked] == [
        str(tmp_path / "copilot-plain.prompt.md"),
        str(tmp_path / "steps-mixed.prompt.md"),
    ]
    document = report.to_dict()
    assert document["ok"] is True and document["workflows"] == report.plans
    assert set(document["tools"]) == {"offered", "editor-only", "unknown"}


def test_a_missing_file_outranks_an_invalid_one(tmp_path: Path) -> None:
    invalid = FIXTURES / "invalid" / "bad-duration.prompt.md"
    assert check_workflows([invalid]).exit_code == EXIT_INVALID_FILE
    report = check_workflows([invalid, tmp_path / "absent.prompt.md"])
    assert report.exit_code == EXIT_NOT_FOUND
    assert [plan["ok"] for plan in report.plans] == [False, False]
    assert report.plans[1]["diagnostics"][0]["code"] == "not-found"


def test_an_empty_folder_is_reported_once(tmp_path: Path) -> None:
    report = check_workflows([tmp_path])
    assert report.exit_code == EXIT_NOT_FOUND
    assert report.checked == []
    assert report.empty_folders == [f"no *.prompt.md files in the folder {tmp_path}."]
    assert report.to_dict()["ok"] is False
