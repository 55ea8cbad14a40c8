"""The ground layer: records and helpers that know nothing of runs, workflows or providers.

Every other part of the package may import from here; nothing here imports from above (the
import-linter contracts in ``pyproject.toml`` enforce it). Each module is one concept: the error
tree and exit codes (``errors``), YAML reading and writing (``yamlio``), durable writes
(``durable``), secret redaction (``redact``), file opening that refuses links and special files
(``safeopen``), and the small helpers beside them.
"""
