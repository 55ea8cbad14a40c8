"""``flow compact``: summarise a stopped run's oldest turns so its next requests fit."""

from __future__ import annotations

import sys

import typer

from .app import app, out, print_json
from .options import AgentsDirOpt, BaseUrlOpt, ModelOpt, ProgressArg, ProviderOpt, WorkflowMovedOpt


@app.command("compact")
def compact_command(
    progress: ProgressArg,
    workflow: WorkflowMovedOpt = None,
    agents: AgentsDirOpt = [],  # noqa: B006 - typer copies list defaults
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    record: bool = typer.Option(
        False, "--record", help="Record the summary request beside the progress file."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was done as JSON."),
) -> int:
    """Compact a stopped run by hand: ask the model to summarise the oldest turns and record
    the summary as a compaction entry, which later requests carry in their place (the
    transcript itself stays whole). The step prompts and the most recent turns are kept
    verbatim. Exit 0 when compacted or when nothing is left to compact; a live run is refused
    (exit 6)."""
    from ..api import RunOptions, compact_run
    from .runconsole import ConsoleReporter

    reporter = ConsoleReporter(live=sys.stderr.isatty() and not as_json)
    options = RunOptions(
        provider=provider,
        model=model,
        base_url=base_url,
        record=record,
        reporter=None if as_json else reporter,
        agent_dirs=tuple(agents),
    )
    outcome = compact_run(progress, options, workflow_path=workflow)
    if as_json:
        print_json(outcome.to_dict())
    elif outcome.compacted and outcome.covers is not None:
        first, last = outcome.covers
        out(
            f"compacted entries {first}-{last} into entry {outcome.entry}: the next request "
            f"is about {outcome.tokens_after:,} tokens (was {outcome.tokens_before:,}); "
            f"resume with `flow resume {progress}`"
        )
    else:
        out(f"{progress}: {outcome.reason}")
    return 0
