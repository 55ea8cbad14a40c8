"""Named crash points for crash-safety tests.

``point("store.before_rename")`` does nothing unless the environment variable
``FLOW_CRASH_AT`` names that point as ``NAME`` or ``NAME:N``: then the process kills itself
with SIGKILL on the N-th pass (default 1), exactly as a power cut or ``kill -9`` would. With
``FLOW_CRASH_SIGNAL=INT`` (or ``TERM``, ``HUP``) it sends itself that signal instead, to test
a stop that arrives at exactly that moment. Only the test suite sets the variables; reading
them once keeps the cost of a pass to a dict lookup.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("FLOW_CRASH_AT", "")
_NAME, _, _COUNT = _SPEC.partition(":")
_TARGET = int(_COUNT) if _COUNT.isdigit() else 1
_SIGNAL = getattr(
    signal, "SIG" + os.environ.get("FLOW_CRASH_SIGNAL", "KILL").upper().removeprefix("SIG")
)
_passes = 0


def point(name: str) -> None:
    """Die by SIGKILL (or the ``FLOW_CRASH_SIGNAL``) here if ``FLOW_CRASH_AT`` asks for this
    point and pass."""
    global _passes
    if not _NAME or name != _NAME:
        return
    _passes += 1
    if _passes == _TARGET:
        os.kill(os.getpid(), _SIGNAL)
