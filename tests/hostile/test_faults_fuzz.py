"""Fuzzing: mutated progress files, journals and workflows load or fail with a positioned error.

Seeds are real files (golden fixtures, a finished run, a run a crash left with a journal, the
shipped workflows). Each example applies a few mutations — byte flips, truncation, duplicated
and deleted lines, random unicode, random YAML values, random Markdown structure — and then:

- loading gives a run (or workflow), or raises a ``FlowError`` naming the file and, when the
  problem is in its text, the line; never any other exception;
- a failed load leaves every byte of the file (and its journal) as it was.

The files beside a progress file are fuzzed as a folder received from someone else may hold
them: the journal, owner and lock files, the sidecar folder and a progress file in a listed
folder each become a pipe, a link (to ``/dev/zero``, to nothing, to a mutated file outside, to
a folder) or a folder, and reading gives a result or a ``FlowError`` naming a file within a few
seconds (docs/spec.md 10.4), writing nothing outside the folder.

The default run tries a few hundred mutations; ``python -m pytest --slow -m slow
tests/hostile/test_faults_fuzz.py`` tries tens of thousands. ``fuzz/`` has a coverage-guided target.
"""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from promptflow_resume.base.errors import FlowError
from promptflow_resume.detect import list_runs
from promptflow_resume.progress import journal_path, load_progress
from promptflow_resume.progress.model import RUN_STATUSES
from promptflow_resume.workflow import check_workflow, load_workflow
from tests.support.faults import ENGINE, REPO, copy_fixtures, flow, flow_env

