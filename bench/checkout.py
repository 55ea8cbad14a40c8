"""Which checkout a benchmark measures: this one, or the one ``FLOW_BENCH_ROOT`` names.

``bench/compare.py`` sets ``FLOW_BENCH_ROOT`` for the side it measures, so one benchmark script
times two versions of the package (a temporary ``git worktree`` of an older commit, say) in
the same run. A benchmark imports this first::

    from checkout import ROOT, use_checkout

    use_checkout()  # ROOT's package comes first on sys.path, not an installed one
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The checkout whose package is measured.
ROOT = Path(os.environ.get("FLOW_BENCH_ROOT") or Path(__file__).resolve().parent.parent).resolve()


def use_checkout() -> Path:
    """Put ``ROOT`` first on ``sys.path`` (and on ``PYTHONPATH`` for the processes a benchmark
    starts); returns it."""
    sys.path.insert(0, str(ROOT))
    paths = [str(ROOT), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return ROOT
