"""A run's files that are links, pipes or devices (docs/spec.md 10.4).

A run folder received from someone else may hold, where flow expects its own regular files, a
symbolic link (to ``/dev/zero``, to ``/dev/stdin``, to a user's file, or to nothing), a pipe
(FIFO) that no one writes, or a device. Every command that meets one refuses it with one
paragraph and exit 4, within seconds and bounded memory; none writes through a link.

Each case plants one such file in a copy of a real stopped run and runs the real ``flow``
command in a subprocess, with a timeout (a hang fails the test) and a 1 GiB address-space
limit (reading ``/dev/zero`` into memory fails the test as an internal error).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from promptflow_resume.base.durable import append_synced, replace_file, temp_name
from promptflow_resume.base.errors import EXIT_INVALID_FILE, SpecialFileError
from tests.run.test_subworkflows import CHILD, PARENT, SCRIPT
from tests.support.faults import HOSTILE, copy_fixtures, snapshot
from tests.support.flowproc import FLOW, flow, flow_env
from tests.support.slow import sweep
from tests.tools.test_mcp_e2e import RUN as MCP_RUN
from tests.tools.test_mcp_e2e import SECRET, _workspace

#: A hang fails the test after this many seconds (a command here takes about one).
TIMEOUT = 20
#: The address space a command may use: far more than flow needs, far less than /dev/zero.
MEMORY = 1 << 30
COMMANDS = ("validate", "status", "show", "share", "resume", "list")
#: Words every refusal says.
REFUSED = "not a regular file"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two stopped runs in one folder: ``parent/`` (a sub-workflow's child under
    ``progress.steps/review/``, stopped by its turn budget inside the child) and ``big/`` (a
    100 KB tool output kept in a sidecar, stopped after the tool call)."""
    where = tmp_path_factory.mktemp("runs")
    (where / "parent.prompt.md").write_text(PARENT, encoding="utf-8")
    (where / "review.prompt.md").write_text(CHILD, encoding="utf-8")
    (where / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    copy_fixtures(where, "bigout.prompt.md", "bigout.script.yaml", source=HOSTILE)
    stopped = flow(
        *("run", "parent.prompt.md", "--provider", "scripted", "--recording", "script.yaml"),
        *("--progress", "parent/progress.md", "--input", "topic=bees", "--new"),
        *("--max-turns", "2"),
        cwd=where,
    )
    assert stopped.returncode == 1, stopped.stderr
    big = flow(
        *("run", "bigout.prompt.md", "--recording", "bigout.script.yaml"),
        *("--progress", "big/progress.md", "--new", "--max-turns", "1"),
        cwd=where,
    )
    assert big.returncode == 1, big.stderr
    assert list((where / "big" / "progress.files").iterdir())
    for lock in where.rglob("*.lock"):
        lock.unlink()
    return where


@dataclass(frozen=True)
class Case:
    """One planted file: the run it is in, what to plant, the commands that must refuse it,
    and those that must finish anyway (``list``; ``status``, showing a child as invalid)."""

    run: str
    plant: Callable[[Path, Path], None]
    refused_by: tuple[str, ...]
    shown_by: tuple[str, ...] = ()


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    make(path)


def _link(target: str | Callable[[Path], Path]) -> Callable[[Path], Callable[[Path], None]]:
    """A planter of a symbolic link to ``target`` (or to a path under the outside folder)."""

    def at(outside: Path) -> Callable[[Path], None]:
        to = target(outside) if callable(target) else Path(target)
        return lambda path: path.symlink_to(to)

    return at


def _fifo(_outside: Path) -> Callable[[Path], None]:
    return os.mkfifo


def _plant_at(
    rel: str, how: Callable[[Path], Callable[[Path], None]]
) -> Callable[[Path, Path], None]:
    return lambda run, outside: _replace(run / rel, how(outside))


def _outside_child(outside: Path) -> Path:
    # A real child run, but outside the run's folder.
    return outside / "child.md"


def _absolute_child(run: Path, _outside: Path) -> None:
    path = run / "progress.md"
    text = path.read_text(encoding="utf-8")
    assert "child: progress.steps/review/progress.md" in text
    path.write_text(text.replace("child: progress.steps/review/progress.md", "child: /dev/zero"))


JOURNAL = "progress.md.journal"
CHILD_FILE = "progress.steps/review/progress.md"
READERS = ("validate", "status", "show", "share", "resume")
CASES = {
    "journal -> /dev/zero": Case(
        "parent", _plant_at(JOURNAL, _link("/dev/zero")), READERS, ("list",)
    ),
    "journal is a FIFO": Case("parent", _plant_at(JOURNAL, _fifo), READERS, ("list",)),
    "journal -> nowhere": Case(
        "parent", _plant_at(JOURNAL, _link(lambda o: o / "nowhere" / "events")), READERS
    ),
    "owner file is a FIFO": Case(
        "parent", _plant_at("progress.md.owner", _fifo), READERS, ("list",)
    ),
    "lock -> a user's file": Case(
        "parent", _plant_at("progress.md.lock", _link(lambda o: o / "bashrc")), ("resume",)
    ),
    "child -> /dev/zero": Case(
        "parent", _plant_at(CHILD_FILE, _link("/dev/zero")), ("share", "resume")
    ),
    "child -> /dev/stdin": Case(
        "parent",
        _plant_at(CHILD_FILE, _link("/dev/stdin")),
        ("share", "resume"),
        ("status", "list"),
    ),
    "child is a FIFO": Case(
        "parent", _plant_at(CHILD_FILE, _fifo), ("share", "resume"), ("status", "list")
    ),
    "child -> a file outside": Case(
        "parent", _plant_at(CHILD_FILE, _link(_outside_child)), ("share", "resume"), ("status",)
    ),
    "child link names /dev/zero": Case("parent", _absolute_child, ("share", "resume")),
    # Outside the run's folder, named by its workflow.path: followed, but must be a file.
    "workflow -> /dev/zero": Case(
        "parent",
        lambda r, o: _replace(r.parent / "parent.prompt.md", _link("/dev/zero")(o)),
        ("resume",),
    ),
    "sidecar -> /dev/zero": Case("big", lambda r, o: _sidecar(r, _link("/dev/zero")(o)), READERS),
    "sidecar is a FIFO": Case("big", lambda r, o: _sidecar(r, os.mkfifo), READERS),
    "sidecar -> a file outside": Case(
        "big", lambda r, o: _sidecar(r, _link(lambda o: o / "sidecar.txt")(o)), READERS
    ),
}


def _sidecar(run: Path, make: Callable[[Path], None]) -> None:
    (sidecar,) = (run / "progress.files").iterdir()
    _replace(sidecar, make)


@pytest.fixture
def stdin_left_open() -> Iterator[int]:
    """A pipe as a command's stdin whose writer stays open: like a terminal nobody types in,
    a read of it waits for ever."""
    read, write = os.pipe()
    yield read
    os.close(read)
    os.close(write)


def _run_flow(
    args: list[str], cwd: Path, stdin: int, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [*FLOW, *args],
            cwd=cwd,
            env=env or flow_env(),
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"flow {' '.join(args)} hung (no answer in {TIMEOUT} s)")


def _args(command: str, run: Path, where: Path) -> list[str]:
    progress = str(run / "progress.md")
    if command == "share":
        return ["share", progress, "--output", str(where / "shared" / "copy.md")]
    if command == "resume":
        return ["resume", progress, "--max-turns", "20"]
    if command == "list":
        return ["list", "--all", "--json", str(run)]
    return [command, progress]


#: Each case with each command that refuses its file or must finish despite it. (The
#: commands that never read the file finish as without it, and are not repeated here.)
PAIRS = [
    (name, command)
    for name, case in sorted(CASES.items())
    for command in COMMANDS
    if command in case.refused_by + case.shown_by
]


#: The default run tries each case with its first command; --slow (and CI) with every one.
FIRST = {(name, command) for name, command in dict(reversed(PAIRS)).items()}


@pytest.mark.parametrize(("name", "command"), sweep(PAIRS, keep=FIRST))
def test_a_special_file_or_link_is_refused_never_followed(
    runs: Path, tmp_path: Path, stdin_left_open: int, name: str, command: str
) -> None:
    case = CASES[name]
    where = tmp_path / "ws"
    shutil.copytree(runs, where, symlinks=True)
    run = where / case.run
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "bashrc").write_text("export PATH=$HOME/bin:$PATH\n", encoding="utf-8")
    (outside / "child.md").write_bytes((where / "parent" / CHILD_FILE).read_bytes())
    (outside / "sidecar.txt").write_bytes(b"not the tool's output\n")
    (where / "shared").mkdir()
    case.plant(run, outside)
    before = snapshot(outside)

    result = _run_flow(_args(command, run, where), where, stdin_left_open)

    shown = (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, shown
    assert "internal error" not in result.stderr, shown  # MemoryError included
    # Nothing written outside the run's folder, nothing created there.
    assert snapshot(outside) == before
    assert sorted(p.name for p in outside.iterdir()) == ["bashrc", "child.md", "sidecar.txt"]
    if command in case.refused_by:
        assert result.returncode == EXIT_INVALID_FILE, shown
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("error: "), shown
        assert REFUSED in last or "leaves the folder" in last, shown
    elif command == "list":
        assert result.returncode == 0, shown
        assert len(json.loads(result.stdout)) == 1
    else:
        # status: the parent reads fine; its child is shown as unreadable.
        assert command == "status", command
        assert result.returncode == 0, shown
        assert "invalid" in result.stdout, shown


def test_an_mcp_server_log_that_is_a_link_is_never_appended_to(tmp_path: Path) -> None:
    where = _workspace(tmp_path, "leak", {})
    run = where / "run"
    run.mkdir()
    bashrc = tmp_path / "bashrc"
    bashrc.write_text("export PATH=$HOME/bin:$PATH\n", encoding="utf-8")
    (run / "mcp-notes.stderr.log").symlink_to(bashrc)
    result = subprocess.run(
        [*FLOW, *MCP_RUN],
        cwd=where,
        env=flow_env(FLOW_MCP_INPUT_NOTES_TOKEN=SECRET),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bashrc.read_text(encoding="utf-8") == "export PATH=$HOME/bin:$PATH\n"
    assert result.returncode == EXIT_INVALID_FILE, (result.stdout, result.stderr)
    last = result.stderr.strip().splitlines()[-1]
    assert "mcp-notes.stderr.log" in last and "symbolic link" in last, last
    assert "Traceback" not in result.stderr


def test_the_atomic_writer_never_writes_through_a_planted_temp_name(tmp_path: Path) -> None:
    # The temp name is predictable (.<name>.<pid>.tmp): a link planted there must not receive
    # the new file (folds, owner files, sidecars and backups all go through replace_file).
    target = tmp_path / "bashrc"
    target.write_text("keep me\n", encoding="utf-8")
    path = tmp_path / "run" / "progress.md.owner"
    path.parent.mkdir()
    temp_name(path).symlink_to(target)
    replace_file(path, b'{"pid": 1}\n')
    assert target.read_text(encoding="utf-8") == "keep me\n"
    assert path.read_bytes() == b'{"pid": 1}\n' and not path.is_symlink()
    assert not os.path.lexists(temp_name(path))


def test_an_append_to_a_dangling_link_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "events"
    target.parent.mkdir()
    link = tmp_path / "session.recording.jsonl"
    link.symlink_to(target)
    with pytest.raises(SpecialFileError, match="symbolic link"):
        append_synced(link, b"{}\n", what="recording")
    assert not target.exists()
