"""Coverage-guided fuzzing of flow's file readers with atheris (libFuzzer for Python).

Each input is the bytes of a file: a progress file (``--target progress``, the default), a
progress file's journal (``--target journal``), a workflow (``--target workflow``), or a run
folder with a special file in it (``--target files``: the first byte makes the journal, owner
file, lock or sidecar folder a pipe, a folder or a link to ``/dev/zero``, to nothing or to a
file outside holding the rest of the input, docs/spec.md 10.4). Reading
it must give a result or raise a ``FlowError`` that names the file; any other exception, a
crash, or a change to the file is reported by libFuzzer as a failure, with the input saved.

    pip install atheris
    python fuzz/fuzz_flow.py --target progress fuzz/corpus-progress -max_total_time=600

See fuzz/README.md for seeding the corpus and reading the results. The test suite does not
need atheris; ``tests/hostile/test_faults_fuzz.py`` is the hypothesis counterpart that runs in CI.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from promptflow_resume.base.errors import FlowError
    from promptflow_resume.progress import journal_path, load_progress
    from promptflow_resume.workflow import check_workflow, load_workflow

#: A finished run's progress file that journal inputs are replayed onto (set in main).
_BASE: bytes = b""
_FOLDER = Path(tempfile.mkdtemp(prefix="flow-fuzz-"))


def _expect_flow_error(error: FlowError) -> None:
    if error.path is None:
        raise AssertionError(f"a FlowError without the file it is about: {error!r}")


def fuzz_progress(data: bytes) -> None:
    """One progress file: load it; only FlowErrors may come out; the file stays as it was."""
    path = _FOLDER / "progress.md"
    journal_path(path).unlink(missing_ok=True)
    path.write_bytes(data)
    try:
        load_progress(path)
    except FlowError as error:
        _expect_flow_error(error)
    if path.read_bytes() != data:
        raise AssertionError("loading changed the progress file")


def fuzz_journal(data: bytes) -> None:
    """One journal beside a valid progress file: replaying it is a result or a FlowError."""
    path = _FOLDER / "progress.md"
    path.write_bytes(_BASE)
    journal_path(path).write_bytes(data)
    try:
        load_progress(path)
    except FlowError as error:
        _expect_flow_error(error)
    if journal_path(path).read_bytes() != data or path.read_bytes() != _BASE:
        raise AssertionError("loading changed the journal or the progress file")


def fuzz_workflow(data: bytes) -> None:
    """One workflow file: load and check it; only FlowErrors may come out."""
    path = _FOLDER / "w.prompt.md"
    path.write_bytes(data)
    try:
        load_workflow(path)
    except FlowError as error:
        _expect_flow_error(error)
    check_workflow(path)  # reports problems as diagnostics, never raises for content


#: The files beside a progress file that ``--target files`` makes special, and how.
_RUN_FILES = ("progress.md.journal", "progress.md.owner", "progress.md.lock", "progress.files")
_KINDS = ("fifo", "folder", "link-zero", "link-dangling", "link-outside")


def _timed_out(_signum: int, _frame: object) -> None:
    raise AssertionError("reading a run with a special file blocked (a pipe opened blocking?)")


def fuzz_files(data: bytes) -> None:
    """A run folder one of whose files is special: loading is a result or a FlowError within
    seconds, and nothing outside the folder changes."""
    if not data:
        return
    choice, rest = data[0], data[1:]
    name, kind = _RUN_FILES[choice % len(_RUN_FILES)], _KINDS[(choice // 8) % len(_KINDS)]
    folder, outside = _FOLDER / "run", _FOLDER / "outside"
    for old in (folder, outside):
        shutil.rmtree(old, ignore_errors=True)
        old.mkdir(parents=True)
    path = folder / "progress.md"
    path.write_bytes(_BASE)
    special = folder / name
    if kind == "fifo":
        os.mkfifo(special)
    elif kind == "folder":
        special.mkdir()
    elif kind == "link-zero":
        special.symlink_to("/dev/zero")
    elif kind == "link-dangling":
        special.symlink_to(outside / "nowhere")
    else:
        (outside / "file").write_bytes(rest)
        special.symlink_to(outside / "file")
    signal.signal(signal.SIGALRM, _timed_out)
    signal.alarm(10)
    try:
        load_progress(path)
    except FlowError as error:
        _expect_flow_error(error)
    finally:
        signal.alarm(0)
    if sorted(p.name for p in outside.iterdir()) != (["file"] if kind == "link-outside" else []):
        raise AssertionError("loading created a file outside the run's folder")
    if kind == "link-outside" and (outside / "file").read_bytes() != rest:
        raise AssertionError("loading wrote through a link")


TARGETS = {
    "progress": fuzz_progress,
    "journal": fuzz_journal,
    "workflow": fuzz_workflow,
    "files": fuzz_files,
}


def main() -> None:
    """Parse ``--target`` and ``--base``, hand the rest of the arguments to libFuzzer."""
    global _BASE
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--target", choices=sorted(TARGETS), default="progress")
    parser.add_argument(
        "--base",
        default=str(
            Path(__file__).resolve().parent.parent / "tests/fixtures/progress/valid/example.md"
        ),
        help="the progress file journal and files inputs are replayed onto",
    )
    known, rest = parser.parse_known_args()
    _BASE = Path(known.base).read_bytes()
    atheris.Setup([sys.argv[0], *rest], TARGETS[known.target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
