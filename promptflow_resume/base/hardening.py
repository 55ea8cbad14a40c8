"""Keeping flow's own secrets from the programs it starts.

flow holds model keys in its environment and hands each program it starts (a hook, an MCP
server, a command tool) only the variables that program is given. On Linux any process of the
same user may still read ``/proc/<pid>/environ`` and attach a debugger to flow, unless flow
is marked non-dumpable (``PR_SET_DUMPABLE`` 0): then those files belong to root and ``ptrace``
is refused. The mark is not inherited across ``exec``, so the programs flow starts are
ordinary processes; flow itself loses core dumps, which would hold its keys too::

    hide_environment()  # True where the platform has it
"""

from __future__ import annotations

from .supervisor import prctl

#: ``prctl`` option (linux/prctl.h).
_PR_SET_DUMPABLE = 4


def hide_environment() -> bool:
    """Mark this process non-dumpable; False where the platform has no such mark."""
    return prctl(_PR_SET_DUMPABLE, 0)
