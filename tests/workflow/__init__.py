"""Workflow files: loading, inputs, hashing, command tools, invalid files, ``check_workflows``."""
