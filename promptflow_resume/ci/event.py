"""The GitHub event a ``flow ci`` job runs for: which pull request, whose comment, may it command.

A job gets its event as JSON at ``GITHUB_EVENT_PATH`` and its name in ``GITHUB_EVENT_NAME``.
Two kinds matter (docs/spec.md 11.3):

- ``pull_request``: the payload has the pull request, its base and head (commit, branch,
  repository); a pull request from a fork runs with no secrets and may not be pushed to.
- ``issue_comment`` on a pull request: the payload has the comment (body, author's login and
  ``author_association``, URL) but not the pull request's head, which ``fetch_pull`` asks the
  REST API for. A ``/flow`` command is obeyed only from an allowed association (``OWNER``,
  ``MEMBER``, ``COLLABORATOR`` unless the workflow narrows or widens it on purpose)::

    event = read_event(os.environ)
    if event.comment is not None and not event.comment.allowed(commenters):
        ...  # not obeyed: said, and nothing else
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import InputError

#: Who may command a run with a ``/flow`` comment unless the workflow says otherwise:
#: GitHub's associations of the repository's owner, its organisation's members, and the
#: people invited to collaborate on it.
DEFAULT_COMMENTERS = ("OWNER", "MEMBER", "COLLABORATOR")
#: The commands a comment may give.
COMMANDS = ("approve", "deny", "resume")
#: Seconds the REST API may take to describe a pull request.
API_TIMEOUT = 20.0


@dataclass(frozen=True)
class PullRequest:
    """A pull request as the job sees it: its number, base and head."""

    number: int
    base_sha: str | None = None
    base_ref: str | None = None
    base_repo: str | None = None
    head_sha: str | None = None
    head_ref: str | None = None
    head_repo: str | None = None

    @property
    def from_fork(self) -> bool:
        """True when the head lives in another repository (a fork): never pushed to."""
        if self.head_repo is None or self.base_repo is None:
            return False
        return self.head_repo.lower() != self.base_repo.lower()


@dataclass(frozen=True)
class Comment:
    """A ``/flow`` command in a comment: what it asks, and who asked, where."""

    command: str
    reason: str | None
    login: str
    association: str
    url: str | None

    def allowed(self, commenters: Sequence[str]) -> bool:
        """True when the commenter's association is one the workflow lets command runs."""
        return self.association.upper() in {c.upper() for c in commenters}

    @property
    def by(self) -> str:
        """How a decision it makes is recorded: the GitHub login."""
        return f"@{self.login} (GitHub)"


@dataclass(frozen=True)
class JobEvent:
    """The event of the job: its name, its pull request and its ``/flow`` comment, if any."""

    name: str
    pull: PullRequest | None = None
    comment: Comment | None = None
    #: An ``issue_comment`` that is not a ``/flow`` command (nothing to do).
    chatter: bool = False
    default_branch: str | None = None


def read_event(env: Mapping[str, str]) -> JobEvent:
    """The job's event from ``GITHUB_EVENT_NAME`` and ``GITHUB_EVENT_PATH`` (an event the file
    does not describe is an empty one; a wrong ``/flow`` command is an InputError)."""
    data = _payload(env)
    name = env.get("GITHUB_EVENT_NAME", "").strip() or (
        "issue_comment" if "comment" in data else "pull_request" if "pull_request" in data else ""
    )
    repository = data.get("repository") if isinstance(data.get("repository"), dict) else {}
    default = repository.get("default_branch") if isinstance(repository, dict) else None
    comment, chatter = _comment(data) if name == "issue_comment" else (None, False)
    return JobEvent(
        name=name,
        pull=_pull(data),
        comment=comment,
        chatter=chatter,
        default_branch=default if isinstance(default, str) else None,
    )


def _payload(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _text(mapping: Any, *keys: str) -> str | None:
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping if isinstance(mapping, str) and mapping else None


def _pull(data: Mapping[str, Any]) -> PullRequest | None:
    """The pull request of a ``pull_request`` payload (base and head), or the number of an
    ``issue_comment`` one (its head is not in the payload)."""
    pr = data.get("pull_request")
    number = pr.get("number", data.get("number")) if isinstance(pr, dict) else None
    if isinstance(pr, dict) and isinstance(number, int):
        return pull_of(pr, number)
    issue = data.get("issue")
    if isinstance(issue, dict) and "pull_request" in issue and isinstance(issue.get("number"), int):
        return PullRequest(int(issue["number"]))
    number = data.get("number")
    return PullRequest(number) if isinstance(number, int) and "pull_request" in data else None


def pull_of(pr: Mapping[str, Any], number: int) -> PullRequest:
    """A pull request from its REST form (the payload's ``pull_request``, or the API's)."""
    return PullRequest(
        number=number,
        base_sha=_text(pr, "base", "sha"),
        base_ref=_text(pr, "base", "ref"),
        base_repo=_text(pr, "base", "repo", "full_name"),
        head_sha=_text(pr, "head", "sha"),
        head_ref=_text(pr, "head", "ref"),
        head_repo=_text(pr, "head", "repo", "full_name"),
    )


def _comment(data: Mapping[str, Any]) -> tuple[Comment | None, bool]:
    """The ``/flow`` command of a comment's first line; (None, True) for any other comment."""
    comment = data.get("comment")
    body = comment.get("body") if isinstance(comment, dict) else None
    if not isinstance(comment, dict) or not isinstance(body, str):
        return None, True
    first = body.strip().splitlines()[0] if body.strip() else ""
    words = first.split(maxsplit=2)
    if len(words) < 2 or words[0] != "/flow":
        return None, True
    if words[1] not in COMMANDS:
        raise InputError(
            f"the comment asks `/flow {words[1]}`; the commands are /flow approve, "
            "/flow deny REASON and /flow resume.",
        )
    login = _text(comment, "user", "login") or "unknown"
    association = comment.get("author_association")
    return (
        Comment(
            command=words[1],
            reason=words[2].strip() if len(words) > 2 else None,
            login=login,
            association=association if isinstance(association, str) else "NONE",
            url=_text(comment, "html_url"),
        ),
        False,
    )


def fetch_pull(env: Mapping[str, str], pull: PullRequest, token: str | None) -> PullRequest:
    """``pull`` with its base and head from the REST API (``GITHUB_API_URL``, the repository
    ``GITHUB_REPOSITORY``); a pull request the API cannot describe is an InputError."""
    if pull.head_sha is not None:
        return pull
    api = env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    repository = env.get("GITHUB_REPOSITORY", "")
    url = f"{api}/repos/{repository}/pulls/{pull.number}"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.github+json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=API_TIMEOUT) as answer:
            data = json.loads(answer.read(1 << 20).decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError) as error:
        raise InputError(
            f"the pull request #{pull.number} could not be read from {url} ({error}); a "
            "comment's job needs it to know the pull request's head.",
            hint="Give the action the job's token (token: ${{ github.token }}) with "
            "pull-requests: read.",
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"the API described the pull request #{pull.number} as {data!r}.")
    return pull_of(data, pull.number)