QUICK = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: The long fuzzes' examples each: 6,000 keeps the slow run within its 15 minutes on two
#: cores; FLOW_LONG_FUZZ=20000 (or more) for a deeper soak by hand.
LONG_EXAMPLES = int(os.environ.get("FLOW_LONG_FUZZ", "6000"))
LONG = settings(
    max_examples=LONG_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

STATUSES = (*RUN_STATUSES, "invalid")
#: FlowErrors that are about the file as a whole, so they carry no line.
WHOLE_FILE = ("the file is empty", "is a folder", "MB, over the", "not a regular file", "MiB limit")

# --- seeds -----------------------------------------------------------------------------------


def _progress_seeds() -> dict[str, tuple[bytes, bytes | None]]:
    """name -> (progress bytes, journal bytes or None)."""
    seeds: dict[str, tuple[bytes, bytes | None]] = {}
    valid = REPO / "tests" / "fixtures" / "progress" / "valid"
    for path in sorted(valid.glob("*.md")):
        if not (path.parent / (path.name[:-3] + ".files")).exists():  # sidecars: not copied
            seeds[path.name] = (path.read_bytes(), None)
    with tempfile.TemporaryDirectory() as tmp:
        where = copy_fixtures(Path(tmp), "counter.prompt.md", "counter.script.yaml")
        base = ("run", "counter.prompt.md", "--recording", "counter.script.yaml", "--new")
        done = flow(*base, "--progress", "done/progress.md", cwd=where)
        assert done.returncode == 0, done.stderr
        seeds["finished"] = ((where / "done" / "progress.md").read_bytes(), None)
        crashed = flow(
            *base,
            "--progress",
            "cut/progress.md",
            cwd=where,
            env=flow_env(FLOW_CRASH_AT="store.journal_after_fsync:5"),
        )
        assert crashed.returncode == -9, crashed.stderr
        cut = where / "cut" / "progress.md"
        seeds["crashed"] = (cut.read_bytes(), journal_path(cut).read_bytes())
    return seeds


PROGRESS_SEEDS = _progress_seeds()
WORKFLOW_SEEDS = {
    p.name: p.read_bytes()
    for p in sorted(
        [
            *(REPO / "workflows").glob("*.prompt.md"),
            *(REPO / "tests/fixtures/workflows").glob("*.md"),
        ]
    )
}
WORKFLOW_SEEDS["counter"] = (ENGINE / "counter.prompt.md").read_bytes()
#: The example workflows, written beside each mutated seed: a workflow step names its
#: sub-workflow by a path relative to its own file (release-check runs triage-todos).
SIBLINGS = {p.name: p.read_bytes() for p in (REPO / "workflows").glob("*.prompt.md")}


def _write_workflow(folder: Path, data: bytes) -> Path:
    """``folder/w.prompt.md`` holding ``data``, with the example workflows beside it."""
    for name, text in SIBLINGS.items():
        (folder / name).write_bytes(text)
    path = folder / "w.prompt.md"
    path.write_bytes(data)
    return path


# --- mutations -------------------------------------------------------------------------------

YAML_VALUES = st.one_of(
    st.sampled_from(
        [
            "",
            "~",
            "null",
            "[]",
            "{}",
            "-1",
            "1e999",
            ".nan",
            "!!binary aGk=",
            "!!python/object/apply:os.system ['true']",
            "&a [*a]",
            "*nope",
            "'unterminated",
            '"\\x00"',
            "{a: [b, {c: d}]}",
            "2026-13-45T99:99:99Z",
            "0000-01-01",
            "!!int foo",
            "!!bool maybe",
            "!!timestamp soon",
            "!!float .",
            "|\n  block",
            "? complex\n: key",
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        ]
    ),
    st.text(max_size=30),
)
MARKDOWN_LINES = st.one_of(
    st.sampled_from(
        [
            "---",
            "...",
            "```",
            "````text",
            "```flow-escaped",
            "## Step 1: Injected",
            "# heading",
            "<!-- flow:entry 1 user d=0000000000000000 -->",
            "<!-- flow:entry 99 tool_call step=x call=c tool=t d=ffffffffffffffff -->",
            "<!-- flow:section conversation -->",
            "<!-- flow:end seq=1 -->",
            "<!-- flow:",
            '"\\ud800"',
            "> tools: none",
            "${input:x}",
            "\t\x0b\x0c\r",
        ]
    ),
    st.text(max_size=40),
)


#: One edit: (kind, where in the file as a fraction, payload). Plain data, so that a failing
#: example prints readably.
Edit = tuple[str, float, bytes]
KINDS = ("flip", "truncate", "duplicate", "delete", "unicode", "yaml", "markdown")


@st.composite
def mutation(draw: st.DrawFn) -> Edit:
    """One random edit of a file's bytes."""
    kind = draw(st.sampled_from(KINDS))
    where = draw(st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
    payload = b""
    if kind == "flip":
        payload = bytes([draw(st.integers(0, 255))])
    elif kind == "unicode":
        payload = draw(st.text(min_size=1, max_size=8)).encode("utf-8", "surrogatepass")
    elif kind == "yaml":
        payload = draw(YAML_VALUES).encode("utf-8", "surrogatepass")
    elif kind == "markdown":
        payload = draw(MARKDOWN_LINES).encode("utf-8", "surrogatepass")
    return kind, where, payload


def mutate(data: bytes, edit: Edit) -> bytes:
    """Apply one edit."""
    kind, where, payload = edit
    at = int(where * len(data))
    if kind == "flip":
        return data[:at] + payload + data[at + 1 :]
    if kind == "truncate":
        return data[:at]
    if kind == "unicode":
        return data[:at] + payload + data[at:]
    lines = data.split(b"\n")
    i = int(where * len(lines))
    if kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "delete":
        del lines[i]
    elif kind == "yaml":
        keyed = [n for n, line in enumerate(lines) if b": " in line or line.endswith(b":")]
        if keyed:
            n = keyed[int(where * len(keyed))]
            lines[n] = lines[n].split(b":", 1)[0] + b": " + payload
    else:
        lines.insert(int(where * (len(lines) + 1)), payload)
    return b"\n".join(lines)


MUTATIONS = st.lists(mutation(), min_size=1, max_size=4)


def _apply(data: bytes, edits: list[Edit]) -> bytes:
    for edit in edits:
        data = mutate(data, edit)
    return data


# --- the property ----------------------------------------------------------------------------


def _check_error(error: FlowError, path: Path) -> None:
    assert error.path is not None, f"no file named: {error}"
    assert str(error) and "Traceback" not in str(error)
    if error.line is None:
        assert any(words in error.message for words in WHOLE_FILE) or error.field, (
            f"no position: {error}"
        )


def check_progress(seed: str, edits: list[Edit], in_journal: bool) -> None:
    progress, journal = PROGRESS_SEEDS[seed]
    if in_journal:
        if journal is None:
            return
        journal = _apply(journal, edits)
    else:
        progress = _apply(progress, edits)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "progress.md"
        path.write_bytes(progress)
        if journal is not None:
            journal_path(path).write_bytes(journal)
        try:
            load_progress(path)
        except FlowError as error:
            _check_error(error, path)
        assert path.read_bytes() == progress, "a load changed the progress file"
        if journal is not None:
            assert journal_path(path).read_bytes() == journal, "a load changed the journal"
        assert sorted(os.listdir(tmp)) == sorted(
            ["progress.md"] + (["progress.md.journal"] if journal is not None else [])
        ), "a load wrote a file"


def check_workflow_text(seed: str, edits: list[Edit]) -> None:
    data = _apply(WORKFLOW_SEEDS[seed], edits)
    with tempfile.TemporaryDirectory() as tmp:
        path = _write_workflow(Path(tmp), data)
        try:
            load_workflow(path)
        except FlowError as error:
            _check_error(error, path)
        _, diagnostics = check_workflow(path)  # never raises for content
        for diagnostic in diagnostics:
            assert diagnostic.line is not None or diagnostic.severity != "error"
        assert path.read_bytes() == data


def check_listing(seed: str, edits: list[Edit]) -> None:
    """``flow list`` (and so the similar-run check) reads any file without raising."""
    progress = _apply(PROGRESS_SEEDS[seed][0], edits)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / ".flow" / "runs" / "r1"
        folder.mkdir(parents=True)
        (folder / "progress.md").write_bytes(progress)
        rows = list_runs([Path(tmp) / ".flow" / "runs"], root=Path(tmp), include_completed=True)
        assert len(rows) <= 1
        for row in rows:
            assert row.status in STATUSES, row.status
        assert (folder / "progress.md").read_bytes() == progress


# --- special files and links beside a run ----------------------------------------------------

#: The files beside ``progress.md`` a run folder from elsewhere may hold as anything at all.
RUN_FILES = (
    "progress.md.journal",
    "progress.md.owner",
    "progress.md.lock",
    "progress.files",
)
#: What such a file becomes: a pipe, a folder, or a link to a device, to nothing, to a file
#: outside the folder (a mutated journal) or to a folder.
SPECIAL_KINDS = ("fifo", "folder", "link-zero", "link-dangling", "link-outside", "link-folder")


@contextmanager
def _no_hang(seconds: int = 10) -> Iterator[None]:
    """Fail instead of hanging: a read that blocks (a pipe) is interrupted by SIGALRM."""

    def fail(_signum: int, _frame: object) -> None:
        raise AssertionError(f"reading the run took over {seconds} s (blocked on a pipe?)")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _make_special(path: Path, kind: str, outside: Path, data: bytes) -> None:
    if os.path.lexists(path):
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "link-zero":
        path.symlink_to("/dev/zero")
    elif kind == "link-dangling":
        path.symlink_to(outside / "nowhere")
    elif kind == "link-outside":
        (outside / "file").write_bytes(data)
        path.symlink_to(outside / "file")
    else:
        path.symlink_to(outside)


def check_special(seed: str, name: str, kind: str, edits: list[Edit]) -> None:
    """Load and list a run one of whose files is special: a result or a FlowError, in time."""
    progress, journal = PROGRESS_SEEDS[seed]
    with tempfile.TemporaryDirectory() as tmp:
        folder, outside = Path(tmp) / ".flow" / "runs" / "r1", Path(tmp) / "outside"
        folder.mkdir(parents=True)
        outside.mkdir()
        path = folder / "progress.md"
        path.write_bytes(progress)
        if journal is not None:
            journal_path(path).write_bytes(journal)
        _make_special(folder / name, kind, outside, _apply(journal or progress, edits))
        before = {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()}
        with _no_hang():
            try:
                load_progress(path)
            except FlowError as error:
                _check_error(error, path)
            rows = list_runs([folder.parent], root=Path(tmp), include_completed=True)
        assert len(rows) == 1 and rows[0].status in STATUSES
        assert path.read_bytes() == progress, "a load changed the progress file"
        after = {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()}
        assert after == before, "a load wrote outside the run's folder"


def check_special_listed(kind: str, edits: list[Edit]) -> None:
    """``flow list`` over a folder whose progress.md itself is special lists or skips it."""
    progress = _apply(PROGRESS_SEEDS["finished"][0], edits)
    with tempfile.TemporaryDirectory() as tmp:
        folder, outside = Path(tmp) / ".flow" / "runs" / "r1", Path(tmp) / "outside"
        folder.mkdir(parents=True)
        outside.mkdir()
        _make_special(folder / "progress.md", kind, outside, progress)
        with _no_hang():
            rows = list_runs([folder.parent], root=Path(tmp), include_completed=True)
        assert len(rows) <= 1
        for row in rows:
            assert row.status in STATUSES, row.status


PROGRESS_NAMES = st.sampled_from(sorted(PROGRESS_SEEDS))
WORKFLOW_NAMES = st.sampled_from(sorted(WORKFLOW_SEEDS))


@QUICK
@given(seed=PROGRESS_NAMES, edits=MUTATIONS)
def test_mutated_progress_files_load_or_fail_with_a_position(seed: str, edits: list[Edit]) -> None:
    check_progress(seed, edits, in_journal=False)


@QUICK
@given(edits=MUTATIONS)
def test_mutated_journals_load_or_fail_with_a_position(
    edits: list[Edit],
) -> None:
    check_progress("crashed", edits, in_journal=True)


@QUICK
@given(seed=PROGRESS_NAMES, edits=MUTATIONS)
# Found by the fuzz: a step's status hand-edited into a mapping or a list.
@example(seed="example.md", edits=[("yaml", 0.4609375, b"{a: [b, {c: d}]}")])
@example(seed="example.md", edits=[("yaml", 0.4609375, b"[]")])
def test_mutated_progress_files_are_listed_without_a_crash(seed: str, edits: list[Edit]) -> None:
    check_listing(seed, edits)


@QUICK
@given(seed=WORKFLOW_NAMES, edits=MUTATIONS)
def test_mutated_workflows_load_or_fail_with_a_position(seed: str, edits: list[Edit]) -> None:
    check_workflow_text(seed, edits)


@settings(QUICK, max_examples=60)
@given(
    seed=PROGRESS_NAMES,
    name=st.sampled_from(RUN_FILES),
    kind=st.sampled_from(SPECIAL_KINDS),
    edits=MUTATIONS,
)
def test_special_files_beside_a_run_load_or_fail_in_time(
    seed: str, name: str, kind: str, edits: list[Edit]
) -> None:
    check_special(seed, name, kind, edits)


@settings(QUICK, max_examples=30)
@given(kind=st.sampled_from(SPECIAL_KINDS), edits=MUTATIONS)
def test_a_special_progress_file_is_listed_without_a_hang(kind: str, edits: list[Edit]) -> None:
    check_special_listed(kind, edits)


@pytest.mark.slow
@LONG
@given(seed=PROGRESS_NAMES, edits=MUTATIONS, in_journal=st.booleans())
def test_long_fuzz_of_progress_files_and_journals(
    seed: str, edits: list[Edit], in_journal: bool
) -> None:
    check_progress(seed, edits, in_journal)


@pytest.mark.slow
# A listing example costs ten times a parse (a folder, the index written and read again): a
# quarter of the examples keeps it near the other long runs' time.
@settings(LONG, max_examples=max(LONG_EXAMPLES // 4, 1))
@given(seed=PROGRESS_NAMES, edits=MUTATIONS)
def test_long_fuzz_of_listing(seed: str, edits: list[Edit]) -> None:
    check_listing(seed, edits)


@pytest.mark.slow
@LONG
@given(seed=WORKFLOW_NAMES, edits=MUTATIONS)
def test_long_fuzz_of_workflows(seed: str, edits: list[Edit]) -> None:
    check_workflow_text(seed, edits)


def test_the_seeds_load_unmutated() -> None:
    # A seed that does not load would make every mutation of it a trivial failure.
    for progress, journal in PROGRESS_SEEDS.values():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "progress.md"
            path.write_bytes(progress)
            if journal is not None:
                journal_path(path).write_bytes(journal)
            load_progress(path)
    for data in WORKFLOW_SEEDS.values():
        with tempfile.TemporaryDirectory() as tmp:
            load_workflow(_write_workflow(Path(tmp), data))
