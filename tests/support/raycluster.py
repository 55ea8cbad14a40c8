"""A Ray cluster of several nodes on this machine, whose worker nodes cannot see the tests' files.

The head node is started with the real ``ray start --head`` and no CPU, so every task runs on a
worker node. Each worker node is a ``ray start --address`` inside a mount namespace of its own
(``unshare --mount``, which needs root) where a tmpfs covers the folders it must not see: the
tests' temp folders, which hold the driver's batch folder, workspace and home. What a worker
node sees of them is its tmpfs, readable through ``/proc/<pid>/root`` (``Node.sees``), so a
test can check that the node wrote nothing there.

Every process is started by this module as ``ray start --block`` (which keeps Ray's processes
as its descendants) and stopped by SIGKILL of each process it started, by pid: never ``ray
stop``, which stops every Ray on the machine. Nodes use 1-2 CPU slots and a Ray temp folder of
their own, with the ports they listen on chosen free, so clusters of tests and of other people
on the same machine do not meet::

    with RayCluster(hidden=[tmp_path_factory.getbasetemp()]) as cluster:
        node = cluster.add_worker()
        ...  # flow batch --engine ray --address cluster.address
        node.kill()                      # SIGKILL of the node's raylet, workers and all
        cluster.add_worker()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests import support

#: Seconds a node has to come up.
START_TIMEOUT = 90
#: The ``ray`` command of this environment.
RAY = str(Path(sys.executable).with_name("ray"))


def usable() -> str | None:
    """Why a cluster cannot be made here (None when it can): root, ``unshare``, ``ray``."""
    if os.geteuid() != 0:
        return "a worker node in its own mount namespace needs root (unshare --mount)"
    if shutil.which("unshare") is None or not Path(RAY).exists():
        return "unshare or the ray command is missing"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "true"],
        capture_output=True,
        check=False,
    )
    return None if probe.returncode == 0 else "unshare --mount is not allowed here"


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (its children, theirs, ...), read from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


class Node:
    """One ``ray start --block`` process and everything below it."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    def kill(self) -> None:
        """SIGKILL the node's every process (raylet, workers, agents) at once."""
        for pid in [self.proc.pid, *descendants(self.proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def sees(self, path: Path) -> Path:
        """``path`` as the node sees it (through its mount namespace)."""
        return Path(f"/proc/{self.proc.pid}/root") / path.relative_to("/")

    def hides(self, path: Path) -> bool:
        """Whether a mount of the node's own covers ``path`` (a tmpfs over it)."""
        with contextlib.suppress(OSError):
            mounts = Path(f"/proc/{self.proc.pid}/mountinfo").read_text().splitlines()
            return any(line.split()[4] == str(path) for line in mounts)
        return False

    def running(self) -> bool:
        """Whether the node's ``ray start`` still runs."""
        return self.proc.poll() is None


class RayCluster:
    """A head node and worker nodes on this machine (see the module); a context manager."""

    def __init__(self, *, hidden: Sequence[Path], env: dict[str, str] | None = None) -> None:
        self.hidden = [Path(p) for p in hidden]
        self.folder = Path(tempfile.mkdtemp(prefix="frc-", dir="/tmp"))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[Node] = []
        self._env = env or {}

    def _node_env(self, name: str) -> dict[str, str]:
        """A node's environment: this checkout's code, a home of its own, quick health checks
        (a killed node is taken for dead within seconds)."""
        home = self.folder / f"{name}-home"
        home.mkdir(mode=0o700, exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("FLOW_", "RAY_", "XDG_")) and k not in ("PYTHONPATH",)
        }
        env.update(
            PYTHONPATH=str(support.REPO),
            HOME=str(home),
            RAY_AUTH_MODE="disabled",
            RAY_USAGE_STATS_ENABLED="0",
            RAY_health_check_period_ms="500",
            RAY_health_check_timeout_ms="1000",
            RAY_health_check_failure_threshold="4",
            RAY_health_check_initial_delay_ms="0",
        )
        env.update(self._env)
        return env

    def _start(self, name: str, argv: list[str]) -> Node:
        log = self.folder / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                env=self._node_env(name),
                cwd=self.folder,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        node = Node(proc, log)
        self.nodes.append(node)
        return node

    def start(self) -> None:
        """The head node, with no CPU: tasks go to worker nodes; the driver's relay (0 CPU)
        may live here."""
        self._start(
            "head",
            [
                RAY,
                "start",
                "--head",
                "--block",
                # Each node an address of its own: a driver started here joins the head's
                # raylet (found by the address it reaches the cluster from), never a worker's.
                "--node-ip-address=127.0.0.1",
                f"--port={self.port}",
                "--num-cpus=0",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={self.folder}",
                f"--dashboard-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}",
            ],
        )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
                return
            if time.monotonic() > deadline or not self.nodes[0].running():
                raise RuntimeError(f"the head node did not start: {self.nodes[0].log.read_text()}")
            time.sleep(0.2)

    def add_worker(self, cpus: int = 3) -> Node:
        """A worker node in a mount namespace where a tmpfs covers each hidden folder."""
        script = (
            'for d in "$@"; do mount -t tmpfs -o size=64m,mode=0700 tmpfs "$d" || exit 1; done; '
            f"exec {RAY} start --address={self.address} --block --num-cpus={cpus} "
            f"--node-ip-address=127.0.0.{len(self.nodes) + 1} "
            f"--disable-usage-stats --dashboard-agent-listen-port={free_port()}"
        )
        name = f"worker{len(self.nodes)}"
        argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]
        node = self._start(name, [*argv, "sh", *map(str, self.hidden)])
        # Its tmpfs mounts are made before ``ray start`` runs: wait for them to be there.
        deadline = time.monotonic() + START_TIMEOUT
        while not all(node.hides(path) for path in self.hidden):
            if time.monotonic() > deadline or not node.running():
                raise RuntimeError(f"the worker node did not start: {node.log.read_text()}")
            time.sleep(0.05)
        return node

    def close(self) -> None:
        """Kill every node (workers first), and remove the cluster's temp folder."""
        for node in reversed(self.nodes):
            node.kill()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
