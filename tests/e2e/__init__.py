"""Whole runs: the installed command, the README's commands, the SDK providers end to end."""
