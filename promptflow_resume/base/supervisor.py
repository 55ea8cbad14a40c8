"""The supervisor: a small process between ``flow`` and a program it starts (an MCP server, a
command), so that the program's whole process tree dies with ``flow``, however ``flow`` dies
(SIGKILL included)::

    argv = supervised(["npx", "-y", "@modelcontextprotocol/server-everything"])
    # [python, -I, -S, .../supervisor.py, FLOW_PID, --, npx, -y, ...]
    subprocess.Popen(argv, start_new_session=True, ...)  # the caller's Popen

The caller starts it as the leader of a session (and so of a process group) of its own. It

1. asks Linux for a signal when ``flow`` dies (``PR_SET_PDEATHSIG``), and checks every
   ``POLL`` seconds that its parent is still ``flow`` (the parent-death signal fires when the
   *thread* that started it ends, and other systems have none);
2. becomes a child subreaper on Linux (``PR_SET_CHILD_SUBREAPER``): a descendant whose parent
   dies is handed to the supervisor rather than to init, so a process that left the group
   with ``setsid`` (a daemon that double-forks) is still found as a descendant;
3. with ``--announce``, writes ``PID_LINE`` and its pid as its first stderr line (the MCP SDK
   starts the process and does not tell its pid; this lets ``flow`` stop a tree at once);
4. runs the program with the supervisor's own stdin, stdout and stderr (for an MCP server
   they are the protocol pipes), in the same process group;
5. when ``flow`` dies, or on SIGTERM, SIGINT or SIGHUP, ends the tree: SIGTERM to the group
   and to every descendant, ``GRACE`` seconds, then SIGKILL to whatever is left, and exits;
6. when the program exits on its own, ends what it left behind the same way (with
   ``--leave``: leaves it, for the caller to deal with) and exits with the program's status
   (a death by signal is passed on as the same signal);
7. gives the program the environment it was itself given (Python's start-up may add
   ``LC_CTYPE`` to its own; ``/proc/self/environ`` still holds the original on Linux).

Not covered: processes that leave the tree and its group both (a descendant reparented to
another subreaper, or one started by a daemon on the program's behalf: a container that
``docker run`` asks ``dockerd`` for — ``docker run`` passes SIGTERM on to it, which is why the
end starts with SIGTERM), and, outside Linux, descendants that leave the group with
``setsid``. A cgroup would cover these; it needs privileges ``flow`` does not have. On
Windows, ``supervised`` returns the command unchanged.

This file runs as a script under ``python -I -S`` (no site, no environment): it imports the
standard library only.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time

#: The first stderr line of a supervisor started with ``--announce``: this text, then its pid.
PID_LINE = "flow-supervisor pid "
#: Seconds between SIGTERM and SIGKILL when a tree is ended.
GRACE = 0.5
#: Seconds between checks that ``flow`` is still the parent.
POLL = 0.25
#: ``prctl`` options (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def supervised(argv: list[str], *, announce: bool = False, leave: bool = False) -> list[str]:
    """``argv`` wrapped so that its process tree cannot outlive this process (see above):
    ``announce`` its pid on stderr, ``leave`` what the program leaves behind when it exits."""
    if os.name != "posix":
        return list(argv)
    flags = ["--announce"] * announce + ["--leave"] * leave
    here = os.path.abspath(__file__)
    return [sys.executable, "-I", "-S", here, str(os.getpid()), *flags, "--", *argv]


def check_program(command: str, cwd: str | os.PathLike[str], path: str) -> None:
    """Raise ``FileNotFoundError`` or ``PermissionError`` as starting ``command`` directly
    would (under the supervisor such a program is only an exit status 127)."""
    if "/" in command:
        full = os.path.join(cwd, command)
        if not os.path.exists(full):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        if os.path.isdir(full) or not os.access(full, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
    elif _which(command, path) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


def _which(command: str, path: str) -> str | None:
    import shutil  # here, not at the top: the supervisor's own start stays short

    return shutil.which(command, path=path)


def announced_pid(line: str) -> int | None:
    """The pid in a supervisor's ``PID_LINE``, or None when ``line`` is not one."""
    text = line.strip()
    if not text.startswith(PID_LINE):
        return None
    number = text[len(PID_LINE) :]
    return int(number) if number.isdigit() else None


# --- the supervisor process ------------------------------------------------------------------


class _State:
    """What the signal handlers tell the main loop."""

    stop = False


def prctl(option: int, value: int) -> bool:
    """Call Linux's ``prctl``; False where it is missing or refused."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _processes() -> dict[int, tuple[int, int]] | None:
    """Every live (not zombie) process as pid -> (parent pid, process group); None without
    ``/proc``."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    found: dict[int, tuple[int, int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                data = stat.read()
        except OSError:
            continue  # it ended meanwhile
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) < 3 or fields[0] in (b"Z", b"X"):
            continue
        found[int(name)] = (int(fields[1]), int(fields[2]))
    return found


