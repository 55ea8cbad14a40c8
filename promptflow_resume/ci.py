"""``flow ci``: one run per pull request, started or resumed by a GitHub Actions job.

The repository's ``action.yml`` calls ``flow ci`` with its inputs in ``INPUT_*`` variables and
the runner's ``GITHUB_*`` ones; this module does the rest, so the action's shell stays small
and what it does is tested (docs/spec.md 11.3)::

    result = run_ci(os.environ)        # run or resume, summary, outputs, commit
    result.exit_code                   # what the step exits with

The run's progress file lives in the repository (``INPUT_PROGRESS``, by default
``flow-runs/pr-<number>.md``), so the next workflow run on the same pull request finds it and
resumes it: the file is there → ``resume_run``; it is not → a new run of ``INPUT_WORKFLOW``
(``front.run_workflow``, never a similar run: the file named is the run). An ``issue_comment``
event whose comment starts with ``/flow`` decides first: ``/flow approve`` approves every held
call, ``/flow deny REASON`` denies them, ``/flow resume`` just resumes.

After the run: the outputs go to ``$GITHUB_OUTPUT``, the summary (``show.summary``) to
``$GITHUB_STEP_SUMMARY``, the HTML report to ``$RUNNER_TEMP``; with ``INPUT_SHARE=yes`` the
progress file (and its sidecar and child-run folders) is committed and pushed to the pull
request's branch. Nothing here prints an input's value or a secret: the seal key
(``INPUT_SEAL_KEY``) is written to a private ``FLOW_HOME`` and never echoed.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .api import Limits, Outcome, Permissions, RunOptions, decide_calls, resume_run
from .base.errors import FlowError, InputError
from .front import RunCommand, parse_assignments, run_workflow

#: Statuses a job step ends well with: the run completed, or waits for a person or a budget.
WAITING = frozenset(
    {"completed", "awaiting_approval", "awaiting_input", "budget_exhausted", "timeout", "suspended"}
)
#: The seal key's length in bytes (``progress.seal``).
KEY_BYTES = 32

_TRUE = {"yes", "true", "1", "on"}
_FALSE = {"no", "false", "0", "off", ""}


def _flag(env: Mapping[str, str], name: str) -> bool:
    value = env.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InputError(
        f"the action's input {_input_name(name)} must be yes or no; got {value!r}.",
        hint="Write yes or no (true/false also work).",
    )


def _input_name(variable: str) -> str:
    return variable.removeprefix("INPUT_").lower().replace("_", "-")


def _words(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A list input: items separated by newlines or commas (a glob keeps its spaces)."""
    parts = re.split(r"[\n,]", env.get(name, ""))
    return tuple(p.strip() for p in parts if p.strip())


@dataclass(frozen=True)
class CiInputs:
    """The action's inputs, read from ``INPUT_*`` and checked once."""

    workspace: Path
    workflow: str | None
    task: str | None
    inputs: tuple[str, ...]
    provider: str | None
    model: str | None
    base_url: str | None
    progress: Path
    allow_commands: tuple[str, ...]
    approve: tuple[str, ...]
    max_cost: float | None
    worktree: bool
    share: bool
    #: From an ``issue_comment`` event: ``approve``, ``deny`` or ``resume`` (None: no command).
    command: str | None = None
    reason: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CiInputs:
        """Read and check the inputs (an InputError, exit 9, names the input to fix)."""
        where = env.get("GITHUB_WORKSPACE")
        if not where:
            raise InputError(
                "flow ci runs as a step of a GitHub Actions job: GITHUB_WORKSPACE is not set.",
                hint="Use the action (uses: OWNER/promptflow-resume@VERSION), or set "
                "GITHUB_WORKSPACE and the INPUT_* variables docs/spec.md 11.3 lists.",
            )
        workspace = Path(where)
        event = _event(env)
        command, reason = _comment_command(event)
        progress = env.get("INPUT_PROGRESS", "").strip() or _default_progress(env, event)
        if not progress.endswith(".md"):
            raise InputError(
                f"the action's input progress must name a .md file; got {progress!r}.",
                hint="For example: progress: flow-runs/pr-${{ github.event.number }}.md",
            )
        max_cost = env.get("INPUT_MAX_COST", "").strip()
        try:
            cost = float(max_cost) if max_cost else None
        except ValueError:
            cost = None
        if max_cost and (cost is None or not cost > 0):
            raise InputError(
                f"the action's input max-cost must be a positive number of US dollars; got "
                f"{max_cost!r}.",
                hint="For example: max-cost: 0.50",
            )
        return cls(
            workspace=workspace,
            workflow=env.get("INPUT_WORKFLOW", "").strip() or None,
            task=env.get("INPUT_TASK", "").strip() or None,
            inputs=tuple(
                line.strip() for line in env.get("INPUT_INPUTS", "").splitlines() if line.strip()
            ),
            provider=env.get("INPUT_PROVIDER", "").strip() or None,
            model=env.get("INPUT_MODEL", "").strip() or None,
            base_url=env.get("INPUT_BASE_URL", "").strip() or None,
            progress=workspace / progress,
            allow_commands=_words(env, "INPUT_ALLOW_COMMANDS"),
            approve=_words(env, "INPUT_APPROVE"),
            max_cost=cost,
            worktree=_flag(env, "INPUT_WORKTREE"),
            share=_flag(env, "INPUT_SHARE"),
            command=command,
            reason=reason,
        )

    def options(self) -> RunOptions:
        """The run options the inputs give (nobody to ask: a job has no terminal)."""
        return RunOptions(
            provider=self.provider,
            model=self.model,
            base_url=self.base_url,
            limits=Limits(max_cost=self.max_cost),
            workspace=self.workspace,
            permissions=Permissions(commands=self.allow_commands),
            approve=self.approve,
            # A command the model chooses that no allow-list allows waits for /flow approve.
            consent_stop=True,
        )


