"""``flow ci``: a pull request's run as a GitHub Actions step (docs/spec.md 11.3).

``run.py`` runs or resumes the run and says how it stands; ``event.py`` reads the job's event
and who may command a run; ``basetrust.py`` keeps a job with secrets to what the base commit
holds; ``publish.py`` commits the run's files and pushes them where they belong::

    from promptflow_resume.ci import run_ci
    result = run_ci(os.environ)
"""

from __future__ import annotations

from .run import CiInputs, CiResult, run_ci, run_files

__all__ = ["CiInputs", "CiResult", "run_ci", "run_files"]
