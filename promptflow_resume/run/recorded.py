"""What a progress file chose for its run, checked before it is used.

A progress file may come from someone else (docs/spec.md 10): the workflow it names, the model
parameters and the endpoint it records are used only through these checks. Every command that
goes on with a recorded run (resume, status, compact) opens it the same way::

    workflow = workflow_for(run, path, override=None)
    check_params(run, workflow, path)
    provider = make_provider(run, path, stream=False, record=False, redactor=redactor)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import FileNotFoundFlowError
from ..base.redact import Redactor
from ..progress.model import Run
from ..progress.seal import Key, written_here
from ..providers import create_provider
from ..providers.provider import DEFAULT_IDLE_TIMEOUT, Provider, ProviderSettings
from ..workflow import IMPLICIT_STEP_ID, load_workflow
from ..workflow.agentdirs import AgentPlaces
from ..workflow.records import Workflow

if TYPE_CHECKING:
    from .runoptions import RunOptions


def workflow_for(
    run: Run,
    progress_path: Path,
    override: str | Path | None,
    *,
    workspace: Path | None = None,
    agent_dirs: Sequence[Path] = (),
) -> Workflow:
    """The workflow a run goes on with: ``override`` (``--workflow``) or the one its file names
    (``workspace`` and ``agent_dirs``: where its ``agent: NAME`` is looked up), with the handoff
    chain it follows composed from the agent files it records."""
    places = AgentPlaces(workspace, tuple(agent_dirs))
    workflow = _recorded_workflow(run, progress_path, override, places)
    if run.workflow.handoffs is None:
        return workflow
    from .handoffs import recompose

    return recompose(workflow, run.workflow.handoffs, progress_path.parent)


def _recorded_workflow(
    run: Run, progress_path: Path, override: str | Path | None, places: AgentPlaces
) -> Workflow:
    if override is not None:
        return _as_run_loaded(run, _load(override, places), places)
    path = progress_path.parent / run.workflow.path
    # Anything that exists is loaded, so a pipe or a device there is refused as one (10.4).
    if not path.exists() or path.is_dir():
        raise FileNotFoundFlowError(
            f"the workflow of this run, {run.workflow.path} (relative to the progress file), "
            "does not exist.",
            path=progress_path,
            field="$.workflow.path",
            hint="Pass the workflow with --workflow PATH, or restore the file.",
        )
    return _as_run_loaded(run, _load(path, places), places)


def _load(path: str | Path, places: AgentPlaces, *, single_prompt: bool = False) -> Workflow:
    return load_workflow(
        path, single_prompt=single_prompt, workspace=places.workspace, agent_dirs=places.extra
    )


def _as_run_loaded(run: Run, workflow: Workflow, places: AgentPlaces) -> Workflow:
    """``workflow`` read as one prompt when the run was started that way (``--single-prompt``):
    the checkpoint has the one step ``main`` and the one-prompt reading has its hash."""
    if (
        workflow.hash != run.workflow.hash
        and list(run.workflow.steps) == [IMPLICIT_STEP_ID]
        and len(workflow.steps) > 1
    ):
        single = _load(workflow.path, places, single_prompt=True)
        if single.hash == run.workflow.hash:
            return single
    return workflow


def outside_workspace(run: Run, progress_path: Path, workspace: Path) -> str | None:
    """A warning when the workflow a progress file names lies outside the workspace.

    A shared progress file chooses the workflow that runs (and so its commands); one that
    leads out of the folder being worked on is worth a second look before it runs.
    """
    target = (progress_path.parent / run.workflow.path).resolve()
    root = workspace.resolve()
    if target == root or root in target.parents:
        return None
    return (
        f"the run's workflow ({run.workflow.path}, from $.workflow.path of {progress_path}) is "
        f"{target}, outside the working folder {root}; check that it is the workflow you mean "
        "to run, or pass --workflow PATH."
    )


def check_params(run: Run, workflow: Workflow, progress_path: Path) -> None:
    """Refuse model parameters from the progress file that flow does not send (spec 10.2)."""
    from ..providers.params import check_recorded_params

    check_recorded_params(run.config.params, workflow.params, source=progress_path)


def check_endpoint(
    run: Run, progress_path: Path, provider: str | None, base_url: str | None
) -> None:
    """Refuse to send requests, and so an API key, to an endpoint only the progress file chose.

    ``provider`` and ``base_url`` are this call's overrides (``--provider``, ``--base-url``):
    the check is made with the provider the requests will really use (``providers.endpoints``
    has the rules, docs/spec.md 10.2).
    """
    from ..providers.endpoints import check_recorded

    if (provider is None or provider == run.config.provider) and written_here(run, Key.find()):
        # Recorded by this machine's flow with this provider, unchanged since (the run's
        # seal covers both): the person's own earlier choice, as good as --base-url.
        return
    check_recorded(
        provider or run.config.provider, run.config.base_url, given=base_url, source=progress_path
    )


def run_provider(
    run: Run, progress_path: Path, options: RunOptions, redactor: Redactor
) -> Provider:
    """The provider of an attempt carried out with ``options``: streamed or not, its
    timeouts, recorded or not, and the endpoint given on the command line."""
    return make_provider(
        run,
        progress_path,
        stream=options.stream,
        record=options.record,
        redactor=redactor,
        base_url=options.base_url,
        timeouts=(options.idle_timeout, options.request_timeout),
    )


def make_provider(
    run: Run,
    progress_path: Path,
    *,
    stream: bool,
    record: bool,
    redactor: Redactor,
    base_url: str | None = None,
    timeouts: tuple[float, float | None] = (DEFAULT_IDLE_TIMEOUT, None),
) -> Provider:
    """The run's provider; ``base_url`` is the endpoint as given (the file keeps it redacted),
    ``timeouts`` the idle timeout and the whole request's limit (docs/spec.md 5.2)."""
    config = run.config
    # The last gate before a provider exists: whatever path led here, the endpoint is judged
    # with the provider as every override left it.
    check_endpoint(run, progress_path, None, base_url)
    recording = str(progress_path.parent / config.recording) if config.recording else None
    redact = lambda text: redactor.redact(text)[0]  # noqa: E731
    settings = ProviderSettings(
        name=config.provider,
        model=config.model,
        base_url=base_url or config.base_url,
        stream=stream,
        timeout=timeouts[0],
        request_timeout=timeouts[1],
        recording=recording,
        # replay compares requests as they were recorded: redacted.
        extra={"redact": redact} if config.provider == "replay" else {},
    )
    provider = create_provider(settings)
    if record:
        from ..providers.recorder import RecordingProvider

        target = progress_path.parent / "session.recording.jsonl"
        provider = RecordingProvider(provider, target, redact=redact)
    return provider