def _event(env: Mapping[str, str]) -> dict[str, Any]:
    """The event that started the job (``GITHUB_EVENT_PATH``); empty when there is none."""
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def pr_number(event: Mapping[str, Any]) -> int | None:
    """The pull request's number of a ``pull_request`` or ``issue_comment`` event."""
    for key in ("pull_request", "issue"):
        item = event.get(key)
        if isinstance(item, dict) and isinstance(item.get("number"), int):
            return int(item["number"])
    number = event.get("number")
    return number if isinstance(number, int) else None


def _default_progress(env: Mapping[str, str], event: Mapping[str, Any]) -> str:
    number = pr_number(event)
    if number is not None:
        return f"flow-runs/pr-{number}.md"
    return f"flow-runs/run-{env.get('GITHUB_RUN_ID', 'local')}.md"


def _comment_command(event: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``/flow approve``, ``/flow deny REASON``, ``/flow resume`` from a comment's first line."""
    comment = event.get("comment")
    body = comment.get("body") if isinstance(comment, dict) else None
    if not isinstance(body, str):
        return None, None
    first = body.strip().splitlines()[0] if body.strip() else ""
    words = first.split(maxsplit=2)
    if len(words) < 2 or words[0] != "/flow":
        return None, None
    if words[1] not in ("approve", "deny", "resume"):
        raise InputError(
            f"the comment asks `/flow {words[1]}`; the commands are /flow approve, "
            "/flow deny REASON and /flow resume.",
        )
    return words[1], (words[2].strip() if len(words) > 2 else None)


@dataclass
class CiResult:
    """What one ``flow ci`` step did: the values of the action's outputs."""

    progress: Path
    run_id: str = ""
    status: str = ""
    exit_code: int = 0
    cost_usd: float = 0.0
    tokens: int = 0
    report: Path | None = None
    summary: str = ""
    resumed: bool = False
    committed: str | None = None
    notes: list[str] = field(default_factory=list)

    def outputs(self, workspace: Path) -> dict[str, str]:
        """The action's outputs, by name."""
        return {
            "run-id": self.run_id,
            "status": self.status,
            "exit-code": str(self.exit_code),
            "cost-usd": f"{self.cost_usd:.6f}",
            "tokens": str(self.tokens),
            "progress-path": _relative(self.progress, workspace),
            "report-path": str(self.report) if self.report else "",
        }

    @property
    def step_exit(self) -> int:
        """The step's exit code: 0 when the run completed or waits (for a person, a budget,
        a quota window), else the run's own code."""
        return 0 if self.status in WAITING else self.exit_code or 1


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _install_key(env: Mapping[str, str], set_env: Callable[[str, str], None]) -> None:
    """Put ``INPUT_SEAL_KEY`` (base64 of 32 bytes) where flow looks for its key, so runs made
    in one job are resumed as this machine's in the next (docs/spec.md 10.1)."""
    text = env.get("INPUT_SEAL_KEY", "").strip()
    if not text:
        return
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise InputError(
            "the action's input seal-key must be base64 of 32 bytes (its value is not shown).",
            hint="Make one with `head -c 32 /dev/urandom | base64` and keep it in a secret.",
        )
    home = Path(env.get("RUNNER_TEMP") or env["GITHUB_WORKSPACE"]) / "flow-home"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = home / "key"
    if not target.exists():
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, key)
        finally:
            os.close(fd)
    set_env("FLOW_HOME", str(home))