def _tree(me: int) -> list[int] | None:
    """The processes to end: the group's members and every descendant, except the
    supervisor; None where they cannot be listed."""
    procs = _processes()
    if procs is None:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found = {pid for pid, (_, pgid) in procs.items() if pgid == me}
    todo = [me]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    found.discard(me)
    return sorted(found)


def _kill(pid: int, sig: signal.Signals, *, group: bool = False) -> None:
    """Send ``sig`` to a process (or group) that may have ended meanwhile."""
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        return


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        _kill(pid, sig)


def _reap(child: int, status: list[int]) -> None:
    """Collect every exited child (orphans handed to the subreaper too); note the program's."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == child:
            status.append(code)


def _end_tree(me: int, child: int, status: list[int]) -> None:
    """SIGTERM the group and every descendant, wait up to ``GRACE``, SIGKILL what is left."""
    _kill(me, signal.SIGTERM, group=True)  # the supervisor's own handler only notes it
    listed = _tree(me)
    if listed is None:  # no /proc: wait for the program, then SIGKILL the group (and self)
        deadline = time.monotonic() + GRACE
        while not status and time.monotonic() < deadline:
            _reap(child, status)
            time.sleep(0.01)
        os.killpg(me, signal.SIGKILL)
        return
    _signal(listed, signal.SIGTERM)
    deadline = time.monotonic() + GRACE
    while time.monotonic() < deadline:
        _reap(child, status)
        if not _tree(me):
            return
        time.sleep(0.01)
    for _ in range(50):  # processes may fork while they are killed: sweep until none is left
        left = _tree(me)
        if not left:
            return
        _signal(left, signal.SIGKILL)
        time.sleep(0.005)
        _reap(child, status)


def _original_environment() -> dict[str, str] | None:
    """The environment this process was started with (None: the current one)."""
    try:
        with open("/proc/self/environ", "rb") as source:
            blob = source.read()
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in blob.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def _start(program: list[str]) -> int:
    """Fork and exec ``program`` with the original environment and the standard streams
    (the supervisor's other descriptors are close-on-exec); its pid."""
    env = _original_environment()
    pid = os.fork()
    if pid:
        return pid
    try:
        for name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores these; programs expect defaults
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        os.execvpe(program[0], program, os.environ if env is None else env)
    except OSError as error:
        os.write(2, f"flow: cannot start {program[0]!r}: {error.strerror}\n".encode())
    os._exit(127)


def _exit_like(code: int) -> None:
    """Exit with the program's wait status: its exit code, or death by the same signal."""
    if os.WIFSIGNALED(code):
        sig = os.WTERMSIG(code)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these two have no handler
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)  # a signal that does not kill by default: fall through
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(code))


def main(args: list[str]) -> None:
    """Run ``FLOW_PID [--announce] [--leave] -- PROGRAM ARGS`` as the module docstring says."""
    import select

    if len(args) < 3 or "--" not in args:
        sys.stderr.write("usage: supervisor.py FLOW_PID [--announce] [--leave] -- PROGRAM\n")
        os._exit(2)
    split = args.index("--")
    flow_pid, flags, program = int(args[0]), args[1:split], args[split + 1 :]
    me = os.getpid()
    state = _State()

    def stop(signum: int, frame: object) -> None:
        state.stop = True

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, stop)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # only to wake the loop
    # The parent-death signal wakes the loop; the loop then compares the parent itself.
    signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    prctl(_PR_SET_PDEATHSIG, signal.SIGUSR1)
    prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != flow_pid:  # flow died before the request was made: start nothing
        os._exit(1)
    if "--announce" in flags:
        os.write(2, f"{PID_LINE}{me}\n".encode())
    child = _start(program)
    # The program has the pipes; the supervisor's copies of stdin and stdout would only keep
    # them open after it exits (stderr stays, for messages until the supervisor ends).
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    status: list[int] = []
    while not status:
        _reap(child, status)
        if status:
            break
        if state.stop or os.getppid() != flow_pid:
            _end_tree(me, child, status)
            _reap(child, status)
            _exit_like(status[0] if status else int(signal.SIGKILL))
        ready, _, _ = select.select([wake_r], [], [], POLL)
        if ready:
            os.read(wake_r, 512)
    if "--leave" not in flags:
        _end_tree(me, child, status)  # whatever the program left behind
    _exit_like(status[0])


if __name__ == "__main__":
    main(sys.argv[1:])
