"""Shared fixtures: every test runs with a private home, and may not write into the checkout.

flow keeps nothing outside a run's folder (there is no per-user state), but what it starts
and reads does use the home: git reads ``~/.gitconfig``, MCP configurations expand
``${userHome}``, ``flow share --scrub-home`` replaces the home's path. So every test gets a
temp ``HOME`` (and XDG folders inside it), inherited by the ``flow`` processes it starts.

Slow tests (``@pytest.mark.slow``: soaks, long fuzz runs, sweeps) run only with ``--slow``,
or when the ``CI`` variable is set (as CI services set it, and ``.ci/run`` runs there): a local
``python -m pytest -q`` stays short, CI runs the slow tests too with the same command. The
longest soaks (``@pytest.mark.soak``: thousands of events, dozens of kill rounds) run only with
``--soak``: they are the same checks as a slow test kept in CI, at a length that would take the
CI run past its 15 minutes on two cores.

A test that writes into the checkout (a ``.flow/runs`` folder left by a command run from the
repository's root, a file beside the fixtures) fails, naming what appeared: tests write under
their temp folders only.

Every event the session's ``flow`` runs write is checked against ``schemas/events.schema.json``
at the end (``FLOW_EVENTS`` points them at one file; see ``tests/support/events.py``): an
invalid event fails the session, so the schema stays true to what every feature emits.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The variable ``flow`` reads for an events file (docs/spec.md 4.16).
EVENTS_VARIABLE = "FLOW_EVENTS"
#: Where the session's events file is, on the process that checks it.
_EVENTS_KEY = pytest.StashKey[Path]()

#: Folders of the checkout not watched, and entries that may appear in watched ones: caches of
#: Python and of the test tools, which are no test's output.
_UNWATCHED = frozenset({".git", "__pycache__", ".venv", "venv", "node_modules", "build", "dist"})
_ALLOWED = frozenset(
    {"__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", ".coverage"}
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--slow``: the one switch for the tests marked slow."""
    parser.addoption(
        "--slow",
        action="store_true",
        help="also run the tests marked slow (soaks, long fuzz runs); on when CI is set",
    )
    parser.addoption(
        "--soak",
        action="store_true",
        help="also run the longest soaks (marked soak, several minutes each); implies --slow",
    )


def slow_enabled(config: pytest.Config) -> bool:
    """Whether this session runs the tests marked slow: ``--slow``, or ``CI`` set (not to
    ``false`` or ``0``)."""
    ci = os.environ.get("CI", "").strip().lower()
    if config.getoption("--slow") or config.getoption("--soak"):
        return True
    return ci not in ("", "0", "false", "no")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers a core in the default run, where most tests wait on a ``flow``
    process they started; one a core with the slow tests, whose kill storms and soaks want a
    steady machine more than a short run."""
    cores = os.cpu_count() or 1
    return cores if slow_enabled(config) else 2 * cores


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked slow unless the slow switch is on, and the soaks unless
    ``--soak`` is given, saying how to run them."""
    slow = slow_enabled(config)
    soak = bool(config.getoption("--soak"))
    skip_slow = pytest.mark.skip(reason="slow: run with --slow (CI runs it)")
    skip_soak = pytest.mark.skip(reason="soak: run with --soak (CI does not: minutes each)")
    for item in items:
        if item.get_closest_marker("soak") is not None and not soak:
            item.add_marker(skip_soak)
        elif item.get_closest_marker("slow") is not None and not slow:
            item.add_marker(skip_slow)


