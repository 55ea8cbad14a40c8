"""The run machinery: a run started or resumed, its attempts, and the engine that carries them.

``start`` and ``resume`` turn a request and the ``RunOptions`` (``options``) into an attempt
(``attempt``); ``resume`` owns the rules for a stopped run, with ``reconcile`` (what changed
since the checkpoint) and ``recovery`` (continue, retry, skip or ask). The engine (``engine``)
runs the steps; a person's answers to a paused run are ``approvals``; hooks run through
``hooks`` and ``hookprocess``. What watchers are told is ``events``. The library's front door
is ``promptflow_resume.api``, not this package.
"""
