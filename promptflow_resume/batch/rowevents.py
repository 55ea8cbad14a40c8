"""What an engine reports to the batch about its rows (the same records for every engine)."""

from __future__ import annotations

from dataclasses import dataclass

from .worker import RowResult


@dataclass(frozen=True)
class Started:
    """A worker took up a row."""

    row: int
    worker: str


@dataclass(frozen=True)
class UsageSeen:
    """A running row's usage so far (after a model reply)."""

    row: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


@dataclass(frozen=True)
class Done:
    """A row's run stopped (completed or not); its file holds the checkpoint."""

    result: RowResult


@dataclass(frozen=True)
class Lost:
    """The worker running a row died before it reported; the row can be taken up again."""

    row: int
    reason: str


EngineEvent = Started | UsageSeen | Done | Lost
