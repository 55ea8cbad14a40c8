"""What the tests share: local servers, ``flow`` subprocesses, fault simulations, and where
the checkout's files are.

Nothing here is a test (no module is named ``test_*``). The servers (``mcp_servers.py``,
``mcp_slow_server.py``, ``mcp_results_server.py``) and ``long_run.py`` also run as scripts:
start them by their path, ``SUPPORT / "mcp_servers.py"``.
"""

from __future__ import annotations

from pathlib import Path

#: This folder, where the scripts the tests start as processes live.
SUPPORT = Path(__file__).resolve().parent

#: The checkout these tests belong to.
REPO = SUPPORT.parent.parent

#: The golden files: workflows, progress files, hostile inputs.
FIXTURES = REPO / "tests" / "fixtures"
