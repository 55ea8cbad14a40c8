"""Golden invalid progress files: each must fail with its expected class, position, field and
words, through the library and through ``flow validate``, leaving every file untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from promptflow_resume.cli import main
from promptflow_resume.progress import load_progress, validate_files
from tests import support

FIXTURES = support.FIXTURES / "progress"
CASES = sorted(p.stem for p in (FIXTURES / "invalid").glob("*.expected"))


def _expected(name: str) -> dict[str, str]:
    text = (FIXTURES / "invalid" / f"{name}.expected").read_text(encoding="utf-8")
    return dict(line.split(": ", 1) for line in text.splitlines() if line)


def _copy(name: str, tmp_path: Path) -> Path:
    """The fixture (and its sidecar folder) in a temp folder; large files are made there."""
    want = _expected(name)
    target = tmp_path / f"{name}.md"
    if "generate" in want:
        with open(target, "wb") as handle:  # sparse: no 50 MB written to disk
            handle.truncate(int(want["generate"]))
    else:
        shutil.copyfile(FIXTURES / "invalid" / f"{name}.md", target)
    files = FIXTURES / "invalid" / f"{name}.files"
    if files.is_dir():
        shutil.copytree(files, tmp_path / f"{name}.files")
    return target


def _snapshot(folder: Path) -> dict[str, tuple[int, float]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_every_error_case_of_the_issue_has_a_golden_file() -> None:
    required = {
        "broken-yaml", "bad-status", "unknown-version", "newer-version", "missing-sidecar",
        "sidecar-hash", "sidecar-escape", "edited-digest", "truncated", "empty", "binary",
        "too-large", "alias-bomb",
    }  # fmt: skip
    assert required <= set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_golden_invalid_file(name: str, tmp_path: Path) -> None:
    want = _expected(name)
    path = _copy(name, tmp_path)
    before = _snapshot(tmp_path)
    # A case marked strict is read (kept, with a notice) without --strict.
    strict = want.get("strict") == "yes"
    if strict:
        assert validate_files([path]).files[0].valid
    error = validate_files([path], strict=strict).files[0].error
    assert error is not None
    assert type(error).__name__ == want["error"]
    assert error.exit_code == int(want["exit_code"])
    location = str(path)
    if want["line"] != "-":
        location += f":{want['line']}"
        if want["column"] != "-":
            location += f":{want['column']}"
    assert str(error).startswith(location + ": ")
    assert error.field == (None if want["field"] == "-" else want["field"])
    assert want["message"] in str(error)
    assert error.hint, "every error says how to fix it"
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("name", CASES)
def test_flow_validate_reports_one_paragraph_and_the_exit_code(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    want = _expected(name)
    path = _copy(name, tmp_path)
    before = _snapshot(tmp_path)
    code = main(["validate", *(["--strict"] if want.get("strict") == "yes" else []), str(path)])
    captured = capsys.readouterr()
    assert code == int(want["exit_code"])
    assert captured.out == ""
    assert captured.err.startswith(f"error: {path}")
    assert captured.err.count("\n") == 1  # one paragraph
    assert "Traceback" not in captured.err and want["message"] in captured.err
    assert _snapshot(tmp_path) == before


def test_valid_golden_files_load(tmp_path: Path) -> None:
    for path in sorted((FIXTURES / "valid").glob("*.md")):
        run, report = load_progress(path)
        assert run.run_id == "20261121-232529-release-a1b2"
        assert report.edited_entries == ([2] if path.stem == "hand-edited" else [])


def test_flow_validate_lists_valid_files_and_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    example = FIXTURES / "valid" / "example.md"
    edited = FIXTURES / "valid" / "hand-edited.md"
    assert main(["validate", str(example), str(edited)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{example}: valid (interrupted, 8 entries)"
    assert out[1] == f"{edited}: valid (interrupted, 8 entries)"
    assert out[2].startswith(f"  warning: {edited}:136: entry 2 (user, step inspect) was edited")


def test_flow_validate_json_and_mixed_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    example = FIXTURES / "valid" / "example.md"
    missing = tmp_path / "gone.md"
    assert main(["validate", "--json", str(example), str(missing)]) == 5
    results = json.loads(capsys.readouterr().out)
    assert [r["valid"] for r in results] == [True, False]
    assert results[0]["entries"] == 8 and results[0]["edited_entries"] == []
    assert results[1]["error"]["error"] == "FileNotFoundFlowError"


def test_flow_schema_prints_the_schema_files(capsys: pytest.CaptureFixture[str]) -> None:
    root = support.REPO / "schemas"
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == (root / "progress.schema.json").read_text(encoding="utf-8")
    assert main(["schema", "workflow"]) == 0
    assert capsys.readouterr().out == (root / "workflow.schema.json").read_text(encoding="utf-8")
    assert main(["schema", "nope"]) == 2
    assert "expected one of progress, workflow" in capsys.readouterr().err


def test_the_installed_command_runs_validate(tmp_path: Path) -> None:
    from tests.support.flowproc import flow

    path = _copy("bad-status", tmp_path)
    proc = flow("validate", str(path), cwd=tmp_path)
    assert proc.returncode == 4
    assert proc.stderr.startswith(f"error: {path}:4:9: $.status: expected one of running")
