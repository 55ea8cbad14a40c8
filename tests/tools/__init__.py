"""Tools: built-in file tools, command tools, consent, Copilot tool names, and MCP servers."""
