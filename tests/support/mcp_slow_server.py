"""A real MCP server, written with the ``mcp`` SDK, whose one tool takes a while and then has
an effect: ``python tests/support/mcp_slow_server.py STATE_DIR SECONDS [TOKEN]``.

``slow_write`` writes ``STATE_DIR/started`` when the call begins, sleeps SECONDS, then writes
``STATE_DIR/marker`` (its effect) and answers. TOKEN is only carried in argv, so a test can
find the process in ``/proc``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

STATE = Path(sys.argv[1])
SECONDS = float(sys.argv[2])
server = MCPServer("slow")


@server.tool()
def slow_write(text: str) -> str:
    """Wait a while, then write ``text`` to the marker file (not idempotent)."""
    (STATE / "started").write_text(text, encoding="utf-8")
    time.sleep(SECONDS)
    (STATE / "marker").write_text(text, encoding="utf-8")
    return f"wrote: {text}"


if __name__ == "__main__":
    STATE.mkdir(parents=True, exist_ok=True)
    server.run()
