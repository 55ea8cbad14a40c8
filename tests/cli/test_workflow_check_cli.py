"""``flow check``: the plan a user reads, exit codes, and snapshots of ``--json`` plans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from promptflow_resume.cli import main
from tests import support

ROOT = support.REPO
EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "workflows").glob("*.prompt.md"))
# Plans pinned by snapshots (hashes included: a v1 hash must never change silently).
SNAPSHOT_PATHS = [
    "workflows/changelog-entry.prompt.md",
    "workflows/explain-file.prompt.md",
    "workflows/release-counter.prompt.md",
    "workflows/release-notes.prompt.md",
    "tests/fixtures/workflows/steps-mixed.prompt.md",
    "tests/fixtures/workflows/copilot-agent.prompt.md",
    "tests/fixtures/workflows/inputs-typed.prompt.md",
    "tests/fixtures/workflows/invalid/bad-provider.prompt.md",
    "tests/fixtures/workflows/invalid/unclosed-front-matter.prompt.md",
]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    # Plans show paths as given on the command line: run from the repository root.
    monkeypatch.chdir(ROOT)


@pytest.fixture
def json_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_examples_are_clean(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *EXAMPLES)
    assert code == 0, out
    assert err == ""
    assert "warning" not in out and "error" not in out
    # Several files: one line each and a tally (-v prints every plan).
    assert out.splitlines()[: len(EXAMPLES)] == [
        f"{path}: ok ({n} step{'s' if n > 1 else ''})"
        for path, n in zip(EXAMPLES, [1, 1, 1, 2, 3, 2], strict=True)
    ]
    assert f"{len(EXAMPLES)} files: {len(EXAMPLES)} ok." in out.splitlines()
    code, out, _ = run(capsys, "-v", *EXAMPLES)
    assert code == 0 and out.count("ok: no problems found") == len(EXAMPLES)


def test_plan_shows_steps_inputs_variables_and_tools(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "workflows/release-notes.prompt.md")
    assert code == 0
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[0] == "workflows/release-notes.prompt.md"
    assert lines[1].startswith("  workflow  release-notes — Draft release notes")
    assert "  model     openai · gpt-4o-mini (temperature=0.2)" in lines
    assert "  budget    max_cost_usd 0.25 · max_turns 20 · max_seconds 600" in lines
    assert "  steps (3)" in lines
    steps = [
        line.split() for line in lines if line.startswith("    ") and line.split()[0][0].isdigit()
    ]
    assert [s[:4] for s in steps] == [
        ["1.", "changes", "Changes", "prompt"],
        ["2.", "tests", "Tests", "command"],
        ["3.", "notes", "Notes", "prompt"],
    ]
    assert "tools: git_log, git_status · max_turns 6" in out
    assert "run: count_tests" in out and "tools: none" in out
    assert "audience  string  asked on a terminal, else 'developers'" in out
    assert "${step:changes}" in out and "output of step changes" in out
    assert "git_log      command, idempotent, timeout 30s" in out
    assert "read_file    built-in" in out


def test_warnings_keep_exit_zero_and_name_positions(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "tests/fixtures/workflows/copilot-agent.prompt.md")
    assert code == 0
    assert "  1 warning" in out
    assert (
        "    tests/fixtures/workflows/copilot-agent.prompt.md:6:46: warning: $.tools: "
        "editor-only tools not offered outside VS Code: `githubRepo`."
    ) in out
    assert "githubRepo       editor-only: not offered outside VS Code" in out
    assert (
        "edit/editFiles   -> read_file, create_file, replace_string_in_file, insert_text, "
        "delete_file, write_file"
    ) in out
    assert "fetch            -> fetch_webpage" in out


def test_errors_exit_four(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "workflows/explain-file.prompt.md",
        "tests/fixtures/workflows/invalid/step-ref-later.prompt.md",
    )
    assert code == 4
    lines = out.splitlines()
    assert lines[0] == "workflows/explain-file.prompt.md: ok (1 step)"  # still shown
    assert lines[1].startswith(
        "tests/fixtures/workflows/invalid/step-ref-later.prompt.md: FAILED (2 steps; 1 error); "
        "first: line 2: ${step:report} refers to a later step"
    )
    assert "2 files: 1 ok, 1 with errors; 1 error (step-ref 1)." in lines
    code, out, _ = run(
        capsys, "-v", "tests/fixtures/workflows/invalid/step-ref-later.prompt.md", "workflows"
    )
    assert code == 4 and "ok: no problems found" in out
    assert (
        "tests/fixtures/workflows/invalid/step-ref-later.prompt.md:2:34: error: "
        "${step:report} refers to a later step"
    ) in out


def test_unreadable_file_shows_only_its_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "tests/fixtures/workflows/invalid/bad-yaml.prompt.md")
    assert code == 4
    assert out.splitlines()[1:] == [
        "  1 error",
        "    tests/fixtures/workflows/invalid/bad-yaml.prompt.md:4:6: error: invalid YAML: "
        "did not find expected ',' or ']'. Fix the YAML syntax at that position (check "
        "indentation and quoting).",
    ]


def test_missing_file_exits_five(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "workflows/explain-file.prompt.md", "workflows/nope.prompt.md")
    assert code == 5
    assert (
        "workflows/nope.prompt.md: FAILED (1 error); first: the workflow file "
        "workflows/nope.prompt.md does not exist."
    ) in out


def test_an_empty_folder_says_it_holds_no_workflows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, str(tmp_path))
    assert code == 5 and out == ""
    assert err == f"error: no *.prompt.md files in the folder {tmp_path}.\n"
    code, out, _ = run(capsys, "--json", str(tmp_path))
    assert code == 5 and json.loads(out)["workflows"][0]["diagnostics"][0]["code"] == "not-found"


def test_a_folder_with_unknown_tools_says_the_builtins_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for n in range(3):
        (tmp_path / f"a{n}.prompt.md").write_text(
            "---\nmode: agent\ntools: ['frobnicate', 'zorp', 'codebase']\n---\nDo it.\n"
        )
    code, out, _ = run(capsys, str(tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{tmp_path}/a0.prompt.md: ok (1 step; 2 warnings); first:")
    assert "3 files: 0 ok, 3 with warnings; 6 warnings (unknown-tool 6)." in lines
    assert "  unknown      frobnicate (3), zorp (3)" in lines
    assert lines[-1].startswith("Built-in tools: read_file")
    assert sum("read_file," in line for line in lines if "Built-in" not in line) <= 1


def test_json_output_is_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "--json", *EXAMPLES, "tests/fixtures/workflows/invalid/empty-body.prompt.md"
    )
    assert code == 4
    data = json.loads(out)
    assert data["ok"] is False
    assert [p["path"] for p in data["workflows"]] == [
        *EXAMPLES,
        "tests/fixtures/workflows/invalid/empty-body.prompt.md",
    ]
    assert [p["ok"] for p in data["workflows"]] == [True] * len(EXAMPLES) + [False]


@pytest.mark.parametrize(
    "path", SNAPSHOT_PATHS, ids=lambda p: p.replace("/", "-").removesuffix(".prompt.md")
)
def test_json_plan_snapshot(
    path: str, capsys: pytest.CaptureFixture[str], json_snapshot: SnapshotAssertion
) -> None:
    code, out, _ = run(capsys, "--json", path)
    (plan,) = json.loads(out)["workflows"]
    assert code == (0 if plan["ok"] else 4)
    assert plan == json_snapshot


@pytest.mark.e2e
def test_installed_flow_check_runs_as_a_subprocess() -> None:
    from tests.support.flowproc import flow

    result = flow("check", "--json", *EXAMPLES, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    plans = json.loads(result.stdout)["workflows"]
    assert {p["path"] for p in plans} == set(EXAMPLES)
    assert all(p["warnings"] == 0 for p in plans)


def test_a_folder_checks_the_workflows_in_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--json", "workflows")
    assert code == 0
    paths = [p["path"] for p in json.loads(out)["workflows"]]
    assert paths == EXAMPLES


def test_a_folder_of_copilot_files_gets_a_tally_of_tools(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "tests/fixtures/copilot")
    assert code == 0
    tally = out[out.index("tools over 5 files") :]
    assert "  editor-only  problems (1), usages (1)\n" in tally
    assert "  unknown      none" in tally
    assert "run_in_terminal (1)" in tally and "replace_string_in_file (2)" in tally
    # Editor-only tools take one line per file, not one per tool.
    assert out.count("editor-only tools not offered outside VS Code") == 1
    code, out, _ = run(capsys, "--json", "tests/fixtures/copilot")
    assert json.loads(out)["tools"]["editor-only"] == {"problems": 1, "usages": 1}
