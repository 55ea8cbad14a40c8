"""``detect`` end to end on progress files: candidates, exact match, the hard time limit.

Tests of what is found pass ``time_limit=None``: the 200 ms limit is real time, which a loaded
machine can spend before the first file is read; the limit has tests of its own, with readers
that hold their reads.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from promptflow_resume.detect import detect, keywords_for, list_runs
from promptflow_resume.detect.summary import read_front_matter
from tests.support.detect import HASH, NOW, make_workflow, write_run


def runs_dir(root: Path) -> Path:
    return root / ".flow" / "runs"


WF = make_workflow(
    name="api-server",
    description="Build a REST API with JWT login",
    steps=[("Endpoints", "Write the FastAPI routes."), ("Tests", "Cover them with pytest.")],
)
INPUTS = {"framework": "fastapi"}


def test_no_runs_no_candidates(workdir: Path) -> None:
    found = detect(WF, INPUTS, now=NOW, time_limit=None)
    assert found.candidates == () and found.exact is None and found.skipped_reason is None
    assert found.keywords == tuple(keywords_for(WF, INPUTS))


def test_offers_similar_unfinished_runs_best_first(workdir: Path) -> None:
    runs = runs_dir(workdir)
    mine = keywords_for(WF, INPUTS)
    write_run(runs, "same-words", keywords=mine, updated=NOW - timedelta(hours=2))
    write_run(runs, "same-words-older", keywords=mine, updated=NOW - timedelta(days=5))
    write_run(runs, "half", keywords=[*mine[:3], "billing"])  # 3 of 6 words: 0.5
    write_run(runs, "unrelated", keywords=["frontend", "css", "dashboard"])
    write_run(runs, "finished", status="completed", keywords=mine)
    write_run(runs, "ancient", keywords=mine, updated=NOW - timedelta(days=40))

    found = detect(WF, INPUTS, now=NOW, time_limit=None)
    assert found.skipped_reason is None and found.exact is None
    # 1.0, then 1.0 x 0.65 (5 days old), then 0.5; unrelated, completed and 40-day-old
    # runs (1.0 x 0.2) are not offered
    assert [c.run_id for c in found.candidates] == ["same-words", "same-words-older", "half"]
    assert [c.score for c in found.candidates] == [1.0, 0.65, 0.5]
    best = found.candidates[0]
    assert best.score == 1.0 and set(best.matched) == set(mine)
    assert best.steps_done == 1 and best.steps_total == 3 and best.cost_usd == 0.12
    assert best.path == runs / "same-words" / "progress.md"


def test_identical_run_is_an_exact_match(workdir: Path) -> None:
    runs = runs_dir(workdir)
    write_run(runs, "twin", workflow_hash=HASH, inputs=INPUTS, keywords=[], steps_done=2)
    write_run(runs, "twin-other-input", workflow_hash=HASH, inputs={"framework": "flask"})
    found = detect(WF, INPUTS, now=NOW, time_limit=None)
    assert found.exact is not None and found.exact.run_id == "twin"
    assert found.candidates[0] is found.exact


def test_other_folders_are_searched_too(workdir: Path) -> None:
    shared = workdir / "shared-runs"
    write_run(shared, "teammate", keywords=keywords_for(WF, INPUTS))
    assert detect(WF, INPUTS, now=NOW, time_limit=None).candidates == ()
    found = detect(WF, INPUTS, folders=[shared], now=NOW, time_limit=None)
    assert [c.run_id for c in found.candidates] == ["teammate"]


def test_running_runs_count_only_when_their_owner_is_gone(workdir: Path) -> None:
    runs = runs_dir(workdir)
    words = keywords_for(WF, INPUTS)
    live = write_run(runs, "live", status="running", keywords=words)
    Path(str(live) + ".owner").write_text(
        json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": "x"})
    )
    write_run(runs, "orphan", status="running", keywords=words)  # no owner file: crashed
    found = detect(WF, INPUTS, now=NOW, time_limit=None)
    assert [c.run_id for c in found.candidates] == ["orphan"]


class GatedReader:
    """A front matter reader that reads ``free`` files at once and then holds every further
    read until ``release`` is set (a disk that stops answering)."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.count = 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    def __call__(self, path: Path) -> str | None:
        with self.lock:
            self.count += 1
            held = self.count > self.free
        if held:
            self.release.wait(30)
        return read_front_matter(path)


