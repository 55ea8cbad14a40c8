"""Collecting the problems found while loading a workflow, each with its position."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

from .records import Diagnostic, Severity


@dataclass
class Collector:
    """Gathers diagnostics for one file; loading goes on after an error to find the others."""

    path: str
    items: list[Diagnostic] = field(default_factory=list)

    def add(
        self,
        severity: Severity,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        code: str = "workflow",
    ) -> None:
        """Record one diagnostic."""
        self.items.append(Diagnostic(severity, message, self.path, line, column, field, code))

    def error(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        code: str = "workflow",
    ) -> None:
        """Record an error."""
        self.add("error", message, line=line, column=column, field=field, code=code)

    def warning(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        code: str = "workflow",
    ) -> None:
        """Record a warning."""
        self.add("warning", message, line=line, column=column, field=field, code=code)

    @property
    def has_errors(self) -> bool:
        """True once any error was recorded."""
        return any(d.severity == "error" for d in self.items)

    def sorted(self) -> tuple[Diagnostic, ...]:
        """Diagnostics in file order (errors first on the same position)."""
        return tuple(
            sorted(
                self.items,
                key=lambda d: (d.line or 0, d.column or 0, d.severity != "error"),
            )
        )


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean `x`?)`` for a close match among ``choices``, or an empty string."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    if word.lower() in lowered and lowered[word.lower()] != word:
        return f" (did you mean `{lowered[word.lower()]}`?)"
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.75)
    return f" (did you mean `{close[0]}`?)" if close else ""
