"""Values no flow writes, in files from someone else (docs/spec.md 10.5 and 2.1).

Each case is a hostile progress file, journal, data file or pair of runs, generated here from a
real stopped run of ``fixtures/hostile/guarded.prompt.md``. Every command a reviewer would run
on it (validate, status, show, share, resume) gives the documented exit code and one paragraph
naming the file, the line and the field; none crashes, and none changes the file. A NaN cost
must not switch a cost budget off: ``fixtures/hostile/priced.prompt.md`` would make four priced
model calls that a $0.0001 budget forbids.
"""

from __future__ import annotations

import copy
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.base.schemacheck import compile_schema
from promptflow_resume.progress import journal_path, load_progress, render
from promptflow_resume.progress.frontmatter import to_front_matter
from promptflow_resume.progress.journal import diff, event_line, header_line
from promptflow_resume.progress.journalreplay import entry_to_dict
from promptflow_resume.progress.model import Entry, Run
from promptflow_resume.progress.schema import load_schema, validate_front_matter, validator_class
from tests.support.faults import (
    HOSTILE,
    assert_clean_error,
    copy_fixtures,
    flow,
    flow_here,
    guarded_run_stopped,
    snapshot,
)

WORKFLOW = ("guarded.prompt.md", "guarded.script.yaml")
PROGRESS = "run/progress.md"
#: The top-level usage line of the stopped run, as flow writes it.
USAGE = "\nusage: {input_tokens: 0, output_tokens: 0, cached_tokens: 0, cost_usd: 0.0, turns: 1}"
#: The longest message a hostile value may make: it quotes values shortened.
LONGEST_MESSAGE = 700


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A real run of the guarded workflow, stopped by its turn budget after one note."""
    run = guarded_run_stopped(tmp_path_factory.mktemp("cut"), PROGRESS)
    return run


# --- how the hostile files are made ----------------------------------------------------------


def _plant(where: Path, run: Run) -> Path:
    copy_fixtures(where, *WORKFLOW, source=HOSTILE)
    path = where / PROGRESS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(render(run).encode("utf-8", "surrogatepass"))
    return path


def _front(old: str, new: str) -> Callable[[Path, Run], None]:
    """Replace the first ``old`` in the front matter with ``new``."""

    def make(where: Path, run: Run) -> None:
        path = _plant(where, run)
        text = path.read_text(encoding="utf-8")
        head = text.index("\n---\n")
        assert old in text[:head], old
        path.write_text(text.replace(old, new, 1), encoding="utf-8", newline="")

    return make


def _journal(
    change: Callable[[dict[str, Any]], None] = lambda fm: None,
    content: str = "one more message",
    raw: tuple[str, str] | None = None,
) -> Callable[[Path, Run], None]:
    """A journal of one event after the file: a new entry and the front matter changed by
    ``change``; ``raw`` replaces text in the event line (values ``json.dumps`` cannot write)."""

    def make(where: Path, run: Run) -> None:
        run = copy.deepcopy(run)
        path = _plant(where, run)
        before = to_front_matter(run)
        entry = Entry(id=len(run.transcript) + 1, role="user", content=content, step="draft")
        run.transcript.append(entry)
        after = to_front_matter(run)
        change(after)
        sets, deletes = diff(before, after)
        line = event_line(run.journal_seq + 1, sets, deletes, [entry_to_dict(entry)]).decode()
        if raw is not None:
            assert raw[0] in line
            line = line.replace(raw[0], raw[1], 1)
        journal_path(path).write_text(header_line(run.run_id).decode() + line, encoding="utf-8")

    return make


def _set_usage(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(fm: dict[str, Any]) -> None:
        fm["usage"] = {**fm["usage"], key: value}

    return change


def _child(link: str, other: str | None = None) -> Callable[[Path, Run], None]:
    """The run's step ``draft`` names ``link`` as its child; ``other`` (a path) is a second
    run whose own ``draft`` child leads back to the first."""

    def make(where: Path, run: Run) -> None:
        run = copy.deepcopy(run)
        run.steps["draft"].child = link
        _plant(where, run)
        if other is not None:
            second = copy.deepcopy(run)
            second.workflow.path = "../" + run.workflow.path
            second.steps["draft"].child = "../progress.md"
            target = where / "run" / other
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(render(second), encoding="utf-8", newline="")

    return make


# --- the cases -------------------------------------------------------------------------------

READ = ("validate", "status", "show", "share")
ALL = (*READ, "resume")


@dataclass
class Case:
    """A hostile file, and what each command must do with it."""

    make: Callable[[Path, Run], None]
    #: The exit code of the commands in ``refusing``, and words their message must say.
    code: int
    words: tuple[str, ...]
    refusing: tuple[str, ...] = ALL
    #: Commands that must succeed (exit 0), and words their output must say.
    succeeding: tuple[str, ...] = ()
    said: tuple[str, ...] = ()
    #: Words no message may say (a hostile value quoted whole).
    never: tuple[str, ...] = field(default_factory=tuple)


NINES = "9" * 5000
CASES: dict[str, Case] = {
    # 6: non-finite numbers in the front matter.
    "nan-cost": Case(
        _front(USAGE, USAGE.replace("cost_usd: 0.0", "cost_usd: .nan")),
        4,
        ("progress.md:30:", "$.usage.cost_usd", ".nan", "finite"),
    ),
    "inf-cost": Case(
        _front(USAGE, USAGE.replace("cost_usd: 0.0", "cost_usd: .inf")),
        4,
        ("progress.md:30:", "$.usage.cost_usd", "finite"),
    ),
    "overflowing-cost": Case(
        _front(USAGE, USAGE.replace("cost_usd: 0.0", "cost_usd: 1.0e+999")),
        4,
        ("progress.md:30:", "$.usage.cost_usd", "finite"),
    ),
    "minus-inf-budget": Case(
        _front("  provider: scripted\n", "  provider: scripted\n  budget: {max_cost_usd: -.inf}\n"),
        4,
        ("progress.md:20:", "$.config.budget.max_cost_usd", "finite"),
    ),
    "nan-input": Case(
        _front("cursor:", "inputs: {x: .NaN}\ncursor:"),
        4,
        ("progress.md:21:", "$.inputs.x", "finite"),
    ),
    # 10: numbers too large to print, and their messages.
    "hex-100k-digits": Case(
        _front(USAGE, USAGE.replace("input_tokens: 0", "input_tokens: 0x" + "f" * 100_000)),
        4,
        ("progress.md:30:", "$.usage.input_tokens", "out of range", "(100,002 characters)"),
        never=("f" * 100,),
    ),
    "decimal-5000-digits": Case(
        _front(USAGE, USAGE.replace("input_tokens: 0", f"input_tokens: {NINES}")),
        4,
        ("progress.md:30:", "$.usage.input_tokens", "(5,000 characters)"),
        never=("9" * 100,),
    ),
    "integer-past-64-bits": Case(
        _front("cursor: {step: draft, index: 1,", f"cursor: {{step: draft, index: {2**64},"),
        4,
        ("progress.md:21:", "$.cursor.index", "out of range"),
    ),
    # 13a: a key written twice.
    "duplicate-status": Case(
        _front("status: budget_exhausted\n", "status: budget_exhausted\nstatus: completed\n"),
        4,
        ("progress.md:7:", "$.status", "`status` appears twice", "lines 6 and 7"),
    ),
    "duplicate-step-key": Case(
        _front("    status: running\n", "    status: running\n    status: completed\n"),
        4,
        ("progress.md:25:", "$.steps.draft.status", "lines 24 and 25"),
    ),
    # 6 and 10: the same values in a journal.
    "journal-nan": Case(
        _journal(_set_usage("cost_usd", math.nan)),
        4,
        ("progress.md.journal:2:", "$.usage.cost_usd", "NaN"),
    ),
    "journal-infinity": Case(
        _journal(_set_usage("cost_usd", math.inf)),
        4,
        ("progress.md.journal:2:", "$.usage.cost_usd", "Infinity"),
    ),
    "journal-overflowing-number": Case(
        _journal(_set_usage("cost_usd", 0.125), raw=("0.125", "1e400")),
        4,
        ("progress.md.journal:2:", "$.usage.cost_usd", "finite"),
    ),
    "journal-integer-past-64-bits": Case(
        _journal(_set_usage("input_tokens", 123456789), raw=("123456789", "9" * 4000)),
        4,
        ("progress.md.journal:2:", "$.usage.input_tokens", "out of range"),
        never=("9" * 100,),
    ),
    "journal-5000-digits": Case(
        _journal(_set_usage("input_tokens", 123456789), raw=("123456789", NINES)),
        4,
        ("progress.md.journal:2:", "$.usage.input_tokens", "out of range", "(5,000 characters)"),
        never=("9" * 100,),
    ),
    # 10: a lone surrogate is text a provider can send: kept, shown, never a crash.
    "journal-lone-surrogate": Case(
        _journal(content="bad \udc80 byte"),
        0,
        (),
        refusing=(),
        succeeding=(*READ, "show --html"),
    ),
    "body-lone-surrogate": Case(
        lambda where, run: _plant(
            where,
            _with_content(run, "tool_result", "exit code: 0\n--- stdout ---\nbad \udc80 byte\n"),
        ),
        0,
        (),
        refusing=(),
        succeeding=(*READ, "show --html"),
    ),
    # 10: child runs that lead back.
    "child-is-itself": Case(
        _child("progress.md"),
        4,
        ("progress.md:28:", "$.steps.draft.child", "this run itself"),
        refusing=("share", "resume"),
        succeeding=("validate", "status", "show"),
        said=("invalid", "cannot contain its parent"),
    ),
    # The child's link back leaves its folder: some commands refuse it as such before any
    # cycle is followed (docs/spec.md 10.4), others as a cycle; the same exit code and field.
    "two-file-cycle": Case(
        _child("other/progress.md", other="other/progress.md"),
        4,
        ("other/progress.md", "$.steps.draft.child"),
        refusing=("share", "resume"),
        succeeding=("validate", "status", "show"),
        said=("invalid",),
    ),
}


def _with_content(run: Run, role: str, content: str) -> Run:
    run = copy.deepcopy(run)
    entry = next(e for e in run.transcript if e.role == role)
    entry.content = content
    return run


def _run_command(command: str, where: Path) -> Any:
    args = command.split()
    if command == "share":
        args += ["--output", "copy/shared.md"]
    if command == "show --html":
        args += ["page/run.html"]
    if command == "resume":  # the command that would call models: a real process
        return flow(*args, PROGRESS, cwd=where)
    return flow_here(*args, PROGRESS, cwd=where)


@pytest.mark.parametrize("name", list(CASES))
def test_a_hostile_file_gets_a_positioned_error_and_stays_unchanged(
    stopped: Run, tmp_path: Path, name: str
) -> None:
    case = CASES[name]
    case.make(tmp_path, stopped)
    before = snapshot(tmp_path / "run")
    for command in case.refusing:
        result = _run_command(command, tmp_path)
        message = assert_clean_error(result, case.code, *case.words)
        assert len(message) < LONGEST_MESSAGE, (command, len(message))
        for word in case.never:
            assert word not in result.stderr + result.stdout, command
        assert snapshot(tmp_path / "run") == before, command
    for command in case.succeeding:
        result = _run_command(command, tmp_path)
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr
        output = result.stdout + result.stderr
        if command == "status":
            for word in case.said:
                assert word in output, (command, word, output)
        assert snapshot(tmp_path / "run") == before, command
    if "show --html" in case.succeeding:
        page = (tmp_path / "page" / "run.html").read_text(encoding="utf-8")
        assert "bad \ufffd byte" in page
    assert not (tmp_path / "notes.txt").exists(), "a tool ran"


def test_resuming_a_workflow_step_whose_child_is_its_own_run_is_refused(tmp_path: Path) -> None:
    """A stopped sub-workflow whose recorded child file was pointed back at the parent."""
    names = ("nested.prompt.md", "nested-child.prompt.md", "nested.script.yaml")
    copy_fixtures(tmp_path, *names, source=HOSTILE)
    args = ("nested.prompt.md", "--recording", "nested.script.yaml", "--progress", PROGRESS)
    result = flow("run", *args, "--max-turns", "2", "--new", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    path = tmp_path / PROGRESS
    text = path.read_text(encoding="utf-8")
    link = "    child: progress.steps/child/progress.md\n"
    assert link in text
    path.write_text(text.replace(link, "    child: progress.md\n"), encoding="utf-8")
    before = snapshot(tmp_path)
    result = flow("resume", PROGRESS, "--max-turns", "5", cwd=tmp_path)
    assert_clean_error(result, 4, "progress.md:36:", "$.steps.child.child", "this run itself")
    assert snapshot(tmp_path) == before


# --- 6: a NaN cost does not switch the budget off -------------------------------------------


def _priced_run(where: Path) -> Path:
    """A priced workflow stopped by a $0.0001 budget before its first model call."""
    copy_fixtures(where, "priced.prompt.md", "priced.script.yaml", source=HOSTILE)
    result = flow(
        "run",
        "priced.prompt.md",
        "--recording",
        "priced.script.yaml",
        "--progress",
        PROGRESS,
        "--max-cost",
        "0.0001",
        "--new",
        cwd=where,
    )
    assert result.returncode == 1, result.stderr
    run, _ = load_progress(where / PROGRESS)
    assert run.status == "budget_exhausted" and run.usage.turns == 0
    return where / PROGRESS


@pytest.mark.parametrize("where_nan", ["front-matter", "journal"])
def test_a_nan_cost_neither_disables_the_budget_nor_calls_a_model(
    tmp_path: Path, where_nan: str
) -> None:
    path = _priced_run(tmp_path)
    if where_nan == "front-matter":
        text = path.read_text(encoding="utf-8")
        top = "\nusage: {input_tokens: 0, output_tokens: 0, cached_tokens: 0, cost_usd: 0.0,"
        assert top in text
        path.write_text(text.replace(top, top.replace("0.0,", ".nan,")), encoding="utf-8")
        words: tuple[str, ...] = ("progress.md:37:", "$.usage.cost_usd")
    else:
        run, _ = load_progress(path)
        before = to_front_matter(run)
        after = copy.deepcopy(before)
        after["usage"]["cost_usd"] = math.nan
        sets, deletes = diff(before, after)
        journal_path(path).write_bytes(
            header_line(run.run_id) + event_line(run.journal_seq + 1, sets, deletes, [])
        )
        words = ("progress.md.journal:2:", "$.usage.cost_usd")
    before_files = snapshot(tmp_path)
    result = flow("resume", PROGRESS, cwd=tmp_path)
    assert_clean_error(result, 4, *words)
    # No model call: nothing was recorded, and the run is still where the budget stopped it.
    assert snapshot(tmp_path) == before_files
    assert "One." not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_max_cost_must_be_a_finite_amount(tmp_path: Path, value: str) -> None:
    copy_fixtures(tmp_path, "priced.prompt.md", "priced.script.yaml", source=HOSTILE)
    result = flow(
        "run",
        "priced.prompt.md",
        "--recording",
        "priced.script.yaml",
        "--progress",
        PROGRESS,
        f"--max-cost={value}",
        "--new",
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert "finite amount of US dollars" in result.stderr
    assert not (tmp_path / PROGRESS).exists()


# --- both schema paths refuse non-finite numbers ---------------------------------------------


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "where",
    [("usage", "cost_usd"), ("config", "budget", "max_cost_usd"), ("steps", "draft", "usage")],
)
def test_the_quick_check_and_jsonschema_refuse_non_finite_numbers(
    stopped: Run, value: float, where: tuple[str, ...]
) -> None:
    document = copy.deepcopy(to_front_matter(stopped))
    target = document
    for key in where[:-1]:
        target = target.setdefault(key, {})
    if where[-1] == "usage":
        target["usage"] = {"cost_usd": value}
    else:
        target[where[-1]] = value
    check = compile_schema(load_schema("progress"))
    assert check is not None
    assert not check(document)
    assert list(validator_class()(load_schema("progress")).iter_errors(document))
    with pytest.raises(Exception, match="non-finite number"):
        validate_front_matter(document)


def test_integers_past_64_bits_are_refused_by_both_schema_paths(stopped: Run) -> None:
    document = copy.deepcopy(to_front_matter(stopped))
    document["cursor"] = {**document["cursor"], "index": 2**63}
    check = compile_schema(load_schema("progress"))
    assert check is not None and not check(document)
    assert list(validator_class()(load_schema("progress")).iter_errors(document))
    document["cursor"]["index"] = 2**63 - 1
    assert check(document)


# --- 10: a data row nested 100,000 levels deep -----------------------------------------------


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}", ("rows.jsonl:2:", "levels deep")),
        ('{"x": ' + "9" * 5000 + "}", ("rows.jsonl:2:", "$.x", "out of range")),
        ('{"x": [1, 2, ' + str(2**64) + "]}", ("rows.jsonl:2:", "$.x[2]", "out of range")),
    ],
    ids=["nested-100k", "5000-digits", "past-64-bits"],
)
def test_a_hostile_data_row_is_refused_before_anything_runs(
    tmp_path: Path, row: str, words: tuple[str, ...]
) -> None:
    copy_fixtures(tmp_path, *WORKFLOW, source=HOSTILE)
    (tmp_path / "rows.jsonl").write_text('{"x": 1}\n' + row + "\n", encoding="utf-8")
    before = snapshot(tmp_path)
    result = flow(
        "batch",
        "guarded.prompt.md",
        "--data",
        "rows.jsonl",
        "--recording",
        "guarded.script.yaml",
        "--out",
        "out",
        cwd=tmp_path,
    )
    message = assert_clean_error(result, 9, *words)
    assert len(message) < LONGEST_MESSAGE
    assert snapshot(tmp_path) == before


def test_a_script_nested_100k_levels_deep_is_refused(tmp_path: Path) -> None:
    copy_fixtures(tmp_path, *WORKFLOW, source=HOSTILE)
    text = '{"replies": [\n' + "[" * 100_000 + "]" * 100_000 + "]}\n"
    (tmp_path / "script.json").write_text(text, encoding="utf-8")
    result = flow("run", "guarded.prompt.md", "--recording", "script.json", "--new", cwd=tmp_path)
    assert_clean_error(result, 10, "script.json:2:31:", "levels deep")


# --- the same rules in batch.md ---------------------------------------------------------------


@pytest.fixture(scope="module")
def batch_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed batch of one row of the guarded workflow."""
    where = copy_fixtures(tmp_path_factory.mktemp("batch"), *WORKFLOW, source=HOSTILE)
    (where / "rows.jsonl").write_text("{}\n", encoding="utf-8")
    result = flow(
        "batch",
        "guarded.prompt.md",
        "--data",
        "rows.jsonl",
        "--recording",
        "guarded.script.yaml",
        "--out",
        "out",
        cwd=where,
    )
    assert result.returncode == 0, result.stderr
    return where


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        (
            "\n  cost_usd: 0.0\nrows:",
            "\n  cost_usd: .nan\nrows:",
            ("batch.md:25:", "$.totals.cost_usd", "finite"),
        ),
        (
            "\nstatus: completed\n",
            "\nstatus: completed\nstatus: running\n",
            ("batch.md:5:", "$.status", "lines 4 and 5"),
        ),
    ],
    ids=["nan-total", "duplicate-status"],
)
def test_a_hostile_batch_file_is_refused_and_left_alone(
    batch_folder: Path, tmp_path: Path, old: str, new: str, words: tuple[str, ...]
) -> None:
    shutil.copytree(batch_folder, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "out" / "batch.md"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    before = snapshot(tmp_path)
    for command in ("status", "resume"):
        result = flow(command, "out/batch.md", cwd=tmp_path)
        assert_clean_error(result, 4, *words)
        assert snapshot(tmp_path) == before, command
