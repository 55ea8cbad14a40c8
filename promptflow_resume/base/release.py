"""This release of flow: its version, the one place it is written.

``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``), ``flow --version`` prints it, and a
progress file's ``min_flow`` is compared with it. It changes with what users get: each release
has a section in ``CHANGELOG.md`` and a git tag ``v<VERSION>`` (what ``rev:`` of a pre-commit
hook and ``uses: …@v<VERSION>`` of the action name)::

    VERSION   # "0.2.0"
"""

from __future__ import annotations

#: The version of this release: MAJOR.MINOR.PATCH.
VERSION = "0.2.0"
