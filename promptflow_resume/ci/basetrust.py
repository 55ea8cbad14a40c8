"""A job with secrets runs nothing the pull request changed: trust from the base commit.

GitHub's guidance for ``pull_request_target`` and ``issue_comment`` jobs is never to run the
pull request's code where secrets are. ``flow ci`` applies it to what flow itself would run:

- the folder's brought files (hooks, MCP configurations, agents; docs/spec.md 10.9) are trusted
  exactly as the base commit holds them (``base_trust``): one the pull request added or changed
  is left out like any untrusted file, and a server the run needs from it stops the run;
- the workflow the job runs (the ``workflow`` input, or the file a resumed run names) must be
  the base commit's (``require_base_version``), else the job stops before anything starts.

Custom instructions, agents' bodies and skills stay data the model reads (bounded, inside the
repository, never from ``.git``: spec 10.9), as the pull request's text is::

    base = base_revision(workspace, event)
    options = replace(options, trust=base_trust(workspace, base))
    require_base_version(workspace, base, workflow_path)
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from ..base.errors import UntrustedError
from ..base.truststore import Trust, file_digest
from ..gitworktree import git
from ..trust import is_brought
from .event import JobEvent


def base_revision(workspace: Path, event: JobEvent) -> str:
    """The commit the pull request is judged against: its base commit when the event says it,
    else the tip of its base branch (or the default branch) as ``origin`` has it."""
    pull = event.pull
    if pull is not None and pull.base_sha:
        git(["fetch", "--quiet", "--no-tags", "origin", pull.base_sha], workspace, check=False)
        return pull.base_sha
    branch = (pull.base_ref if pull is not None else None) or event.default_branch or "main"
    git(["fetch", "--quiet", "--no-tags", "origin", branch], workspace, check=False)
    found = git(["rev-parse", "--verify", "--quiet", f"origin/{branch}^{{commit}}"], workspace)
    return found.stdout.strip()


def _blobs(workspace: Path, base: str) -> dict[str, str]:
    """Relative path -> blob id of every regular file of ``base`` that a folder brings."""
    listed = git(["ls-tree", "-r", "-z", "--full-tree", base], workspace).stdout
    found: dict[str, str] = {}
    for item in listed.split("\0"):
        meta, _, path = item.partition("\t")
        fields = meta.split()
        # 100644 and 100755 are files; a link (120000) or a submodule is never trusted.
        if len(fields) == 3 and fields[0] in ("100644", "100755") and is_brought(path):
            found[path] = fields[2]
    return found


def _contents(workspace: Path, blobs: list[str]) -> list[bytes]:
    """The bytes of each blob, in order (one ``git cat-file --batch`` for all)."""
    if not blobs:
        return []
    done = subprocess.run(
        ["git", "cat-file", "--batch"],
        cwd=workspace,
        input="".join(f"{b}\n" for b in blobs).encode(),
        capture_output=True,
        check=True,
    )
    out, at, found = done.stdout, 0, []
    for _ in blobs:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        start = header_end + 1
        found.append(out[start : start + size])
        at = start + size + 1
    return found


def base_trust(workspace: Path, base: str) -> Trust:
    """Trust exactly the brought files of ``base``, each as that commit holds it."""
    blobs = _blobs(workspace, base)
    digests = {
        path: file_digest(data)
        for path, data in zip(blobs, _contents(workspace, list(blobs.values())), strict=True)
    }
    return Trust.of_files(workspace, digests, how=f"the base commit {base[:12]}")


def require_base_version(workspace: Path, base: str, path: Path, what: str) -> None:
    """Stop (``UntrustedError``, exit 22) unless ``path`` is in ``base`` with these bytes."""
    try:
        rel = path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        rel = None
    ours = git(["rev-parse", "--verify", "--quiet", f"{base}:{rel}"], workspace, check=False)
    blob = ours.stdout.strip() if rel is not None and ours.returncode == 0 else None
    now = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    then = None
    if blob is not None:
        then = hashlib.sha256(_contents(workspace, [blob])[0]).hexdigest()
    if now is not None and now == then:
        return
    change = "adds" if blob is None else "changes"
    raise UntrustedError(
        f"the pull request {change} {what} {rel or path}; a job that holds secrets runs only "
        f"what the base commit {base[:12]} holds, so nothing was started.",
        path=path,
        hint="Merge the change first, or run it where no secret is (a push to a branch of "
        "your own), then comment again.",
    )
