"""Starting a run: from a ``StartRequest`` and the ``RunOptions`` to its first attempt.

The steps, in order: load the workflow and type its inputs; check the recording; with
``worktree``, make the git worktree the run works in (removed again if the run never got a
file to own it); make the run's first checkpoint, with the MCP servers the workflow names;
then run the first attempt (``attempt.run_attempt``) until the run stops.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..base import faults
from ..base.errors import FileNotFoundFlowError
from ..base.redact import Redactor
from ..base.stops import routed_to
from ..progress import ProgressStore
from ..progress.model import Run, WorktreeRef
from ..workflow.records import Workflow
from .attempt import (
    Attempt,
    Outcome,
    checkpoint_early_stop,
    children,
    default_progress_path,
    engine_options,
    exit_code_for,
    new_run,
    run_attempt,
    run_id_for,
)
from .events import Reporter
from .hooks import load_run_hooks
from .recorded import run_provider
from .requests import StartRequest
from .runoptions import RunOptions


def start(request: StartRequest, options: RunOptions) -> Outcome:
    """Start a new run of the request's workflow; run it until it completes or stops."""
    wf = request.load()
    values = request.inputs.resolve(wf)
    path = Path(request.progress) if request.progress is not None else default_progress_path(wf)
    recording = request.recording
    if recording is not None and not Path(recording).is_file():
        raise FileNotFoundFlowError(
            f"the recording {recording} does not exist.",
            path=recording,
            hint="Pass the path of a *.recording.jsonl file written by `flow run --record`.",
        )
    root = options.root()
    run_id: str | None = None
    tree = None
    if request.worktree:
        from ..gitworktree import create_worktree

        run_id = run_id_for(path, wf)
        tree, root = create_worktree(root, run_id, progress=path)
    try:
        # A hooks file with an error stops the run before its file exists.
        load_run_hooks(root, options)
        return _start_in(wf, values, path, root, (run_id, tree), request, options)
    except BaseException:
        if tree is not None and not path.exists():
            # Nothing recorded the worktree: it would be left behind with no run to own it.
            from ..gitworktree import remove_new

            remove_new(tree, run_id or "", path)
        raise


def _start_in(
    wf: Workflow,
    values: dict[str, Any],
    path: Path,
    root: Path,
    tree: tuple[str | None, WorktreeRef | None],
    request: StartRequest,
    options: RunOptions,
) -> Outcome:
    """``start`` once the workspace (``root``, a worktree's folder or not) is known."""
    from ..tools import build_tools
    from ..tools.mcp_wiring import start_mcp

    run_id, worktree = tree
    mcp = options.mcp_for(wf, root)
    redactor = Redactor.from_environment(extra_values=mcp.secrets if mcp else ())
    run = _new_run(wf, values, path, request, options, redactor, run_id)
    _record_choices(run, wf, request, path, worktree, options)
    provider = run_provider(run, path, options, redactor)
    tools = build_tools(wf, root, skills=options.skills)
    servers = start_mcp(wf, root, tools, mcp, path, redactor)
    try:
        store, stopped = _first_checkpoint(path, run)
        try:
            if stopped:  # while the file was written: the same as a stop just after it
                raise KeyboardInterrupt
            engine = engine_options(wf, root, redactor, options, mcp)
            _say_worktree(engine.reporter, worktree)
            attempt = Attempt(wf, run, store, provider, tools, servers, engine, children(options))
            run_attempt(attempt, first=True)
        except KeyboardInterrupt:
            checkpoint_early_stop(store, run)
            raise
        finally:
            store.close()
    finally:
        if servers is not None:
            servers.close()
    return Outcome(run=run, path=path, exit_code=exit_code_for(run))


def _new_run(
    wf: Workflow,
    values: dict[str, Any],
    path: Path,
    request: StartRequest,
    options: RunOptions,
    redactor: Redactor,
    run_id: str | None,
) -> Run:
    """The new run's checkpoint. What its choice of models has to say (a name flow does not
    know, models left out for want of a key) is said at once, before a provider is made:
    the missing key of the wrong provider is not the news."""
    from ..detect import keywords_for

    notes: list[str] = []
    run = new_run(
        wf,
        values,
        path,
        provider=options.provider,
        model=options.model,
        base_url=options.base_url,
        recording=request.recording,
        limits=options.limits,
        redactor=redactor,
        # From the redacted values: keywords are words of the inputs, and a token is a word.
        keywords=keywords_for(wf, redactor.redact_value(dict(values))[0]),
        run_id=run_id,
        notes=notes,
    )
    for note in notes:
        (options.reporter or Reporter()).notice(note)
    return run


def _record_choices(
    run: Run,
    wf: Workflow,
    request: StartRequest,
    path: Path,
    worktree: WorktreeRef | None,
    options: RunOptions,
) -> None:
    """What the start chose beyond the workflow, in the run's file: the worktree it works in,
    the handoff chain it follows (so a resume composes the same steps) and the commands and
    hosts the person's flags allowed (so views say what the run was allowed)."""
    run.worktree = worktree
    given = options.permissions
    run.config.permissions = run.config.permissions.with_given(given.commands, given.hosts)
    if request.handoffs is not None:
        from .handoffs import chain_record

        chain = request.handoffs
        run.workflow.handoffs = chain_record(chain.follow, chain.links, wf, path.parent)


def _first_checkpoint(path: Path, run: Run) -> tuple[ProgressStore, bool]:
    """The new run's store, its file written, and whether a stop (Ctrl-C, SIGTERM, SIGHUP)
    came meanwhile: the caller handles it as a stop just after the file is in place, so the
    file says ``interrupted``, never ``running``."""
    held: list[int] = []
    with _stops_held(held):
        store = ProgressStore.create(path, run)
        faults.point("api.run_created")
    return store, bool(held)


def _say_worktree(reporter: Reporter, tree: WorktreeRef | None) -> None:
    if tree is not None:
        reporter.notice(
            f"working in the worktree {tree.path} on branch {tree.branch} "
            f"(made from {tree.base[:12]})"
        )


@contextmanager
def _stops_held(held: list[int]) -> Iterator[None]:
    """Note SIGINT, SIGTERM and SIGHUP in ``held`` instead of acting on them, then restore.

    A stop that lands inside ``ProgressStore.create`` (after the file is in place, before the
    store is returned) would leave a new run's file saying ``running``, as a crash does; a
    batch stopping its workers the moment their rows' files appear hits that window.
    """
    with routed_to(lambda signum, _frame: held.append(signum)):
        yield