def _go(inputs: CiInputs, result: CiResult) -> Outcome | None:
    """Decide what a ``/flow`` comment asks, then resume the run or start it."""
    options = inputs.options()
    path = inputs.progress
    if path.exists():
        if inputs.command in ("approve", "deny"):
            decided = decide_calls(
                path, [], approve=inputs.command == "approve", every=True, reason=inputs.reason
            )
            result.notes.append(f"{inputs.command}d {len(decided.calls)} held call(s)")
        result.resumed = True
        fetch_run_branch(inputs.workspace, path)
        return resume_run(path, options)
    if inputs.command is not None:
        raise InputError(
            f"`/flow {inputs.command}` found no run at {_relative(path, inputs.workspace)}: "
            "nothing was started on this pull request yet.",
            hint="Start one by pushing to the pull request (the pull_request event runs it).",
        )
    if inputs.workflow is None:
        raise InputError(
            f"no run at {_relative(path, inputs.workspace)} to resume, and the action's input "
            "workflow is empty: name the prompt file, agent or skill to run.",
            hint="For example: workflow: .github/prompts/review.prompt.md",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    command = RunCommand(
        inputs.workspace / inputs.workflow,
        input_items=inputs.inputs,
        task=inputs.task,
        progress=path,
        worktree=inputs.worktree,
        new=True,
    )
    # The inputs' form is checked before anything runs (exit 9, naming the bad item).
    parse_assignments(list(inputs.inputs), "inputs")
    return run_workflow(command, options)


def run_ci(
    env: Mapping[str, str],
    *,
    set_env: Callable[[str, str], None] | None = None,
    log: Callable[[str], None] = print,
) -> CiResult:
    """Run or resume the pull request's run as the action's inputs say; write the outputs,
    the job summary and the report; commit the file when asked. A FlowError is raised after
    the outputs and summary are written (they then carry the error)."""
    setter = set_env or (lambda k, v: os.environ.__setitem__(k, v))
    inputs = CiInputs.from_env(env)
    _install_key(env, setter)
    result = CiResult(progress=inputs.progress)
    failure: FlowError | None = None
    try:
        outcome = _go(inputs, result)
    except FlowError as error:
        failure = error
        result.exit_code = error.exit_code
    else:
        if outcome is not None:
            result.progress = outcome.path
            result.exit_code = outcome.exit_code
    failure = _finish(inputs, env, result, failure, log)
    if failure is not None:
        raise failure
    return result


def _finish(
    inputs: CiInputs,
    env: Mapping[str, str],
    result: CiResult,
    failure: FlowError | None,
    log: Callable[[str], None],
) -> FlowError | None:
    """Describe the run, commit it when asked, write the outputs and the summary; the first
    error met (the run's, or one of these steps') is returned to be raised."""
    from .base.printing import for_people

    path = result.progress
    try:
        if path.exists():
            _describe(inputs, env, result)
        if inputs.share and path.exists() and failure is None:
            result.committed = commit_run(inputs.workspace, path, result, env)
    except FlowError as error:
        failure = failure or error
    if failure is not None:
        result.exit_code = failure.exit_code
        # The page is read by people and kept with the job: redacted like a terminal's text.
        stopped = for_people(str(failure))
        result.summary = f"## ❌ flow: the run did not go on\n\n{stopped}\n\n" + result.summary
    _write_outputs(env, result.outputs(inputs.workspace))
    summary_file = env.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as handle:
            handle.write(result.summary + "\n")
    log(result.summary)
    return failure


def _describe(inputs: CiInputs, env: Mapping[str, str], result: CiResult) -> None:
    """The run's outputs, its report and its summary, from its file."""
    from .progress import load_progress
    from .show.report import write_html
    from .show.summary import pr_summary

    path = result.progress
    run, _ = load_progress(path)
    result.run_id, result.status = run.run_id, run.status
    result.cost_usd, result.tokens = run.usage.cost_usd, run.usage.total_tokens
    reports = Path(env.get("RUNNER_TEMP") or inputs.workspace) / "flow-report"
    result.report = reports / f"{run.run_id}.html"
    write_html(path, result.report)
    shown = Path(_relative(path, inputs.workspace))
    cwd = Path.cwd()
    os.chdir(inputs.workspace)  # the summary names the file as the repository does
    try:
        result.summary = pr_summary(
            shown, progress_link=_blob_link(env, shown), report_link=_run_link(env), comments=True
        )
    finally:
        os.chdir(cwd)


def _blob_link(env: Mapping[str, str], shown: Path) -> str | None:
    server, repo, ref = (
        env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_HEAD_REF")
    )
    if server and repo and ref:
        return f"{server}/{repo}/blob/{ref}/{shown.as_posix()}"
    return None


def _run_link(env: Mapping[str, str]) -> str | None:
    server, repo, run_id = (
        env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    if server and repo and run_id:
        # The report is uploaded as the run's artifact, listed on the workflow run's page.
        return f"{server}/{repo}/actions/runs/{run_id}#artifacts"
    return None


def _write_outputs(env: Mapping[str, str], values: dict[str, str]) -> None:
    target = env.get("GITHUB_OUTPUT")
    if not target:
        return
    with open(target, "a", encoding="utf-8") as handle:
        for name, value in values.items():
            handle.write(f"{name}={' '.join(value.split())}\n")


def run_files(path: Path) -> list[Path]:
    """The files of a run to commit: the progress file and its sidecar and child-run folders
    (never its journal, lock or owner files, which describe this machine's process)."""
    from .sharing.files import sidecar_folder
    from .sharing.share import steps_folder

    found = [path]
    for folder in (sidecar_folder(path), steps_folder(path)):
        if folder.is_dir():
            found.append(folder)
    return found


def fetch_run_branch(workspace: Path, path: Path) -> None:
    """Fetch the branch of a worktree run (9) from ``origin`` when this clone lacks it: a job
    on a new runner recreates the worktree from it. Nothing when it cannot: the resume then
    says the branch is gone."""
    from .progress import load_progress
    from .worktree import branch_exists, git

    run, _ = load_progress(path)
    if run.worktree is None or branch_exists(workspace, run.worktree.branch):
        return
    ref = f"refs/heads/{run.worktree.branch}"
    git(["fetch", "--quiet", "origin", f"{ref}:{ref}"], workspace, check=False)


def _save_worktree(workspace: Path, path: Path) -> list[str]:
    """Commit what a stopped worktree run left uncommitted to its branch (a job's runner is
    gone afterwards) and name the branch to push; nothing for other runs."""
    from .progress import load_progress
    from .worktree import (
        branch_exists,
        checked_folder,
        commit_all,
        is_worktree_of,
        repository_root,
    )

    run, _ = load_progress(path)
    tree = run.worktree
    if tree is None or tree.state != "active" or not branch_exists(workspace, tree.branch):
        return []
    root = repository_root(path.resolve().parent)
    # Only the worktree flow uses (its folder in .flow/worktrees/, of this repository).
    folder = checked_folder(tree, root, path)
    if is_worktree_of(folder, root):
        commit_all(folder, f"flow: run {run.run_id} stopped {run.status}")
    return [f"refs/heads/{tree.branch}:refs/heads/{tree.branch}"]


def commit_run(workspace: Path, path: Path, result: CiResult, env: Mapping[str, str]) -> str | None:
    """Commit the run's files to the checked-out branch and push it to the pull request's
    branch (``GITHUB_HEAD_REF``, else the current branch), with a worktree run's own branch;
    None when nothing changed."""
    from .worktree import git

    extra = _save_worktree(workspace, path)
    identity = ["-c", "user.name=flow", "-c", "user.email=flow@users.noreply.github.com"]
    names = [_relative(p, workspace) for p in run_files(path)]
    git(["add", "--force", "--", *names], workspace)
    commit = None
    if git(["diff", "--cached", "--name-only", "--", *names], workspace).stdout.strip():
        message = f"flow: run {result.run_id} {result.status}"
        git([*identity, "commit", "--quiet", "-m", message, "--", *names], workspace)
        commit = git(["rev-parse", "HEAD"], workspace).stdout.strip()
    branch = env.get("GITHUB_HEAD_REF") or git(["branch", "--show-current"], workspace).stdout
    refs = [f"HEAD:refs/heads/{branch.strip()}"] if branch.strip() and commit else []
    refs += extra
    if refs and git(["remote"], workspace).stdout.strip():
        git(["push", "--quiet", "origin", *refs], workspace)
    return commit
