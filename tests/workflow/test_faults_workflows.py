"""Workflows with bad input, as ``flow run`` and ``flow check`` meet them.

Each case must end before anything runs or is written: one paragraph naming the file (and the
line and column where there is one) and how to fix it, the documented exit code, the workflow
file byte-for-byte as it was, no runs folder, no command run. The library-level checks of the
same rules are in ``test_workflow_invalid.py``; this is what a user sees.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.faults import assert_clean_error, flow, flow_here, snapshot

#: A command every case declares, so a wrongly started run would leave ``ran.txt``.
TOUCH = """commands:
  touch:
    description: Leave a trace
    argv: ["sh", "-c", "echo ran >> ran.txt"]
"""


def _workflow(front: str, body: str) -> str:
    return f"---\nprovider: scripted\n{front}---\n{body}"


CASES = [
    # (id, workflow text, extra run arguments, exit code, words in the message)
    (
        "undeclared-variable",
        _workflow(TOUCH, "Deploy ${input:target} now.\n"),
        (),
        9,
        ("target", "--input"),
    ),
    (
        "undeclared-variable-with-inputs-block",
        _workflow(
            TOUCH + "inputs:\n  region: {type: string, default: eu}\n",
            "Deploy ${input:target} to ${input:region}.\n",
        ),
        (),
        9,
        ("target",),
    ),
    (
        "wrong-input-type",
        _workflow(TOUCH + "inputs:\n  count: {type: integer}\n", "Make ${input:count}.\n"),
        ("--input", "count=lots"),
        9,
        ("count", "integer"),
    ),
    (
        "not-one-of-the-choices",
        _workflow(
            TOUCH + "inputs:\n  env: {type: string, choices: [dev, prod]}\n", "Go ${input:env}.\n"
        ),
        ("--input", "env=staging"),
        9,
        ("env", "dev"),
    ),
    (
        "unknown-input",
        _workflow(TOUCH, "Hello.\n"),
        ("--input", "nope=1"),
        9,
        ("nope",),
    ),
    (
        "duplicate-step-ids",
        _workflow(TOUCH, "## Step 1: One {#same}\nA.\n\n## Step 2: Two {#same}\nB.\n"),
        (),
        4,
        ("w.prompt.md:11:1", "same"),
    ),
    (
        "circular-step-references",
        _workflow(TOUCH, "## Step 1: A\nUse ${step:b}.\n\n## Step 2: B\nUse ${step:a}.\n"),
        (),
        4,
        ("w.prompt.md:9:5", "step:b"),
    ),
    (
        "missing-step-reference",
        _workflow(TOUCH, "## Step 1: A\nUse ${step:nowhere}.\n"),
        (),
        4,
        ("w.prompt.md:9:5", "nowhere"),
    ),
    (
        "step-referring-to-itself",
        _workflow(TOUCH, "## Step 1: A\nUse ${step:a}.\n"),
        (),
        4,
        ("refers to itself",),
    ),
    (
        "command-without-argv",
        _workflow("commands:\n  build:\n    description: Build it\n", "Build.\n"),
        (),
        4,
        ("w.prompt.md:4:3", "argv"),
    ),
    (
        "run-line-naming-no-command",
        _workflow(TOUCH, "## Step 1: A\n> run: deploy\n"),
        (),
        4,
        ("deploy",),
    ),
    (
        "shell-placeholder",
        _workflow(
            'commands:\n  g:\n    argv: ["sh", "-c", "grep {p} ."]\n'
            "    parameters:\n      p: {type: string}\n",
            "Go.\n",
        ),
        (),
        4,
        ("w.prompt.md:",),
    ),
    (
        "python-tag-in-front-matter",
        _workflow("x: !!python/object/apply:os.system ['echo ran >> ran.txt']\n", "Go.\n"),
        (),
        4,
        ("w.prompt.md:3:",),
    ),
    (
        "deep-front-matter",
        _workflow("x: " + "[" * 100_000 + "]" * 100_000 + "\n", "Go.\n"),
        (),
        4,
        ("levels deep",),
    ),
]


@pytest.mark.parametrize(
    ("text", "extra", "code", "words"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_bad_workflow_stops_before_anything_runs(
    tmp_path: Path, text: str, extra: tuple[str, ...], code: int, words: tuple[str, ...]
) -> None:
    (tmp_path / "w.prompt.md").write_text(text, encoding="utf-8")
    before = snapshot(tmp_path)
    result = flow_here("run", "w.prompt.md", "--new", *extra, cwd=tmp_path)
    assert_clean_error(result, code, "w.prompt.md", *words)
    assert snapshot(tmp_path) == before  # the file as it was, and nothing written beside it
    assert not (tmp_path / ".flow").exists() and not (tmp_path / "ran.txt").exists()
    if code == 4:  # flow check reports the same problem (and exits 4) without running it
        check = flow_here("check", "w.prompt.md", cwd=tmp_path)
        assert check.returncode == 4, check.stdout + check.stderr
        assert "error" in check.stdout + check.stderr


def test_a_10_mb_prompt_file_is_refused_unread(tmp_path: Path) -> None:
    body = ("Explain this line of the log in detail, please.\n" * 220_000)[: 10 * 1024 * 1024]
    (tmp_path / "big.prompt.md").write_text(_workflow(TOUCH, body), encoding="utf-8")
    before = snapshot(tmp_path)
    result = flow("run", "big.prompt.md", "--new", cwd=tmp_path)  # a real process
    assert_clean_error(result, 4, "big.prompt.md", "limited to 1,048,576 bytes")
    assert snapshot(tmp_path) == before
    assert not (tmp_path / ".flow").exists()


@pytest.mark.parametrize(
    ("name", "content", "code", "words"),
    [
        ("binary.prompt.md", b"---\nprovider: scripted\n---\nHi\x00there\n", 4, ("NUL",)),
        ("latin1.prompt.md", "---\n---\nCaf\xe9\n".encode("latin-1"), 4, ("UTF-8",)),
        ("folder.prompt.md", None, 4, ()),
        ("missing.prompt.md", b"", 5, ("missing.prompt.md",)),
    ],
)
def test_a_workflow_that_is_not_a_text_file_is_one_clear_error(
    tmp_path: Path, name: str, content: bytes | None, code: int, words: tuple[str, ...]
) -> None:
    path = tmp_path / name
    if content is None:
        path.mkdir()
    elif name != "missing.prompt.md":
        path.write_bytes(content)
    before = snapshot(tmp_path)
    result = flow_here("run", name, "--new", cwd=tmp_path)
    assert_clean_error(result, code, name, *words)
    assert snapshot(tmp_path) == before
    assert not (tmp_path / ".flow").exists()


def test_a_bad_inputs_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "w.prompt.md").write_text(
        _workflow(TOUCH, "Deploy ${input:target}.\n"), encoding="utf-8"
    )
    files: dict[str, str | None] = {
        "list.yaml": "- a\n- b\n",
        "tag.yaml": "target: !!python/object/apply:os.system ['echo ran >> ran.txt']\n",
        "deep.json": '{"target": ' + "[" * 100_000 + "\n",
        "deep2.json": '{"target": ' + "[" * 40 + "]" * 40 + "}\n",
        "folder.json": None,
    }
    for name, text in files.items():
        if text is None:
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text(text, encoding="utf-8")
        result = flow_here("run", "w.prompt.md", "--inputs", name, "--new", cwd=tmp_path)
        assert result.returncode in (4, 5, 9), (name, result.stderr)
        assert_clean_error(result, result.returncode, name)
    assert not (tmp_path / ".flow").exists() and not (tmp_path / "ran.txt").exists()
    assert sorted(os.listdir(tmp_path)) == [
        "deep.json",
        "deep2.json",
        "folder.json",
        "list.yaml",
        "tag.yaml",
        "w.prompt.md",
    ]
