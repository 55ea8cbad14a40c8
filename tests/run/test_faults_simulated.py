"""The faults the fault tests simulate are real: a size limit that does stop writes, a folder
that does refuse them (the simulations are in ``tests/support/faults.py``)."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.faults import read_only, size_limit


def test_a_size_limit_makes_writes_fail_with_efbig(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\n"
        "try:\n"
        "    os.write(fd, b'x' * 5000)\n"
        "except OSError as e:\n"
        "    print(e.errno)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "f")],
        capture_output=True,
        text=True,
        preexec_fn=size_limit(4096),
        check=True,
    )
    written = (tmp_path / "f").stat().st_size
    assert written == 4096 or result.stdout.strip() == str(errno.EFBIG)
    assert written <= 4096


def test_a_read_only_folder_refuses_new_files(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    with read_only(folder), pytest.raises(OSError) as info:
        (folder / "new.txt").write_text("x")
    assert info.value.errno in (errno.EACCES, errno.EROFS, errno.EPERM)
    (folder / "new.txt").write_text("x")  # writable again afterwards
