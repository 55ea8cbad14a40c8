"""Whether flow on this machine wrote a run: its seal (``progress.seal``) checked with the key.

``flow run`` resumes an identical run without asking, and ``--yes`` takes a similar one, only
when this is true: a progress file that arrived in a pull request or from another machine is
offered, never taken silently (docs/spec.md 10.1)::

    written_here(Path(".flow/runs/r1/progress.md"))   # reads the front matter only
"""

from __future__ import annotations

from pathlib import Path

from ..base import yamlio
from ..base.errors import FlowError
from ..progress.frontmatter import normalize_yaml_values
from ..progress.model import Seal
from ..progress.seal import Key, run_sealed_here
from .summary import UnreadableProgress, read_front_matter


def written_here(path: Path, key: Key | None = None) -> bool:
    """True when flow on this machine made or last resumed the run at ``path``."""
    key = key or Key.find()
    if key is None:
        return False
    try:
        data = normalize_yaml_values(yamlio.load(read_front_matter(path) or "", path=path))
    except (FlowError, UnreadableProgress):
        return False
    seal = data.get("seal") if isinstance(data, dict) else None
    if not isinstance(seal, dict) or not isinstance(seal.get("by"), str):
        return False
    found = Seal(by=seal["by"], run=str(seal.get("run")))
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    url = config.get("base_url")
    fields = (
        str(data.get("run_id")),
        str(data.get("created")),
        str(config.get("provider")),
        url if isinstance(url, str) else None,
    )
    return run_sealed_here(fields, found, key)
