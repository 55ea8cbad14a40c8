"""Reading and running a long run change Python's cycle collector only while they work, and
leave a program's own settings (enabled or not, thresholds, objects it froze) as they were."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptflow_resume.base import collector
from promptflow_resume.progress import ProgressStore, load_progress, render
from promptflow_resume.progress.examples import synthetic_run


@pytest.fixture
def long_run(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "progress.md"
    path.parent.mkdir()
    path.write_text(render(synthetic_run(600)), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    if enabled:
        gc.enable()
    else:
        gc.disable()


def _state() -> tuple[bool, tuple[int, int, int], int]:
    return gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()


@pytest.mark.parametrize("enabled", [True, False], ids=["enabled", "disabled"])
def test_reading_a_run_leaves_the_collector_as_it_found_it(long_run: Path, enabled: bool) -> None:
    gc.enable() if enabled else gc.disable()
    gc.set_threshold(500, 7, 9)
    before = _state()
    load_progress(long_run)
    assert _state() == before
    store, _, _ = ProgressStore.open(long_run)
    store.close()
    assert _state() == before


def test_entries_read_join_the_oldest_generation(long_run: Path) -> None:
    run, _ = load_progress(long_run)
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(entry) in oldest for entry in run.transcript)


def test_a_program_that_froze_objects_keeps_them_frozen(long_run: Path) -> None:
    mine = [object() for _ in range(10)]
    gc.freeze()
    frozen = gc.get_freeze_count()
    run, _ = load_progress(long_run)
    with collector.during_run():
        assert gc.get_freeze_count() == frozen  # nothing more frozen for it
    assert gc.get_freeze_count() == frozen
    assert run.transcript and mine


def test_a_run_inside_a_run_sets_the_collector_up_once(long_run: Path) -> None:
    before = _state()
    run, _ = load_progress(long_run)
    with collector.during_run():
        during = _state()
        assert during[1][2] == max(before[1][2], collector.RUN_GEN2_THRESHOLD)
        assert during[2] >= len(run.transcript)  # the loaded transcript is set aside
        with collector.during_run():  # a sub-workflow's run
            assert _state() == during
        assert _state() == during  # the child's end does not undo the parent's set-up
    assert _state() == before


def test_an_error_inside_still_restores_the_collector(long_run: Path) -> None:
    before = _state()
    with pytest.raises(RuntimeError), collector.during_run(), collector.long_lived():
        raise RuntimeError("stop")
    assert _state() == before


def test_what_a_run_reads_or_builds_at_once_is_set_aside_until_the_run_ends() -> None:
    before = _state()
    with collector.during_run():
        frozen = gc.get_freeze_count()
        with collector.long_lived():  # e.g. the messages of a resumed run's first request
            made = [[i] for i in range(1000)]
        assert gc.get_freeze_count() >= frozen + len(made)
    assert _state() == before  # released with the run
