"""Where a workspace keeps its MCP server configurations: the files a repository brings for
MCP, named once for the configuration reader (``tools/mcp_config.py``) and for trust
(``trust.py``), which must not load the tools to know them."""

from __future__ import annotations

from pathlib import Path

#: Where VS Code keeps a workspace's MCP servers, relative to the workspace root.
WORKSPACE_CONFIG = Path(".vscode") / "mcp.json"
#: The repository-root file that VS Code (and other MCP clients) also read; for a server
#: name both files define, ``WORKSPACE_CONFIG`` wins.
ROOT_CONFIG = Path(".mcp.json")
