"""The run commands' rules, one call per command: what ``flow run``, ``flow resume`` and
``flow status`` do with what the command line gave them.

- ``flow run`` (``run_workflow``): load the workflow and type its inputs; look for a similar
  incomplete run and resume it when the person (or an identical run) says so; otherwise start
  a new one. The ``echo`` provider is a dry run: the reporter is told, and shows every request.
- ``flow resume`` and ``flow status`` (``resume_target``): a batch file (``flow batch``'s
  ``batch.md``) is resumed and shown by the batch module, a progress file by the API; the
  options that choose for one run are refused on a batch.
- The command-line forms the library reads: ``name=value`` assignments (``--input``,
  ``--set``) and ``--selection @FILE``.

The CLI parses its options, calls one of these, and prints what it returns::

    command = RunCommand(Path("triage.prompt.md"), input_items=("topic=bees",), new=True)
    outcome = run_workflow(command, RunOptions(provider="echo"))
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .api import Outcome, ResolvedInputs, ResumeRequest, StartRequest, resume_run, start_run
from .base.errors import InputError
from .base.paths import display_path
from .run.events import Reporter
from .run.handoffs import DEFAULT_MAX_HANDOFFS, Follow, chained
from .run.requests import AskInput, GivenInputs
from .run.runoptions import RunOptions
from .workflow import load_workflow
from .workflow.records import Workflow

if TYPE_CHECKING:
    from .otel.exporting import ExportSummary

#: The provider whose runs send nothing: it shows the prompts that would be sent.
DRY_RUN_PROVIDER = "echo"


def parse_assignments(items: list[str], option: str) -> dict[str, str]:
    """``["a=1", "b=x y"]`` → ``{"a": "1", "b": "x y"}``; a malformed item is an InputError."""
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"{option} {item!r} is not of the form name=value.")
        values[name.strip()] = value
    return values


def mcp_input_values(items: list[str]) -> dict[str, str]:
    """``--mcp-input ID=VALUE`` items as a mapping; a malformed item is an InputError that
    does not repeat it (it may be a secret)."""
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InputError(
                "--mcp-input takes ID=VALUE: the id of the input (as in ${input:ID}), '=', "
                "then its value."
            )
        values[name.strip()] = value
    return values


def given_prices(items: list[str], file: str | Path | None) -> dict[str, dict[str, float]]:
    """``--prices FILE`` and then every ``--price MODEL=IN/OUT[/CACHED]``, as a run records
    them (docs/spec.md 5.4); a bad value or file is refused before anything runs."""
    from .providers.givenprices import load_prices_file, parse_price_options, prices_record

    given = load_prices_file(file) if file is not None else {}
    given.update(parse_price_options(items))
    return prices_record(given)


def read_selection(value: str | None, option: str = "--selection") -> str | None:
    """``--selection`` (and ``--task``): the text itself, or ``@FILE`` for a file's text
    (``@@`` for a leading @)."""
    if value is None or not value.startswith("@"):
        return value
    if value.startswith("@@"):
        return value[1:]
    path = Path(value[1:])
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InputError(
            f"{option} {value}: cannot read {path}: {reason}.",
            hint="Name a readable UTF-8 text file after @, or pass the text itself.",
        ) from None


def task_inputs(wf: Workflow, task: str | None, given: dict[str, str], asks: bool) -> None:
    """Put ``--task`` into ``given`` as the input ``task``; an agent or skill without a task and
    with nobody to ask (``asks``: a terminal, or an inputs file that may hold it) is refused
    here, with the ways to give one."""
    from .workflow.agentfile import TASK_INPUT

    if task is not None:
        if TASK_INPUT not in wf.inputs:
            raise InputError(
                f"--task gives an agent its task, and {display_path(wf.path)} is a prompt file "
                "(its task is its text).",
                hint="Give a prompt file's inputs with --input NAME=VALUE.",
            )
        if TASK_INPUT in given:
            raise InputError("--task and --input task=... both give the task; give one.")
        given[TASK_INPUT] = task
        return
    if wf.kind != "prompt" and TASK_INPUT not in given and not asks:
        hint = wf.inputs[TASK_INPUT].description if TASK_INPUT in wf.inputs else None
        wanted = f" It asks for: {hint}." if hint else ""
        what = "a custom agent" if wf.kind == "agent" else "a skill"
        raise InputError(
            f"{display_path(wf.path)} is {what}: it needs a task, and there is no terminal "
            f"to ask for one.{wanted}",
            hint="Pass --task TEXT, --task @FILE (the file's text) or --task - (read stdin).",
        )


def handoffs_to_follow(labels: list[str], handoffs: str | None, max_handoffs: int | None) -> Follow:
    """``--handoff LABEL`` (repeatable), ``--handoffs auto`` and ``--max-handoffs N`` as one
    ``Follow``; the combinations that mean nothing are input errors (exit 9)."""
    if handoffs is not None and handoffs.strip().lower() != "auto":
        raise InputError(
            f"--handoffs {handoffs!r}: the only value is `auto` (follow each send: true handoff).",
            hint="Name handoffs to follow with --handoff LABEL (repeatable) instead.",
        )
    auto = handoffs is not None
    if auto and labels:
        raise InputError("--handoff and --handoffs auto exclude each other; choose one.")
    if max_handoffs is not None and not auto:
        raise InputError("--max-handoffs limits --handoffs auto; give both, or neither.")
    if any(not label.strip() for label in labels):
        raise InputError("--handoff needs a label (a handoff's `label:` in the agent file).")
    limit = DEFAULT_MAX_HANDOFFS if max_handoffs is None else max_handoffs
    return Follow(labels=tuple(labels), auto=auto, max=limit)


def is_dry_run(provider: str | None, workflow: Workflow) -> bool:
    """Whether a run sends nothing (``--provider echo``, or the workflow's ``provider: echo``)."""
    return (provider or workflow.provider) == DRY_RUN_PROVIDER


@dataclass(frozen=True)
class RunCommand:
    """What ``flow run`` was given beyond the run options."""

    workflow: Path
    #: ``--input name=value`` items and ``--inputs FILE``, read once the workflow is loaded
    #: (its errors come first); ``ask`` asks on a terminal for a missing value.
    input_items: tuple[str, ...] = ()
    inputs_file: Path | None = None
    ask: AskInput | None = None
    #: ``--selection`` as given (the text, or ``@FILE``), read when the run starts or resumes.
    selection: str | None = None
    #: ``--task``, read already (``@FILE`` and ``-`` resolved): an agent's task.
    task: str | None = None
    #: ``--handoff LABEL`` / ``--handoffs auto``: the agent's handoffs to follow (spec 4.13).
    handoffs: Follow = field(default_factory=Follow)
    #: ``--single-prompt``: the whole file is one prompt (no steps).
    single_prompt: bool = False
    progress: Path | None = None
    recording: Path | None = None
    worktree: bool = False
    #: ``--new``: start fresh without looking for similar incomplete runs.
    new: bool = False
    #: ``--yes``: take the best similar run without asking.
    yes: bool = False
    #: A person answers on a terminal (questions are asked with ``read``, lists shown with
    #: ``write``).
    interactive: bool = False
    read: Callable[[str], str] = input
    write: Callable[[str], None] = print
    verbose: bool = False


def run_workflow(command: RunCommand, options: RunOptions) -> Outcome:
    """``flow run``: resume a similar incomplete run when one is chosen, else start one."""
    from .detect import run_to_resume
    from .workflow.byname import target

    where = target(command.workflow, options.root(), options.agent_dirs, options.skill_dirs)
    wf = load_workflow(
        where,
        single_prompt=command.single_prompt,
        workspace=options.root(),
        agent_dirs=options.agent_dirs,
    )
    items = parse_assignments(list(command.input_items), "--input")
    task_inputs(wf, command.task, items, asks=command.ask is not None or bool(command.inputs_file))
    given = GivenInputs(items, command.inputs_file, command.ask)
    values = given.resolve(wf)
    chain = None
    if command.handoffs.wanted:
        follow = replace(command.handoffs, model=options.model)
        wf, chain = chained(wf, follow, options.root(), options.agent_dirs)
    if is_dry_run(options.provider, wf) and options.reporter is not None:
        options.reporter.dry_run()
    # A run in a worktree is new by definition: a similar run found would not be isolated.
    if not command.new and command.progress is None and not command.worktree:
        chosen = run_to_resume(
            wf,
            values,
            interactive=command.interactive,
            assume_yes=command.yes,
            read=command.read,
            write=command.write,
            verbose=command.verbose,
        )
        if chosen is not None:
            # ``--record`` is for a new session: a resumed one keeps what it recorded.
            resumed = replace(options, record=False, selection=read_selection(command.selection))
            return resume_run(chosen, resumed)
    request = StartRequest(
        wf,
        ResolvedInputs(values),
        progress=command.progress,
        recording=command.recording,
        worktree=command.worktree,
        handoffs=chain,
    )
    return start_run(request, replace(options, selection=read_selection(command.selection)))


class Target(enum.Enum):
    """What ``flow resume`` or ``flow status`` acts on."""

    #: A progress file: resumed (or planned, shown) by the API.
    RUN = "run"
    #: A batch file: every row not completed is resumed by the batch module.
    BATCH = "batch"


#: What ``flow resume DIR/batch.md`` refuses when given, and why: each is about one run.
#: Every other option of ``flow resume`` applies to the batch's rows (docs/spec.md 8.2).
ONE_RUN_OPTIONS = {
    "--set": "changes one run's inputs (a batch's rows take theirs from its data file)",
    "--rerun-unsafe": "runs again a call one run left in flight",
    "--trust-calls": "runs the calls of one run that flow did not record",
    "--deny-calls": "refuses the calls of one run that flow did not record",
    "--wait": "waits for one run's quota window",
    "--verbose": "shows one run's steps and tools (a batch shows its rows; --events writes "
    "every row's events)",
}


def resume_target(
    path: Path, request: ResumeRequest = ResumeRequest(), given: Sequence[str] = ()
) -> Target:
    """Whether ``path`` is a batch or one run; a batch refuses what chooses for one run
    (``--decide``, ``--retry-step``, ``--skip-step``) and the options of ``given`` (the
    options the command line gave) that are about one run (``ONE_RUN_OPTIONS``). Choices that
    exclude each other are refused first, whichever it is."""
    from .batch.checkpoint import is_batch_file

    choices = request.choices
    if choices.rerun_changed and choices.keep_completed:
        raise InputError("--rerun-changed and --keep-completed exclude each other; choose one.")
    if choices.retry_step is not None and choices.skip_step is not None:
        raise InputError("--retry-step and --skip-step exclude each other; choose one.")
    if not is_batch_file(path):
        return Target.RUN
    if request.decide or choices.retry_step or choices.skip_step:
        raise InputError(
            f"{path} is a batch; --decide, --retry-step and --skip-step apply to one run.",
            hint="Resume the row's own progress.md (its path is in the batch file) with them.",
        )
    refused = [f"{name} {ONE_RUN_OPTIONS[name]}" for name in given if name in ONE_RUN_OPTIONS]
    if refused:
        them = "it" if len(refused) == 1 else "them"
        raise InputError(
            f"{path} is a batch: {'; '.join(refused)}.",
            hint=f"Leave {them} out, or resume a row's own progress.md (its path is in the "
            f"batch file) with {them}.",
        )
    return Target.BATCH


def window_wait(path: Path) -> tuple[float, str | None]:
    """For ``flow resume --wait``: the seconds until a suspended run's provider window opens
    and its ``until`` (0 and None when the run is not suspended or the window is open).
    Reads the file, never writes it."""
    from .progress import load_progress
    from .progress.location import progress_file
    from .run.resume import seconds_to_window

    run, _ = load_progress(progress_file(path))
    left = seconds_to_window(run)
    return left, run.until if left > 0 else None


def tracer(option: bool, tell: Reporter) -> Reporter | None:
    """The reporter that sends a run's spans when tracing is on (``--otel`` or an OTLP
    endpoint variable, docs/spec.md 13), else None: nothing of OpenTelemetry is imported.
    ``--otel`` also sets ``FLOW_OTEL`` so what the run starts (batch workers) traces too."""
    from .base.traceids import OTEL_VARIABLE, tracing_on

    if not tracing_on(option):
        return None
    if option:
        os.environ[OTEL_VARIABLE] = "1"
    from .otel.live import OtelReporter

    return OtelReporter(tell=tell)


def export_traces(
    paths: list[Path], *, endpoint: str | None = None, file: Path | None = None
) -> ExportSummary:
    """``flow export otel``: the spans of the runs in ``paths`` sent to ``endpoint`` (or the
    OTLP variables' endpoint), or written to ``file`` as OTLP/JSON (docs/spec.md 13)."""
    from .otel.exporting import export_otel

    return export_otel(paths, endpoint=endpoint, file=file)


def trace_batch(option: bool) -> None:
    """``flow batch --otel``: tracing on for the batch and its rows' runs (``FLOW_OTEL``,
    which the workers inherit; docs/spec.md 13)."""
    from .base.traceids import OTEL_VARIABLE

    if option:
        os.environ[OTEL_VARIABLE] = "1"
