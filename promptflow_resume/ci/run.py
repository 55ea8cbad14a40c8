"""``flow ci``: one run per pull request, started or resumed by a GitHub Actions job.

The repository's ``action.yml`` calls ``flow ci`` with its inputs in ``INPUT_*`` variables and
the runner's ``GITHUB_*`` ones; this module does the rest, so the action's shell stays small
and what it does is tested (docs/spec.md 11.3)::

    result = run_ci(os.environ)        # run or resume, summary, outputs, commit
    result.exit_code                   # what the step exits with

The run's progress file lives in the repository (``INPUT_PROGRESS``, by default
``flow-runs/pr-<number>.md``), so the next workflow run on the same pull request finds it and
resumes it. A job with secrets runs nothing the pull request changed and obeys only the
repository's people (``event.py``, ``basetrust.py``, ``publish.py``):

1. an ``issue_comment`` that is not a ``/flow`` command does nothing; a ``/flow`` command from
   an association the workflow does not allow (by default anyone but an owner, member or
   collaborator) is not obeyed, and the summary says so;
2. a ``pull_request`` job of a pull request from a fork does nothing (it has no secrets and
   may not push): a maintainer's ``/flow resume`` runs it;
3. the brought files (hooks, MCP configurations, agents) are trusted as the base commit holds
   them, and the workflow must be the base commit's;
4. a comment's job works in the base commit's checkout: the run's files are brought from the
   pull request's head as data, and the commit that holds them goes onto the head;
5. ``/flow approve`` and ``/flow deny REASON`` decide every held call, recorded with the
   commenter's login and the comment's URL, then the run resumes; ``/flow resume`` resumes
   it, or starts it when the pull request has none yet.

After the run: the outputs go to ``$GITHUB_OUTPUT``, the summary (``show.summary``) to
``$GITHUB_STEP_SUMMARY``, the HTML report to ``$RUNNER_TEMP``; with ``INPUT_SHARE=yes`` the
run's files are committed (redacted) and pushed to the pull request's branch of the same
repository. The seal key (``INPUT_SEAL_KEY``) is written to a private ``FLOW_HOME`` outside the
workspace and never echoed.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..api import Outcome, decide_calls, resume_run
from ..base.errors import FlowError, InputError, StorageError
from ..base.redact import Redactor
from ..front import RunCommand, parse_assignments, run_workflow
from ..gitworktree import git
from .actioninputs import CiInputs
from .basetrust import base_revision, base_trust, require_base_version
from .event import JobEvent, PullRequest, fetch_pull, read_event
from .publish import commit_run_files, push, run_files, run_paths, token_env

__all__ = ["CiInputs", "CiResult", "run_ci", "run_files"]

#: Statuses a job step ends well with: the run completed, or waits for a person or a budget.
WAITING = frozenset(
    {"completed", "awaiting_approval", "awaiting_input", "budget_exhausted", "timeout", "suspended"}
)
#: The seal key's length in bytes (``progress.seal``).
KEY_BYTES = 32


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
    #: Why the job did nothing (a comment that commands nothing, a pull request from a fork
    #: in a job without secrets); said as the summary.
    skipped: str | None = None

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
        if self.skipped is not None:
            return 0
        return 0 if self.status in WAITING else self.exit_code or 1


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


@dataclass
class _Job:
    """What one job works with: its inputs, environment and event, the pull request (its
    head known, for a comment's job), and the base commit its trust comes from."""

    inputs: CiInputs
    env: Mapping[str, str]
    event: JobEvent
    pull: PullRequest | None = None
    base: str | None = None
    #: The commit the run's files are committed onto (the pull request's head).
    head: str | None = None
    #: Secrets of the job besides the environment's (the seal key, the token).
    secrets: tuple[str, ...] = ()


def _install_key(env: Mapping[str, str], set_env: Callable[[str, str], None]) -> str | None:
    """Put ``INPUT_SEAL_KEY`` (base64 of 32 bytes) where flow looks for its key, so runs made
    in one job are resumed as this machine's in the next (docs/spec.md 10.1). The folder is
    ``$RUNNER_TEMP/flow-home``, else a new private temporary folder: never inside the
    workspace, where a pull request could have committed a key of its own."""
    workspace = Path(env["GITHUB_WORKSPACE"]).resolve()
    given = env.get("FLOW_HOME")
    if given and Path(given).resolve().is_relative_to(workspace):
        raise StorageError(
            f"FLOW_HOME ({given}) is inside the workspace {workspace}: a pull request could put "
            "a key or a trust record there, so flow does not use it.",
            hint="Leave FLOW_HOME unset in the job (the action keeps it in $RUNNER_TEMP).",
        )
    text = env.get("INPUT_SEAL_KEY", "").strip()
    if not text:
        return None
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise InputError(
            "the action's input seal-key must be base64 of 32 bytes (its value is not shown).",
            hint="Make one with `head -c 32 /dev/urandom | base64` and keep it in a secret.",
        )
    temp = env.get("RUNNER_TEMP")
    home = Path(temp) / "flow-home" if temp else Path(tempfile.mkdtemp(prefix="flow-home-"))
    if home.resolve().is_relative_to(workspace):
        raise StorageError(
            f"RUNNER_TEMP ({temp}) is inside the workspace {workspace}; the seal key is never "
            "kept where a pull request's files are.",
            hint="Run the action on a GitHub runner, or set RUNNER_TEMP to a folder outside "
            "the checkout.",
        )
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = home / "key"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, key)
    finally:
        os.close(fd)
    set_env("FLOW_HOME", str(home))
    return text


