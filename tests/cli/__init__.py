"""The command line: exit codes and the exact words a user sees."""
