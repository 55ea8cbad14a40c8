"""The typer app and the small helpers every command module shares.

Each command lives in its own module under ``cli/`` and registers itself on ``app``; a command
parses options, calls the library, prints, and returns. Errors propagate as ``FlowError`` to
the single error boundary in ``cli.main``.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from ..base.printing import json_text

app = typer.Typer(
    name="flow",
    help=(
        "Run Markdown prompt workflows (*.prompt.md) with an LLM and tools; every run is kept "
        "in one human-readable progress.md that can be read, edited, shared and resumed."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON on stdout (the ``--json`` output of every command)."""
    sys.stdout.write(json_text(data) + "\n")
    sys.stdout.flush()


def event_stream(option: str | None) -> Any:
    """The event stream ``--events`` (or ``$FLOW_EVENTS``) asks for, else None; with ``-``
    stdout is the stream's alone (docs/spec.md 4.16). Close it with ``close_target()``."""
    from ..eventstream import EventStream, events_target

    where = events_target(option)
    return EventStream.open(where, take_stdout=True) if where else None


def err(text: str) -> None:
    """Write one line to stderr."""
    sys.stderr.write(text.rstrip("\n") + "\n")
    sys.stderr.flush()


def out(text: str = "") -> None:
    """Write one line to stdout."""
    sys.stdout.write(text + "\n")


def _version(value: bool) -> None:
    if value:
        from ..progress import version_text

        out(version_text())
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Run Markdown prompt workflows with an LLM and tools, resumably."""