def _decide(job: _Job) -> str | None:
    """Why this job does nothing, or None when it runs: a comment that commands nothing or
    comes from someone the workflow does not let command runs; a fork's pull request in a
    ``pull_request`` job (no secrets, nothing may be pushed to it)."""
    event, inputs = job.event, job.inputs
    comment = event.comment
    if event.name == "issue_comment" and comment is None:
        return "The comment is not a `/flow` command: nothing to do."
    if comment is not None and not comment.allowed(inputs.commenters):
        allowed = ", ".join(inputs.commenters)
        return (
            f"`/flow {comment.command}` from @\u200b{comment.login} was not obeyed: their "
            f"association with the repository is {comment.association}, and only {allowed} "
            "may command a run (the action's `commenters` input)."
        )
    if event.name == "pull_request" and job.pull is not None and job.pull.from_fork:
        return (
            "This pull request comes from a fork: its `pull_request` job holds no secrets and "
            "may not push to it, so the run does not start here. A maintainer starts or "
            "resumes it with a `/flow resume` comment, in a job that runs only what the base "
            "branch holds."
        )
    return None


def _prepare(job: _Job) -> None:
    """The pull request's head and base, the trust the base commit gives, and (for a
    comment's job, which works in the base commit's checkout) the run's files brought from the
    head as data."""
    workspace, token = job.inputs.workspace, job.inputs.token
    if job.pull is not None:
        if job.event.comment is not None:
            job.pull = fetch_pull(job.env, job.pull, token)
        job.base = base_revision(workspace, replace(job.event, pull=job.pull))
        job.head = _head(workspace, job.pull, token)
        if job.event.comment is not None:
            _bring_run_files(workspace, job.head, job.inputs.progress)
    if job.inputs.progress.is_symlink():
        raise InputError(
            f"the run's file {job.inputs.progress} is a symbolic link in the pull request; flow "
            "reads and commits a run's own file only.",
            path=job.inputs.progress,
        )


def _head(workspace: Path, pull: PullRequest, token: str | None) -> str:
    """The pull request's head commit, fetched from ``origin`` when this clone lacks it."""
    if pull.head_sha is None:
        return git(["rev-parse", "HEAD"], workspace).stdout.strip()
    here = git(["cat-file", "-e", f"{pull.head_sha}^{{commit}}"], workspace, check=False)
    if here.returncode != 0:
        ref = f"+refs/pull/{pull.number}/head:refs/flow/pull/{pull.number}"
        git(["fetch", "--quiet", "--no-tags", "origin", ref], workspace, env=token_env(token))
    return pull.head_sha


def _bring_run_files(workspace: Path, head: str, progress: Path) -> None:
    """The run's file and its folders as the pull request's head has them, into the base
    commit's checkout: data the resume reads (``git restore`` writes only those paths)."""
    names = [_relative(p, workspace) for p in run_paths(progress)]
    there = [n for n in names if git(["ls-tree", head, "--", n], workspace).stdout.strip()]
    if there:
        git(["restore", f"--source={head}", "--worktree", "--", *there], workspace)


def _go(job: _Job, result: CiResult) -> Outcome | None:
    """Decide what a ``/flow`` comment asks, then resume the run or start it."""
    inputs, comment = job.inputs, job.event.comment
    options = inputs.options()
    if job.base:
        options = replace(options, trust=base_trust(inputs.workspace, job.base))
    path = inputs.progress
    if path.exists():
        if job.base:
            require_base_version(inputs.workspace, job.base, _run_workflow(path), "the workflow")
        if comment is not None and comment.command in ("approve", "deny"):
            decided = decide_calls(
                path,
                [],
                approve=comment.command == "approve",
                every=True,
                reason=comment.reason,
                by=comment.by,
                where=comment.url,
            )
            result.notes.append(f"{comment.command}d {len(decided.calls)} held call(s)")
        result.resumed = True
        fetch_run_branch(inputs.workspace, path, inputs.token)
        return resume_run(path, options)
    if comment is not None and comment.command != "resume":
        raise InputError(
            f"`/flow {comment.command}` found no run at {_relative(path, inputs.workspace)}: "
            "nothing was started on this pull request yet.",
            hint="Start one with a `/flow resume` comment, or by pushing to the pull request.",
        )
    if inputs.workflow is None:
        raise InputError(
            f"no run at {_relative(path, inputs.workspace)} to resume, and the action's input "
            "workflow is empty: name the prompt file, agent or skill to run.",
            hint="For example: workflow: .github/prompts/review.prompt.md",
        )
    workflow = inputs.workspace / inputs.workflow
    if job.base:
        require_base_version(inputs.workspace, job.base, workflow, "the workflow")
    path.parent.mkdir(parents=True, exist_ok=True)
    command = RunCommand(
        workflow,
        input_items=inputs.inputs,
        task=inputs.task,
        progress=path,
        worktree=inputs.worktree,
        new=True,
    )
    # The inputs' form is checked before anything runs (exit 9, naming the bad item).
    parse_assignments(list(inputs.inputs), "inputs")
    return run_workflow(command, options)