def wait_for_detect_worker() -> None:
    """Wait until a detect worker that outlived its caller has stored its index rows."""
    deadline = time.monotonic() + 10
    while any(t.name == "flow-detect" for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_time_limit_gives_up_fast_and_keeps_what_it_read(workdir: Path) -> None:
    runs = runs_dir(workdir)
    for n in range(30):
        write_run(runs, f"r{n:02d}", keywords=keywords_for(WF, INPUTS))
    reader = GatedReader(free=5)  # then the disk stops answering
    found = detect(WF, INPUTS, now=NOW, reader=reader, time_limit=1.0)
    # It gave up while a read was still held: the limit does not wait for the disk.
    assert not reader.release.is_set()
    assert found.candidates == () and found.exact is None
    assert found.skipped_reason is not None and "time limit" in found.skipped_reason
    reader.release.set()
    # What was read before the limit is in the index: the next check reads only the rest.
    wait_for_detect_worker()
    first = reader.count
    assert 5 < first < 30
    again = GatedReader(free=30)
    found = detect(WF, INPUTS, now=NOW, time_limit=None, reader=again)
    assert found.skipped_reason is None and len(found.candidates) == 3
    assert again.count == 30 - first


def test_time_limit_holds_even_when_one_read_hangs(workdir: Path) -> None:
    write_run(runs_dir(workdir), "r1", keywords=["api"])
    hanging = GatedReader(free=0)
    found = detect(WF, INPUTS, now=NOW, reader=hanging, time_limit=0.1)
    assert not hanging.release.is_set()  # it did not wait for the hung read
    hanging.release.set()
    assert found.skipped_reason is not None and "100 ms" in found.skipped_reason
    wait_for_detect_worker()


def test_errors_become_a_skip_reason(workdir: Path) -> None:
    write_run(runs_dir(workdir), "r1", keywords=["api"])

    def broken(path: Path) -> str | None:
        raise RuntimeError("disk on fire")

    found = detect(WF, INPUTS, now=NOW, time_limit=None, reader=broken)
    assert found.candidates == ()
    assert found.skipped_reason is not None and "disk on fire" in found.skipped_reason


def test_without_a_limit_everything_is_read(workdir: Path) -> None:
    runs = runs_dir(workdir)
    for n in range(5):
        write_run(runs, f"r{n}", keywords=keywords_for(WF, INPUTS))
    reader = GatedReader(free=5)
    found = detect(WF, INPUTS, now=NOW, reader=reader, time_limit=None)
    assert found.skipped_reason is None and len(found.candidates) == 3
    assert reader.count == 5


def test_detect_builds_the_same_index_flow_list_uses(workdir: Path) -> None:
    runs = runs_dir(workdir)
    write_run(runs, "r1", keywords=["api"])
    write_run(runs, "done", status="completed", keywords=["api"])
    detect(WF, INPUTS, now=NOW, time_limit=None)
    reader = GatedReader(free=99)  # counts the reads
    listed = list_runs(include_completed=True, reader=reader)
    assert sorted(s.run_id for s in listed) == ["done", "r1"]
    assert reader.count == 0


@pytest.mark.parametrize("limit", [0.0, None])
def test_zero_or_none_means_no_limit(workdir: Path, limit: float | None) -> None:
    write_run(runs_dir(workdir), "r1", keywords=keywords_for(WF, INPUTS))
    found = detect(WF, INPUTS, now=NOW, time_limit=limit)
    assert [c.run_id for c in found.candidates] == ["r1"]
