"""The progress format's versions are written in several places; they must say the same thing.

The table of formats in docs/spec.md 2.5, ``FORMAT_VERSION``/``FORMAT_MINOR``/``MIN_FLOW``
(``progress/versions.py``), the schema's ``flow_progress``, ``MIGRATIONS`` and the golden files
of ``tests/fixtures/progress/formats/`` (one per format and minor): so two changes cannot
claim one number, and no format goes without an upgrade and a golden file. The release's
version is pinned the same way in the changelog, the README and the examples a user copies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from promptflow_resume.base.release import VERSION
from promptflow_resume.progress.migrations import MIGRATIONS
from promptflow_resume.progress.versions import (
    FORMAT_MINOR,
    FORMAT_VERSION,
    MIN_FLOW,
    VERSION_PATTERN,
    version_tuple,
)
from tests import support

REPO = support.REPO
FORMATS = support.FIXTURES / "progress" / "formats"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n### ", start + len(heading))
    return text[start : end if end != -1 else None]


def _table(text: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the Markdown table whose header row starts ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


SPEC = _section(
    (REPO / "docs" / "spec.md").read_text(encoding="utf-8"),
    "### 2.5 Versions, compatibility and migrations",
)
FORMAT_ROWS = _table(SPEC, "| format | written by |")
MINOR_ROWS = _table(SPEC, "| minor | first written by |")


def _files(cell: str) -> list[str]:
    return re.findall(r"`([^`]+\.md)`", cell)


def _front(path: Path) -> dict[str, str]:
    head = path.read_text(encoding="utf-8").split("\n---\n", 1)[0]
    return dict(line.split(": ", 1) for line in head.splitlines()[1:4] if ": " in line)


def test_the_spec_lists_every_format_once_with_its_upgrade() -> None:
    numbers = [int(row[0]) for row in FORMAT_ROWS]
    assert numbers == list(range(1, FORMAT_VERSION + 1)), "docs/spec.md 2.5: one row a format"
    assert sorted(MIGRATIONS) == list(range(1, FORMAT_VERSION))
    for row in FORMAT_ROWS[1:]:
        number = int(row[0])
        name = f"v{number - 1}_to_v{number}"
        assert row[3] == f"`{name}`", f"format {number}'s upgrade in docs/spec.md 2.5"
        assert MIGRATIONS[number - 1].__name__ == name
    assert FORMAT_ROWS[0][3] == ""


def test_the_schema_is_of_the_current_format() -> None:
    schema = json.loads((REPO / "schemas" / "progress.schema.json").read_text(encoding="utf-8"))
    properties = schema["properties"]
    assert properties["flow_progress"]["const"] == FORMAT_VERSION
    assert re.fullmatch(properties["min_flow"]["pattern"], MIN_FLOW)
    assert f"format {FORMAT_VERSION}" in schema["title"]
    packaged = REPO / "promptflow_resume" / "schemas" / "progress.schema.json"
    assert packaged.read_bytes() == (REPO / "schemas" / "progress.schema.json").read_bytes()


def test_every_format_and_minor_has_its_golden_file() -> None:
    listed: set[str] = set()
    for row in FORMAT_ROWS:
        files = _files(row[4])
        assert files, f"format {row[0]} has no golden file in docs/spec.md 2.5"
        for name in files:
            assert _front(FORMATS / name)["flow_progress"] == row[0], name
        listed.update(files)
    minors = [row[0] for row in MINOR_ROWS]
    assert minors == [f"{FORMAT_VERSION}.{n}" for n in range(FORMAT_MINOR + 1)]
    for minor in minors:
        front = _front(FORMATS / f"v{minor}.md")
        assert f"{front['flow_progress']}.{front['flow_progress_minor']}" == minor
        listed.add(f"v{minor}.md")
    on_disk = {p.name for p in FORMATS.glob("v*.md") if not p.stem.endswith("-next")}
    assert on_disk == listed, "a golden file the spec's table does not name, or the reverse"


def test_the_current_format_is_resumed_from_the_release_that_introduced_it() -> None:
    assert FORMAT_ROWS[-1][1] == MIN_FLOW
    assert MINOR_ROWS[0][1] == MIN_FLOW
    assert VERSION_PATTERN.fullmatch(VERSION)
    for row in MINOR_ROWS:
        assert version_tuple(row[1]) <= version_tuple(VERSION), row


def test_the_release_is_named_alike_everywhere_a_user_reads_it() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## ([0-9][^\s]*)", changelog, re.MULTILINE)
    assert releases[0] == VERSION, "CHANGELOG.md: the newest release first"
    pins = {
        "docs/guide.md": f"rev: v{VERSION}",
        ".pre-commit-hooks.yaml": f"rev: v{VERSION}",
        "docs/examples/flow-pr.yml": f"uses: OWNER/promptflow-resume@v{VERSION}",
    }
    for name, pin in pins.items():
        text = (REPO / name).read_text(encoding="utf-8")
        assert pin in text, f"{name} pins another release than {VERSION}"
        assert len(re.findall(r"(?:rev: |@)v[0-9]+\.[0-9]+\.[0-9]+", text)) == 1, name
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(r for r in _table(readme, "| flow | writes | reads |") if r[0] == VERSION)
    assert row[1] == f"{FORMAT_VERSION}.{FORMAT_MINOR}"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'version = { attr = "promptflow_resume.base.release.VERSION" }' in pyproject
