"""SKILL.md files: loading real ones, every rule of the format as a positioned diagnostic,
the digest, discovery order and the records a run keeps (docs/spec.md 1.10)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from promptflow_resume.base import yamlio
from promptflow_resume.workflow.skillfile import load_skill, skill_schema
from promptflow_resume.workflow.skillset import (
    FoundSkills,
    changed_skills,
    find_skills,
    listed_skills,
    loaded_skill,
    skill_notes,
    skills_block,
)

SKILLS = Path(__file__).resolve().parents[1] / "fixtures" / "skills"


def write_skill(root: Path, folder: str, front: str, body: str = "Do the thing.\n") -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["async-profiler", "conventional-commits-enforcer"])
def test_real_skills_load_without_problems(name: str) -> None:
    skill, diagnostics = load_skill(SKILLS / name / "SKILL.md")
    assert diagnostics == ()
    assert skill is not None and skill.name == name
    assert skill.folder == (SKILLS / name).resolve()
    assert skill.body.startswith("# ") and len(skill.digest) == 16
    assert skill.model_invocable and skill.user_invocable


def test_a_skills_fields_and_files_are_read() -> None:
    skill, _ = load_skill(SKILLS / "async-profiler" / "SKILL.md")
    assert skill is not None
    assert skill.files == ("scripts/analyze_collapsed.py",)
    assert skill.compatibility == "Requires Python 3.7+ for the analyze_collapsed.py script."
    # A YAML '' inside single quotes is one quote; whitespace runs become one space.
    assert "what's causing my CPU hotspot" in skill.description


def test_the_real_skills_front_matter_fits_the_published_schema() -> None:
    validator = Draft202012Validator(skill_schema())
    for path in SKILLS.glob("*/SKILL.md"):
        front = path.read_text(encoding="utf-8").split("---\n")[1]
        assert list(validator.iter_errors(yamlio.load(front))) == []


@pytest.mark.parametrize(
    ("folder", "front", "where", "field", "message"),
    [
        ("pdf", "name: pdf\ndescription: ''\n", (3, 14), "$.description", "is empty"),
        ("pdf", "name: pdf\n", (2, 1), "$.description", "a skill needs `description`"),
        ("pdf", "description: d\n", (2, 1), "$.name", "a skill needs `name`"),
        ("pdf", "name: ''\ndescription: d\n", (2, 7), "$.name", "`name` is empty"),
    ],
)
def test_a_skill_without_name_or_description_is_an_error_at_its_position(
    tmp_path: Path,
    folder: str,
    front: str,
    where: tuple[int, int],
    field: str,
    message: str,
) -> None:
    path = write_skill(tmp_path, folder, front)
    skill, diagnostics = load_skill(path)
    assert skill is None
    errors = [d for d in diagnostics if d.severity == "error"]
    assert len(errors) == 1, errors
    (error,) = errors
    assert (error.line, error.column, error.field) == (*where, field)
    assert message in error.message
    assert str(error).startswith(f"{path}:{where[0]}:{where[1]}: error: {field}: ")


@pytest.mark.parametrize(
    ("folder", "front", "where", "field", "message"),
    [
        (
            "PDF",
            "name: PDF\ndescription: d\n",
            (2, 7),
            "$.name",
            "`name` may hold only lowercase letters, digits and hyphens",
        ),
        ("-pdf", "name: -pdf\ndescription: d\n", (2, 7), "$.name", "no hyphen at the start"),
        ("a--b", "name: a--b\ndescription: d\n", (2, 7), "$.name", "twice in a row"),
        (
            "x" * 65,
            f"name: {'x' * 65}\ndescription: d\n",
            (2, 7),
            "$.name",
            "`name` is longer than 64 characters; shorten it (it has 65 characters)",
        ),
        (
            "pdf",
            "name: pdf\ndescription: " + "d" * 1025 + "\n",
            (3, 14),
            "$.description",
            "`description` is longer than 1,024 characters; shorten it (details belong in the "
            "body) (it has 1,025 characters)",
        ),
        (
            "pdf-tools",
            "name: pdf\ndescription: d\n",
            (2, 7),
            "$.name",
            "the skill's name `pdf` differs from its folder's name `pdf-tools`",
        ),
        (
            "pdf",
            "name: pdf\ndescription: d\nmetadata:\n  version: 2\n",
            (5, 12),
            "$.metadata.version",
            "2 is not of type 'string'; flow does not read `metadata`",
        ),
        (
            "pdf",
            "name: pdf\ndescription: d\ndisable-model-invocation: 'yes'\n",
            (4, 27),
            "$.disable-model-invocation",
            "is not of type 'boolean'; the key is ignored",
        ),
        (
            "pdf",
            "name: pdf\ndescription: d\nallowed-tools: {Read: true}\n",
            (4, 16),
            "$.allowed-tools",
            "the key is ignored",
        ),
    ],
)
def test_the_formats_finer_rules_are_warnings_and_the_skill_loads(
    tmp_path: Path,
    folder: str,
    front: str,
    where: tuple[int, int],
    field: str,
    message: str,
) -> None:
    # VS Code and Claude Code load these skills; flow does too, and says what is off (issue
    # 43: 9 of the public collection's 402 skills were refused for such details).
    path = write_skill(tmp_path, folder, front)
    skill, diagnostics = load_skill(path)
    assert skill is not None
    assert skill.name == front.split("\n")[0].removeprefix("name: ")
    (warning,) = diagnostics
    assert warning.severity == "warning" and warning.code == "skill-format"
    assert (warning.line, warning.column, warning.field) == (*where, field)
    assert message in warning.message


@pytest.mark.parametrize(
    ("written", "tools"),
    [
        ("Bash(git:*) Read", ("Bash(git:*)", "Read")),
        ("Read, Grep, Bash(git diff:*)", ("Read", "Grep", "Bash(git diff:*)")),
        ("[Read, Grep]", ("Read", "Grep")),
        ("\n  - Read\n  - mcp__ctx__query", ("Read", "mcp__ctx__query")),
    ],
)
def test_allowed_tools_as_a_text_or_a_yaml_list(
    tmp_path: Path, written: str, tools: tuple[str, ...]
) -> None:
    front = f"name: pdf\ndescription: d\nallowed-tools: {written}\n"
    skill, diagnostics = load_skill(write_skill(tmp_path, "pdf", front))
    assert diagnostics == () and skill is not None
    assert skill.allowed_tools == tools


def test_several_problems_are_all_reported(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "tools", "name: Tools\ndescription: ''\n")
    _, diagnostics = load_skill(path)
    found = [(d.severity, d.line, d.field) for d in diagnostics]
    assert found == [("warning", 2, "$.name"), ("error", 3, "$.description")]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("# Just a body\n", 1, "starts with front matter between `---` lines"),
        ("---\nname: x\n", 1, "is never closed"),
        ("---\nname: [x\ndescription: d\n---\n", 3, ""),
        ("---\n- a list\n---\n", 2, "must be a mapping"),
    ],
)
def test_broken_files_are_positioned_errors(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = tmp_path / "x" / "SKILL.md"
    path.parent.mkdir()
    path.write_text(text)
    skill, diagnostics = load_skill(path)
    assert skill is None
    assert diagnostics[0].severity == "error" and diagnostics[0].line == line
    assert message in diagnostics[0].message


def test_a_missing_file_is_not_found(tmp_path: Path) -> None:
    _, diagnostics = load_skill(tmp_path / "x" / "SKILL.md")
    assert [d.code for d in diagnostics] == ["not-found"]


def test_unknown_keys_are_warnings_and_host_keys_are_read(tmp_path: Path) -> None:
    front = (
        "name: pdf\ndescription: d\nlicense: MIT\nallowed-tools: Bash(git:*) Read\n"
        "user-invokable: false\ndisable-model-invocation: true\nmodel: gpt-5\n"
    )
    skill, diagnostics = load_skill(write_skill(tmp_path, "pdf", front))
    assert skill is not None
    assert [(d.severity, d.line, d.field) for d in diagnostics] == [("warning", 8, "$.model")]
    assert skill.license == "MIT"
    assert skill.allowed_tools == ("Bash(git:*)", "Read")
    assert not skill.user_invocable and not skill.model_invocable


def test_the_digest_covers_every_file_of_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "async-profiler"
    shutil.copytree(SKILLS / "async-profiler", folder)
    before, _ = load_skill(folder / "SKILL.md")
    (tmp_path / "elsewhere.txt").write_text("not part of the skill")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "x").write_text("hidden folders are not part of it either")
    same, _ = load_skill(folder / "SKILL.md")
    script = folder / "scripts" / "analyze_collapsed.py"
    script.write_text(script.read_text() + "# changed\n")
    changed, _ = load_skill(folder / "SKILL.md")
    assert before is not None and same is not None and changed is not None
    assert before.digest == same.digest != changed.digest
    (folder / "references").mkdir()
    (folder / "references" / "setup.md").write_text("Install it.\n")
    added, _ = load_skill(folder / "SKILL.md")
    assert added is not None and added.digest != changed.digest
    assert added.files == ("references/setup.md", "scripts/analyze_collapsed.py")


def test_discovery_order_and_shadowing(tmp_path: Path) -> None:
    work = tmp_path / "work"
    home = tmp_path / "home"
    extra = tmp_path / "extra"
    write_skill(extra, "review", "name: review\ndescription: from --skills\n")
    write_skill(work / ".github" / "skills", "review", "name: review\ndescription: github\n")
    write_skill(work / ".claude" / "skills", "lint", "name: lint\ndescription: claude\n")
    write_skill(work / ".agents" / "skills", "lint", "name: lint\ndescription: agents\n")
    write_skill(home / ".copilot" / "skills", "notes", "name: notes\ndescription: user\n")
    write_skill(home / ".agents" / "skills", "broken", "name: broken\ndescription: ''\n")
    found = find_skills(work, [extra], home=home)
    assert [(s.name, s.description, s.source) for s in found.skills] == [
        ("review", "from --skills", "option"),
        ("lint", "claude", "workspace"),
        ("notes", "user", "user"),
    ]
    assert [p.parent.parent.parent.name for p in found.shadowed] == [".github", ".agents"]
    assert [d.field for d in found.diagnostics if d.severity == "error"] == ["$.description"]


def test_a_skills_dir_may_be_one_skills_folder(tmp_path: Path) -> None:
    found = find_skills(tmp_path, [SKILLS / "async-profiler"], home=tmp_path / "nohome")
    assert [s.name for s in found.skills] == ["async-profiler"]


def test_the_block_lists_offered_skills_and_reads_back(tmp_path: Path) -> None:
    write_skill(tmp_path / ".github/skills", "a", "name: a\ndescription: 'First\n  line'\n")
    write_skill(
        tmp_path / ".github/skills",
        "b",
        "name: b\ndescription: x\ndisable-model-invocation: true\n",
    )
    found = find_skills(tmp_path, home=tmp_path / "nohome")
    (a, b) = found.skills
    text = skills_block(found.skills)
    assert f"- `a` (sha256:{a.digest}): First line" in text
    assert "`b`" not in text
    assert listed_skills("Context.\n\n" + text) == {"a": a.digest}
    assert skills_block([b]) == ""
    assert changed_skills({"a": a.digest}, found) == []
    assert changed_skills({"a": "0" * 16, "gone": "1" * 16}, found) == [
        "a (changed)",
        "gone (removed)",
    ]
    assert changed_skills({}, found) == ["a (added)"]


def test_notes_on_loaded_skills(tmp_path: Path) -> None:
    write_skill(tmp_path / ".github/skills", "a", "name: a\ndescription: d\n")
    found = find_skills(tmp_path, home=tmp_path / "nohome")
    (a,) = found.skills
    loads = [
        (5, f"Skill `a` (sha256:{a.digest}) from `x`\n\nbody"),
        (9, "Skill `a` (sha256:0123456789abcdef) from `x`\n\nbody"),
        (12, "Skill `z` (sha256:0123456789abcdef) from `x`\n\nbody"),
        (14, "error: there is no skill named `q`"),
    ]
    assert loaded_skill(loads[0][1]) == ("a", a.digest)
    assert loaded_skill(loads[3][1]) is None
    assert skill_notes(None, loads, found) == [
        f"skill `a` loaded in entry 9 (sha256:0123456789abcdef) changed since (now "
        f"sha256:{a.digest}); the model keeps the recorded text until it loads the skill again",
        "skill `z` loaded in entry 12 (sha256:0123456789abcdef) is gone now; the model keeps "
        "the recorded text, and loading it again fails",
    ]
    assert skill_notes(skills_block(found.skills), [], found) == []
    assert skill_notes("no skills were listed", [], FoundSkills()) == []


def test_the_schema_file_is_valid_json_schema() -> None:
    schema = json.loads(
        (Path(__file__).resolve().parents[2] / "schemas" / "skill.schema.json").read_text()
    )
    Draft202012Validator.check_schema(schema)
    assert schema == skill_schema()


def test_the_name_pattern_is_the_schemas() -> None:
    from promptflow_resume.workflow.skillfile import NAME_PATTERN

    assert skill_schema()["properties"]["name"]["pattern"] == f"^{NAME_PATTERN.pattern}$"
