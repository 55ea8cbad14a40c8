"""``python -m promptflow_resume.batch``: a local batch worker (see ``batch.worker``)."""

from __future__ import annotations

from .worker import main

main()
