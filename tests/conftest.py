"""Shared fixtures: every test runs with a private FLOW_HOME and working directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Point FLOW_HOME at a temp folder so no test can touch a real one."""
    home = tmp_path_factory.mktemp("flow-home")
    monkeypatch.setenv("FLOW_HOME", str(home))
    monkeypatch.delenv("FLOW_RAISE_ERRORS", raising=False)
    yield home


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp folder that is the current working directory for the test."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
