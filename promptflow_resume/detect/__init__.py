"""Similar-run detection: find unfinished runs like a new one, and offer to resume them.

Pure Python and SQLite, no model call. A run's keywords (``keywords_for``) are stored in its
progress file when it starts; ``detect`` compares them with every resumable run it finds
(Jaccard overlap times a recency factor, threshold 0.35, best 3), spots identical runs (same
workflow hash and inputs), and stays within a hard time limit; ``choose`` asks the user::

    from promptflow_resume.detect import choose, detect, keywords_for

    run.keywords = keywords_for(workflow, inputs)          # at run start
    found = detect(workflow, inputs)                         # before starting
    chosen = choose(found, interactive=sys.stdin.isatty(), assume_yes=yes)
    if chosen is not None:
        ...  # resume chosen.path instead of starting fresh

Modules: ``keywords`` (vocabulary, ``keywords_for``), ``summary`` (front matter -> RunSummary),
``index`` (finding files, the SQLite cache), ``score`` (the formula), ``core`` (``detect``,
``list_runs``), ``listing`` (``flow list``: runs with their child runs), ``prompt``
(``choose`` and line formats).
"""

from __future__ import annotations

from .core import DEFAULT_TIME_LIMIT, Candidate, Detection, detect, list_runs, rank
from .keywords import MAX_KEYWORDS, keywords_for, normalize_words
from .listing import RunTree, list_run_trees
from .prompt import choose, exact_line, run_to_resume
from .score import MAX_CANDIDATES, THRESHOLD, jaccard, recency_factor
from .summary import RunSummary, owner_alive

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "MAX_CANDIDATES",
    "MAX_KEYWORDS",
    "THRESHOLD",
    "Candidate",
    "Detection",
    "RunSummary",
    "RunTree",
    "choose",
    "detect",
    "exact_line",
    "jaccard",
    "keywords_for",
    "list_run_trees",
    "list_runs",
    "normalize_words",
    "owner_alive",
    "rank",
    "recency_factor",
    "run_to_resume",
]
