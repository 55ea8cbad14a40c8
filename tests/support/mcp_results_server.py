"""A real MCP server, written with the ``mcp`` SDK, whose results are large, binary, or depend
on its environment; the tests of ``tests/tools/test_mcp_results.py`` and
``test_mcp_config_more.py`` start it.

``python tests/support/mcp_results_server.py`` serves over stdio; ``... --sse PORT`` serves the
older SSE transport on 127.0.0.1:PORT (``/sse``). Tools:

- ``big_text(size)``: ``size`` bytes of numbered lines (``big_lines(size)`` below).
- ``picture()``: a 2x2 PNG; ``report()``: a PDF as an embedded binary resource.
- ``env_var(name)``: the value of the server's environment variable ``name`` or ``(unset)``.
- ``research(topic)``: listed with ``execution.taskSupport: "required"`` (it runs only as an
  MCP task, like server-everything's ``simulate-research-query``).
"""

from __future__ import annotations

import base64
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolExecution,
)

READ_ONLY = ToolAnnotations(read_only_hint=True)
#: A 2x2 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg=="
)
PDF = (
    b"%PDF-1.4\n% a report\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
)


def big_lines(size: int) -> str:
    """Exactly ``size`` bytes of numbered ASCII lines (the last one may be short)."""
    lines = []
    total = 0
    number = 0
    while total < size:
        number += 1
        line = f"line {number:07d}: the quick brown fox jumps over the lazy dog\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size]


class ResultsServer(MCPServer):
    """Lists ``research`` as a tool that requires task augmentation."""

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        return [
            t.model_copy(update={"execution": ToolExecution(task_support="required")})
            if t.name == "research"
            else t
            for t in tools
        ]


server = ResultsServer("results")


@server.tool(annotations=READ_ONLY)
def big_text(size: int) -> str:
    """Return ``size`` bytes of text."""
    return big_lines(size)


@server.tool(annotations=READ_ONLY)
def picture() -> ImageContent:
    """A small picture."""
    return ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png")


@server.tool(annotations=READ_ONLY)
def report() -> list[TextContent | EmbeddedResource]:
    """A PDF report."""
    blob = BlobResourceContents(
        uri="file:///report.pdf", mime_type="application/pdf", blob=base64.b64encode(PDF).decode()
    )
    return [
        TextContent(type="text", text="the report:"),
        EmbeddedResource(type="resource", resource=blob),
    ]


@server.tool(annotations=READ_ONLY)
def env_var(name: str) -> str:
    """The value of one of the server's environment variables."""
    return os.environ.get(name, "(unset)")


@server.tool(annotations=READ_ONLY)
def research(topic: str) -> str:
    """A long research job (runs only as a task)."""
    return f"researched {topic}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
