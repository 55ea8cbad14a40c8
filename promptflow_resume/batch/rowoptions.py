"""The options a batch's rows run with: the one ``RunOptions`` record a single run takes,
checked for the batch's engine and carried in every row's task.

``start_batch`` and ``resume_batch`` take a ``RunOptions``; ``row_template`` turns it into
the task every row starts from (``RowTask.options`` is its record, ``RunOptions.to_record``),
so a row runs with what a single run would run with, except what is the batch's own: the
``max_cost`` is one budget over all rows (a ledger, docs/spec.md 8.3), the prices are the
batch's, and no row snapshots the working tree the rows share::

    check_row_options(options, "local", None)
    template = row_template(workflow, options, batch, events=False, shipped=False)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..base.errors import InputError
from ..run.runoptions import RunOptions
from ..workflow.records import Workflow
from .checkpoint import Batch
from .shipping import carried_trust
from .worker import RowTask


def _absolute(path: str | Path) -> str:
    return str(Path(path).resolve())


def _given_paths(options: RunOptions) -> list[str]:
    """The options that name files or folders of this machine, as ``--help`` names them."""
    named = (
        ("--file", options.file is not None),
        ("--skills", bool(options.skill_dirs)),
        ("--hooks", bool(options.hook_files)),
        ("--mcp-config", options.mcp_config is not None),
        ("--agents", bool(options.agent_dirs)),
    )
    return [name for name, given in named if given]


def check_row_options(options: RunOptions, engine: str, files: str | None) -> None:
    """Refuse before anything runs what the rows could not use: a ``--mcp-config`` that does
    not exist (as a single run refuses it), files of this machine for rows shipped to other
    machines, and ``--mcp-input`` values, which Ray would carry to the cluster."""
    if options.mcp_config is not None:
        from ..tools.mcp_config import find_configs

        find_configs(Path.cwd(), options.mcp_config)
    paths = _given_paths(options)
    if engine == "ray" and files == "shipped" and paths:
        raise InputError(
            f"{', '.join(paths)} name files of this machine, and the rows of this batch run "
            "on other machines with a copy of the workspace only (--files shipped).",
            hint="Leave them out, or resume with --files shared if every node mounts them at "
            "the same path.",
        )
    if engine == "ray" and options.mcp_inputs:
        raise InputError(
            "--mcp-input values are never recorded nor sent anywhere, and a Ray batch's rows "
            "would carry them to the cluster in their tasks.",
            hint="Set FLOW_MCP_INPUT_<ID> and send it to the tasks with --ray-env "
            "FLOW_MCP_INPUT_<ID>.",
        )


def row_template(
    workflow: Workflow,
    options: RunOptions,
    batch: Batch,
    *,
    events: bool,
    shipped: bool,
    recording: str | Path | None = None,
    traceparent: str | None = None,
) -> RowTask:
    """The task every row of ``batch`` starts from: ``options`` without the batch's budget
    (a ledger holds it) and with the batch's prices, paths made absolute (a row may run in
    another folder); the workspace's trust carried when the rows are shipped or
    ``--trust-workspace`` was given; ``traceparent``: the batch's trace context."""
    limits = replace(options.limits, max_cost=None, prices=dict(batch.prices))
    row_options = replace(
        options,
        limits=limits,
        file=None if options.file is None else _absolute(options.file),
        mcp_config=None if options.mcp_config is None else _absolute(options.mcp_config),
        skill_dirs=tuple(_absolute(p) for p in options.skill_dirs),
        hook_files=tuple(_absolute(p) for p in options.hook_files),
        agent_dirs=tuple(Path(_absolute(p)) for p in options.agent_dirs),
    )
    carried = shipped or options.trust is not None
    return RowTask(
        row=0,
        progress="",
        workflow=str(workflow.path.resolve()),
        workspace=str(Path.cwd()),
        options=row_options.to_record(),
        recording=_absolute(recording) if recording is not None else None,
        events=events,
        traceparent=traceparent,
        trust=carried_trust(Path.cwd(), options) if carried else None,
    )
