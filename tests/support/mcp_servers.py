"""A real MCP server, written with the ``mcp`` SDK, that the MCP tests start.

``python tests/support/mcp_servers.py STATE_DIR [--http PORT]`` serves the ``notes`` tools over
stdio (or streamable HTTP on 127.0.0.1:PORT). Everything it does is written under STATE_DIR, so a
test can tell how often each tool really ran:

- ``pid``: the server's process id, written at start (one line per start, ``starts``).
- ``calls.log``: one line ``TOOL ARGS`` per call, written when the call begins.
- ``notes.txt``: the notes ``append_note`` and ``set_note`` write.

A call waits before it answers while ``STATE_DIR/hold`` exists, after writing
``STATE_DIR/holding`` (so a test can kill ``flow`` mid-call without timing anything); while
``STATE_DIR/hold-call`` holds a number N, only the N-th call (counted in ``calls.log``) waits;
``STATE_DIR/hold-after`` makes ``append_note`` wait after its effect (the note is written).
With ``STATE_DIR/more-tools`` present at start it lists one more tool (a changed tool list).
``crash`` exits the process mid-call, ``garble`` writes a non-JSON line into the protocol,
``hang`` never answers, ``boom`` raises (an ``isError`` result), ``leak`` returns the value of
the variable ``NOTES_TOKEN`` and prints it to stderr, ``trace_meta`` returns the trace context
its request's ``_meta`` carried (JSON).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ImageContent, ToolAnnotations

STATE = Path(sys.argv[1])
server = MCPServer("notes")

READ_ONLY = ToolAnnotations(read_only_hint=True)
IDEMPOTENT = ToolAnnotations(idempotent_hint=True, destructive_hint=False)
#: One transparent pixel.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def _begin(tool: str, args: str) -> None:
    with (STATE / "calls.log").open("a", encoding="utf-8") as log:
        log.write(f"{tool} {args}\n")
    hold_call = STATE / "hold-call"
    if hold_call.exists():
        number = len((STATE / "calls.log").read_text(encoding="utf-8").splitlines())
        if str(number) == hold_call.read_text(encoding="utf-8").strip():
            (STATE / "holding").write_text(tool, encoding="utf-8")
            while hold_call.exists():
                time.sleep(0.01)
    if (STATE / "hold").exists():
        (STATE / "holding").write_text(tool, encoding="utf-8")
        while (STATE / "hold").exists():
            time.sleep(0.01)


def _end() -> None:
    """After a tool's effect: wait while ``STATE/hold-after`` exists (the effect is done)."""
    if (STATE / "hold-after").exists():
        (STATE / "holding").write_text("after", encoding="utf-8")
        while (STATE / "hold-after").exists():
            time.sleep(0.01)


@server.tool(annotations=READ_ONLY)
def read_notes() -> str:
    """Read every note."""
    _begin("read_notes", "")
    path = STATE / "notes.txt"
    return path.read_text(encoding="utf-8") if path.exists() else "(no notes yet)"


@server.tool()
def append_note(text: str) -> str:
    """Append one line to the notes (not idempotent: each call adds a line)."""
    _begin("append_note", text)
    with (STATE / "notes.txt").open("a", encoding="utf-8") as notes:
        notes.write(text + "\n")
    _end()
    return f"appended: {text}"


@server.tool(annotations=IDEMPOTENT)
def set_note(text: str) -> str:
    """Replace the notes with one line (idempotent)."""
    _begin("set_note", text)
    (STATE / "notes.txt").write_text(text + "\n", encoding="utf-8")
    return f"set: {text}"


@server.tool(annotations=READ_ONLY)
def stats() -> dict[str, int]:
    """How many notes there are (structured content)."""
    _begin("stats", "")
    path = STATE / "notes.txt"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return {"notes": len(lines)}


@server.tool(annotations=READ_ONLY)
def picture() -> ImageContent:
    """A picture of the notes."""
    _begin("picture", "")
    return ImageContent(type="image", data=base64.b64encode(PIXEL).decode(), mime_type="image/png")


@server.tool()
def boom() -> str:
    """Always fails."""
    _begin("boom", "")
    raise ValueError("the notes are on fire")


@server.tool()
def crash() -> str:
    """The server dies in the middle of the call."""
    _begin("crash", "")
    os._exit(17)


@server.tool(annotations=READ_ONLY)
def hang() -> str:
    """Never answers."""
    _begin("hang", "")
    while True:
        time.sleep(1)


@server.tool(annotations=READ_ONLY)
def whoami(ctx: Context) -> str:
    """The ``X-Team`` header the client sent (over HTTP)."""
    _begin("whoami", "")
    headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
    return f"team: {headers.get('x-team', 'unknown')}"


@server.tool(annotations=READ_ONLY)
def trace_meta(ctx: Context) -> str:
    """The ``traceparent`` and ``tracestate`` of the request's ``_meta`` (trace context)."""
    _begin("trace_meta", "")
    meta = ctx.request_context.meta or {}
    found = {k: meta.get(k) for k in ("traceparent", "tracestate") if meta.get(k)}
    return json.dumps(found, sort_keys=True)


@server.tool(annotations=READ_ONLY)
def garble() -> str:
    """Writes a line that is not JSON-RPC into the protocol stream, then answers."""
    _begin("garble", "")
    sys.stdout.write("this is not a JSON-RPC message\n")
    sys.stdout.flush()
    return "answered after the noise"


@server.tool(annotations=READ_ONLY)
def leak() -> str:
    """Says the server's token (a secret) out loud."""
    _begin("leak", "")
    token = os.environ.get("NOTES_TOKEN", "")
    print(f"debug: token is {token}", file=sys.stderr, flush=True)
    return f"the token is {token}"


if (STATE / "more-tools").exists():

    @server.tool(annotations=READ_ONLY)
    def count_words() -> int:
        """How many words the notes hold (present only when STATE/more-tools exists)."""
        path = STATE / "notes.txt"
        return len(path.read_text(encoding="utf-8").split()) if path.exists() else 0


if __name__ == "__main__":
    STATE.mkdir(parents=True, exist_ok=True)
    with (STATE / "starts").open("a", encoding="utf-8") as starts:
        starts.write(f"{os.getpid()}\n")
    (STATE / "pid").write_text(str(os.getpid()), encoding="utf-8")
    print("notes server starting", file=sys.stderr, flush=True)
    if len(sys.argv) > 3 and sys.argv[2] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        server.run()
