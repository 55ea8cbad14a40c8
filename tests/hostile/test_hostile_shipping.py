"""What a shipped row's two ends let the other make them write (docs/spec.md 8.6, 10.10).

The driver writes a row's files from what a node sends, and a node writes its scratch folder
from what the driver answers. Either end may be wrong (a bug, a node someone else controls, a
batch folder with a link planted in it): every path one end gets from the other is confined
before it is used, to the row's folder at the driver and to the scratch folder on the node,
and no write goes through a link.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import pytest

from promptflow_resume.batch.relay import Channel, Desk, Reply, Request
from promptflow_resume.batch.shipping import Bundle, on_node, run_shipped
from promptflow_resume.batch.worker import RowTask
from promptflow_resume.progress.mirror import MirrorError, MirrorOp


@pytest.fixture
def channel(tmp_path: Path) -> Channel:
    desk = Desk(tmp_path / "batch")
    opened = Channel(desk.handle, 1)
    opened.open()
    return opened


@pytest.mark.parametrize(
    "op",
    [
        MirrorOp("fold", "../../../outside.md", b"x"),
        MirrorOp("fold", "/tmp/outside.md", b"x"),
        MirrorOp("fold", "a/../../outside.md", b"x"),
        MirrorOp("fold", "progress.md.lock", b"x"),
        MirrorOp("fold", ".hidden.md", b"x"),
        MirrorOp("append", "../0002/progress.md", b"x\n"),
        MirrorOp("drop", "../../batch.md"),
        MirrorOp("sidecar", "progress.md", b"x", link="progress.files/../../../outside.md"),
        MirrorOp("sidecar", "progress.md", b"x", link="/tmp/outside.md"),
        MirrorOp("extra", "../../outside.log", b"x"),
        MirrorOp("extra", "hooks.sh", b"x"),
    ],
    ids=lambda op: f"{op.kind}:{op.path}:{op.link}",
)
def test_the_driver_writes_nothing_outside_the_row_s_folder(
    channel: Channel, tmp_path: Path, op: MirrorOp
) -> None:
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(MirrorError):
        channel.send(op)
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before


def test_the_driver_writes_nothing_through_a_link_in_the_row_s_folder(
    channel: Channel, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    row = tmp_path / "batch" / "rows" / "0001"
    (row / "progress.steps").symlink_to(outside)
    (row / "progress.files").symlink_to(outside)
    for op in (
        MirrorOp("fold", "progress.steps/child/progress.md", b"x"),
        MirrorOp("sidecar", "progress.md", b"x", link="progress.files/out.txt"),
    ):
        with pytest.raises(MirrorError):
            channel.send(op)
    os.symlink(outside / "target.md", row / "linked.md")
    with pytest.raises(MirrorError, match="symbolic link"):
        channel.send(MirrorOp("fold", "linked.md", b"x"))
    assert list(outside.iterdir()) == []


def test_the_driver_does_not_send_what_a_link_in_the_row_s_folder_leads_to(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not the row's", encoding="utf-8")
    row = tmp_path / "batch" / "rows" / "0001"
    row.mkdir(parents=True)
    (row / "progress.md").write_text("---\n", encoding="utf-8")
    (row / "stolen.md").symlink_to(secret)
    (row / "elsewhere").symlink_to(tmp_path)
    desk = Desk(tmp_path / "batch")
    files = Channel(desk.handle, 1).open()
    desk.close()
    assert [rel for rel, _ in files] == ["progress.md"]


def _hostile_desk(files: list[tuple[str, bytes]]) -> Channel:
    """A driver's end that answers an attempt's opening with ``files``."""

    def send(request: Request) -> Reply:
        return {"token": "t", "files": files} if request.kind == "open" else {}

    return Channel(send, 1)


@pytest.mark.parametrize(
    ("files", "bundle"),
    [
        ([("../../../../outside.txt", b"x")], Bundle()),
        ([("/tmp/outside.txt", b"x")], Bundle()),
        ([], Bundle((("/../outside.txt", b"x", False),))),
        ([], Bundle((("relative/outside.txt", b"x", False),))),
    ],
)
def test_a_node_writes_nothing_outside_its_scratch_folder(
    tmp_path: Path, files: list[tuple[str, bytes]], bundle: Bundle
) -> None:
    task = RowTask(
        row=1,
        progress=str(tmp_path / "out" / "rows" / "0001" / "progress.md"),
        workflow=str(tmp_path / "w.prompt.md"),
        workspace=str(tmp_path),
    )
    result = run_shipped(asdict(task), bundle, _hostile_desk(files))
    assert result.status == "failed" and "could not begin" in (result.error or "")
    assert not (tmp_path / "outside.txt").exists() and not Path("/tmp/outside.txt").exists()


def test_a_driver_path_below_a_link_of_the_scratch_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "work").symlink_to(Path("/"))
    with pytest.raises(ValueError, match="symbolic link"):
        on_node("/work/etc/passwd", tmp_path)
