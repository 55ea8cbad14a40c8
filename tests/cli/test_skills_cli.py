"""``flow skills``, ``flow check SKILL.md`` and the run options, as a user sees them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.flowproc import flow

SKILLS = Path(__file__).resolve().parents[1] / "fixtures" / "skills"


def workspace(where: Path) -> Path:
    skills = where / ".github" / "skills"
    skills.mkdir(parents=True)
    shutil.copytree(SKILLS / "async-profiler", skills / "async-profiler")
    broken = skills / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("---\nname: broken\n---\nBody.\n")
    return where


def test_flow_skills_lists_the_skills_and_names_the_broken_ones(tmp_path: Path) -> None:
    where = workspace(tmp_path / "w")
    extra = tmp_path / "extra"
    shutil.copytree(
        SKILLS / "conventional-commits-enforcer", extra / "conventional-commits-enforcer"
    )
    done = flow("skills", "--skills", str(extra), cwd=where)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("conventional-commits-enforcer  (option, sha256:")
    assert lines[0].endswith(", 1 file besides SKILL.md)")
    assert (
        lines[1]
        == f"  {(extra / 'conventional-commits-enforcer').resolve()}/SKILL.md  [user-invocable]"
    )
    assert any(line.startswith("async-profiler  (workspace, sha256:") for line in lines)
    assert "  .github/skills/async-profiler/SKILL.md  [user-invocable]" in lines
    assert done.stderr == (
        f"skipped: {(where / '.github/skills/broken/SKILL.md').resolve()}:2:1: error: "
        "$.description: a skill needs `description`: what it does and when to use it (what "
        "the model is told).\n"
    )


def test_flow_skills_json(tmp_path: Path) -> None:
    where = workspace(tmp_path / "w")
    done = flow("skills", str(where), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (skill,) = data["skills"]
    assert skill["name"] == "async-profiler" and skill["source"] == "workspace"
    assert skill["path"] == ".github/skills/async-profiler/SKILL.md"
    assert skill["hash"].startswith("sha256:") and skill["files"] == [
        "scripts/analyze_collapsed.py"
    ]
    assert skill["model_invocable"] is True
    assert [p["field"] for p in data["problems"]] == ["$.description"]
    assert [s["source"] for s in data["searched"]] == ["workspace"] * 3 + ["user"] * 3


def test_flow_skills_of_a_missing_folder_exits_5(tmp_path: Path) -> None:
    done = flow("skills", "nowhere", cwd=tmp_path)
    assert done.returncode == 5
    assert (
        done.stderr
        == "error: there is no folder nowhere; give the workspace whose skills to list.\n"
    )


def test_flow_check_validates_a_skill_file(tmp_path: Path) -> None:
    where = workspace(tmp_path / "w")
    good = flow("check", ".github/skills/async-profiler/SKILL.md", cwd=where)
    assert good.returncode == 0, good.stdout
    assert good.stdout.splitlines()[1].startswith("  skill     async-profiler — Install, run")
    assert good.stdout.splitlines()[-1] == "  ok: no problems found"
    bad = flow("check", ".github/skills/broken/SKILL.md", "--json", cwd=where)
    assert bad.returncode == 4
    (plan,) = json.loads(bad.stdout)["workflows"]
    assert plan["kind"] == "skill" and not plan["ok"]
    found = [(d["line"], d["column"], d["field"]) for d in plan["diagnostics"]]
    assert found == [(2, 1, "$.description")]
    missing = flow("check", "nowhere/SKILL.md", cwd=where)
    assert missing.returncode == 5


def test_flow_check_of_a_folder_checks_its_skills(tmp_path: Path) -> None:
    where = workspace(tmp_path / "w")
    done = flow("check", ".", cwd=where)
    assert done.returncode == 4
    assert done.stdout.splitlines()[:2] == [
        ".github/skills/async-profiler/SKILL.md: ok (skill)",
        ".github/skills/broken/SKILL.md: FAILED (skill; 1 error); first: line 2: a skill needs "
        "`description`: what it does and when to use it (what the model is told).",
    ]


def test_run_and_resume_explain_the_skill_options(tmp_path: Path) -> None:
    for command in ("run", "resume"):
        text = " ".join(flow(command, "--help", cwd=tmp_path).stdout.split())
        assert "--skills DIR" in text and "--no-skills" in text