def pytest_configure(config: pytest.Config) -> None:
    """``pytest --collect-only`` runs no test, so every snapshot looks unused to syrupy, which
    would fail the collection; a run that executes tests still fails on unused snapshots.

    The session's first process (the xdist controller, or the only one) points
    ``FLOW_EVENTS`` at one events file for the whole session; the workers and every ``flow``
    they start inherit it, so each run of the suite appends its events there."""
    if config.option.collectonly:
        config.option.warn_unused_snapshots = True
    if not hasattr(config, "workerinput") and EVENTS_VARIABLE not in os.environ:
        folder = Path(tempfile.mkdtemp(prefix="flow-session-events-"))
        os.environ[EVENTS_VARIABLE] = str(folder / "events.jsonl")
        config.stash[_EVENTS_KEY] = folder / "events.jsonl"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Check every event the session's runs wrote against ``schemas/events.schema.json``; an
    invalid one fails the session, naming the line and the field. A run that made file
    snapshots in the checkout's own repository (docs/spec.md 12) fails it too."""
    if not hasattr(session.config, "workerinput"):
        made = sorted(_snapshots_in_checkout() - _SNAPSHOTS)
        if made:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(
                    "tests made file snapshots in the checkout's git repository (run flow "
                    "from the checkout with --no-snapshots): runs " + ", ".join(made)
                )
    path = session.config.stash.get(_EVENTS_KEY, None)
    if path is None:
        return
    from tests.support.events import problems

    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    wrong = problems(lines, "session events")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"events: {len(lines)} events of the session's runs checked against "
            f"schemas/events.schema.json; {len(wrong)} invalid"
        )
        for problem in wrong[:20]:
            reporter.write_line(f"  {problem}")
    if wrong:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    shutil.rmtree(path.parent, ignore_errors=True)


def _watched_folders() -> dict[Path, tuple[int, frozenset[str]]]:
    """Every folder of the checkout with its modification time and entries."""
    folders: dict[Path, tuple[int, frozenset[str]]] = {}
    for top, dirs, files in os.walk(ROOT):
        folders[Path(top)] = (os.stat(top).st_mtime_ns, frozenset(dirs + files))
        dirs[:] = [d for d in dirs if d not in _UNWATCHED | _ALLOWED]
        dirs[:] = [d for d in dirs if not d.endswith(".egg-info")]
    return folders


_FOLDERS = _watched_folders()


def _git_dir() -> Path:
    """The checkout's git folder (``.git``, or where a worktree's ``.git`` file points)."""
    dot = ROOT / ".git"
    if dot.is_file():
        return (ROOT / dot.read_text(encoding="utf-8").split(":", 1)[1].strip()).resolve()
    return dot


#: Where ``flow`` keeps a run's private snapshot index in a repository (docs/spec.md 12): a
#: run in the checkout without ``--no-snapshots`` would add its refs to the developer's repo.
_SNAPSHOT_FOLDER = _git_dir() / "flow"


def _snapshots_in_checkout() -> frozenset[str]:
    """The runs that have a snapshot index in the checkout's repository (one folder each)."""
    try:
        return frozenset(os.listdir(_SNAPSHOT_FOLDER))
    except OSError:
        return frozenset()


#: Looked at once by the session's first process: its workers share the folder, so a test of
#: one worker would be blamed for another's, and the session as a whole is checked instead.
_SNAPSHOTS = _snapshots_in_checkout()


def _new_in_checkout() -> list[str]:
    """Entries that appeared in the checkout's folders since the last look (then forgotten)."""
    appeared: list[str] = []
    for folder, (mtime, entries) in list(_FOLDERS.items()):
        try:
            now = os.stat(folder).st_mtime_ns
        except FileNotFoundError:
            appeared.append(f"{folder.relative_to(ROOT)}/ (removed)")
            del _FOLDERS[folder]
            continue
        if now == mtime:  # the common case: one stat per folder and test
            continue
        current = frozenset(os.listdir(folder))
        _FOLDERS[folder] = (now, current)
        new = sorted(name for name in current - entries if name not in _ALLOWED)
        appeared += [str((folder / name).relative_to(ROOT)) for name in new]
    return appeared


@pytest.fixture(autouse=True)
def _private_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A temp HOME and XDG folders for the test; fail if it wrote into the checkout."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_STATE_HOME", ".local/state"),
    ):
        monkeypatch.setenv(name, str(home / sub))
    monkeypatch.delenv("FLOW_RAISE_ERRORS", raising=False)
    # Tracing stays off unless a test turns it on (and spans never reach a real collector).
    for name in (
        "FLOW_OTEL",
        "TRACEPARENT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    ):
        monkeypatch.delenv(name, raising=False)
    yield home
    appeared = _new_in_checkout()
    if appeared:
        pytest.fail(
            "the test wrote into the checkout (write under tmp_path instead): "
            + ", ".join(appeared),
            pytrace=False,
        )


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp folder that is the current working directory for the test."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