def _run_workflow(path: Path) -> Path:
    """The workflow file a run's progress file names."""
    from ..progress import load_progress

    run, _ = load_progress(path)
    return (path.parent / run.workflow.path).resolve()


def run_ci(
    env: Mapping[str, str],
    *,
    set_env: Callable[[str, str], None] | None = None,
    log: Callable[[str], None] = print,
) -> CiResult:
    """Run or resume the pull request's run as the action's inputs and the job's event say;
    write the outputs, the job summary and the report; commit the file when asked. A
    FlowError is raised after the outputs and summary are written (they then carry it)."""
    setter = set_env or (lambda k, v: os.environ.__setitem__(k, v))
    event = read_event(env)
    inputs = CiInputs.from_env(env, event)
    key = _install_key(env, setter)
    job = _Job(inputs, env, event, pull=event.pull)
    job.secrets = tuple(s for s in (key, inputs.token) if s)
    result = CiResult(progress=inputs.progress)
    failure: FlowError | None = None
    result.skipped = _decide(job)
    try:
        if result.skipped is None:
            _prepare(job)
            outcome = _go(job, result)
            if outcome is not None:
                result.progress = outcome.path
                result.exit_code = outcome.exit_code
    except FlowError as error:
        failure = error
        result.exit_code = error.exit_code
    failure = _finish(job, result, failure, log)
    if failure is not None:
        raise failure
    return result


def _publish(job: _Job, result: CiResult) -> str | None:
    """Commit the run's files onto the pull request's head (the current commit outside a pull
    request) and push them to its branch of this repository, with a worktree run's own
    branch; None when nothing changed. A fork's pull request is never pushed to."""
    workspace, path = job.inputs.workspace, result.progress
    head = job.head or git(["rev-parse", "HEAD"], workspace).stdout.strip()
    redactor = Redactor.from_environment(extra_values=job.secrets)
    message = f"flow: run {result.run_id} {result.status}"
    commit, redacted = commit_run_files(workspace, path, head, message, redactor)
    if redacted:
        result.notes.append(f"{redacted} secret(s) redacted from the committed files")
    pull = job.pull
    if pull is not None and pull.from_fork:
        result.notes.append("not pushed: the pull request comes from a fork")
        return commit
    branch = (pull.head_ref if pull is not None else None) or job.env.get("GITHUB_HEAD_REF")
    branch = branch or git(["branch", "--show-current"], workspace).stdout.strip()
    refs = [f"{commit}:refs/heads/{branch}"] if commit and branch else []
    refs += _save_worktree(workspace, path)
    push(workspace, refs, job.inputs.token)
    return commit


def _finish(
    job: _Job,
    result: CiResult,
    failure: FlowError | None,
    log: Callable[[str], None],
) -> FlowError | None:
    """Describe the run, commit it when asked, write the outputs and the summary; the first
    error met (the run's, or one of these steps') is returned to be raised."""
    from ..base.printing import for_people

    inputs, env, path = job.inputs, job.env, result.progress
    try:
        if result.skipped is not None:
            result.summary = f"## ⏭️ flow: nothing to do\n\n{for_people(result.skipped)}\n"
        elif path.exists() and not path.is_symlink():
            _describe(inputs, env, result)
            if inputs.share and failure is None:
                result.committed = _publish(job, result)
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
    from ..progress import load_progress
    from ..show.prsummary import pr_summary
    from ..show.report import write_html

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


def fetch_run_branch(workspace: Path, path: Path, token: str | None) -> None:
    """Fetch the branch of a worktree run (9) from ``origin`` when this clone lacks it: a job
    on a new runner recreates the worktree from it. Nothing when it cannot: the resume then
    says the branch is gone."""
    from ..gitworktree import branch_exists, checked_folder, repository_root
    from ..progress import load_progress

    run, _ = load_progress(path)
    if run.worktree is None or branch_exists(workspace, run.worktree.branch):
        return
    # Only the branch flow makes for a worktree (flow/<run-id>), never one a file names.
    checked_folder(run.worktree, repository_root(path.resolve().parent), path)
    ref = f"refs/heads/{run.worktree.branch}"
    fetch = ["fetch", "--quiet", "origin", f"{ref}:{ref}"]
    git(fetch, workspace, check=False, env=token_env(token))


def _save_worktree(workspace: Path, path: Path) -> list[str]:
    """Commit what a stopped worktree run left uncommitted to its branch (a job's runner is
    gone afterwards) and name the branch to push; nothing for other runs."""
    from ..gitworktree import (
        branch_exists,
        checked_folder,
        commit_all,
        is_worktree_of,
        repository_root,
    )
    from ..progress import load_progress

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
