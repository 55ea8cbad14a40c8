"""Shared fixtures: every test runs with a private home, and may not write into the checkout.

flow keeps nothing outside a run's folder (there is no per-user state), but what it starts
and reads does use the home: git reads ``~/.gitconfig``, MCP configurations expand
``${userHome}``, ``flow share --scrub-home`` replaces the home's path. So every test gets a
temp ``HOME`` (and XDG folders inside it), inherited by the ``flow`` processes it starts.

Slow tests (``@pytest.mark.slow``: soaks, long fuzz runs, sweeps) run only with ``--slow``,
or when the ``CI`` variable is set (as CI services set it, and ``.ci/run`` runs there): a local
``python -m pytest -q`` stays short, CI runs everything with the same command.

A test that writes into the checkout (a ``.flow/runs`` folder left by a command run from the
repository's root, a file beside the fixtures) fails, naming what appeared: tests write under
their temp folders only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

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


def slow_enabled(config: pytest.Config) -> bool:
    """Whether this session runs the tests marked slow: ``--slow``, or ``CI`` set (not to
    ``false`` or ``0``)."""
    ci = os.environ.get("CI", "").strip().lower()
    return bool(config.getoption("--slow")) or ci not in ("", "0", "false", "no")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers a core in the default run, where most tests wait on a ``flow``
    process they started; one a core with the slow tests, whose kill storms and soaks want a
    steady machine more than a short run."""
    cores = os.cpu_count() or 1
    return cores if slow_enabled(config) else 2 * cores


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked slow unless the slow switch is on, saying how to run them."""
    if slow_enabled(config):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow (CI runs it)")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


def pytest_configure(config: pytest.Config) -> None:
    """``pytest --collect-only`` runs no test, so every snapshot looks unused to syrupy, which
    would fail the collection; a run that executes tests still fails on unused snapshots."""
    if config.option.collectonly:
        config.option.warn_unused_snapshots = True


def _watched_folders() -> dict[Path, tuple[int, frozenset[str]]]:
    """Every folder of the checkout with its modification time and entries."""
    folders: dict[Path, tuple[int, frozenset[str]]] = {}
    for top, dirs, files in os.walk(ROOT):
        folders[Path(top)] = (os.stat(top).st_mtime_ns, frozenset(dirs + files))
        dirs[:] = [d for d in dirs if d not in _UNWATCHED | _ALLOWED]
        dirs[:] = [d for d in dirs if not d.endswith(".egg-info")]
    return folders


_FOLDERS = _watched_folders()


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
