"""Which tool calls wait for a person's yes before they run (docs/spec.md 4.17).

The policy comes from the workflow's (or agent's) ``approve:`` list and the ``--approve
PATTERN`` flags; ``--no-approve`` turns it off for one run or resume. Like consent, nothing of
it is read from a progress file, so a shared file can neither add nor remove a question.

A pattern is one of:

- a tool's name as the model calls it (``run_in_terminal``, ``create_file``, a command tool's
  name), or a shell-style glob over those names (``*_file``);
- a prompt-file (Copilot) name that stands for several tools (``edit`` → every edit tool,
  ``runCommands`` → ``run_in_terminal``): the tools of the set that only read (``read_file``)
  are not held by it, only by their own name;
- ``SERVER/PATTERN`` for MCP tools: ``github/*`` holds every tool of the server ``github``.

::

    policy = ApprovalPolicy.of(["edit", "github/*"])
    policy.why("create_file")                      # "approve: edit"
    policy.why("list_issues", server="github")     # "approve: github/*"
    policy.why("read_file")                        # None: runs without asking
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import socket
import subprocess
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from ..workflow.toolnames import PLAN_TOOLS, map_tool_name
from .consent import Consent

#: The tools that ask for consent, and the argument consent is asked about.
CONSENT_TOOLS: dict[str, str] = {"run_in_terminal": "command", "fetch_webpage": "url"}
#: How ``why`` starts for a call held because it needs consent (``--on-consent stop``).
CONSENT_WHY = "needs consent: "


@dataclass(frozen=True)
class ApprovalPolicy:
    """The patterns of tool calls that need a person's approval, each with where it came from."""

    #: ``(pattern, source)``: ``source`` is ``approve:`` or ``--approve``.
    patterns: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, workflow: Sequence[str] = (), flags: Sequence[str] = ()) -> ApprovalPolicy:
        """The policy of the workflow's ``approve:`` list plus the ``--approve`` flags."""
        found = [(p.strip(), "approve:") for p in workflow if isinstance(p, str) and p.strip()]
        found += [(p.strip(), "--approve") for p in flags if p.strip()]
        return cls(tuple(found))

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def why(self, tool: str, *, server: str | None = None) -> str | None:
        """Why a call of ``tool`` (of the MCP server ``server``, if any) needs approval: the
        first pattern that holds it (``approve: edit``); None when none does."""
        for pattern, source in self.patterns:
            if _holds(pattern, tool, server):
                return f"{source} {pattern}"
        return None


def _holds(pattern: str, tool: str, server: str | None) -> bool:
    if "/" in pattern and server is not None:
        wanted_server, _, wanted_tool = pattern.partition("/")
        if fnmatch.fnmatchcase(server, wanted_server) and fnmatch.fnmatchcase(tool, wanted_tool):
            return True
    if fnmatch.fnmatchcase(tool, pattern):
        return True
    # A Copilot name standing for a set holds the set's tools with effects: ``edit`` also
    # stands for read_file, which changes nothing and so needs no one's yes.
    mapped = map_tool_name(pattern) or ()
    return tool in mapped and (tool not in PLAN_TOOLS or mapped == (tool,))


def decider() -> tuple[str, str]:
    """Who records a decision and on which machine: ``git config user.name`` (else
    ``$USER``/``$USERNAME``, else ``unknown``) and the host name."""
    name = ""
    try:
        found = subprocess.run(
            ["git", "config", "user.name"], capture_output=True, text=True, timeout=5, check=False
        )
        name = found.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    name = name or os.environ.get("USER") or os.environ.get("USERNAME") or "unknown"
    return name, socket.gethostname()


def _consent_subject(tool: str, arguments: str) -> str | None:
    """The command or URL a consent-asking call is about; None when it has none."""
    key = CONSENT_TOOLS.get(tool)
    if key is None:
        return None
    try:
        values = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return None
    value = values.get(key) if isinstance(values, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def consent_hold(tool: str, arguments: str, consent: Consent | None) -> str | None:
    """With ``--on-consent stop``: why a command or fetch would be refused for want of
    consent (so the run holds it for ``flow approve`` instead); None when it may run or is
    no such call. Never asks: the caller holds only when there is no terminal."""
    subject = _consent_subject(tool, arguments)
    if subject is None or consent is None:
        return None
    quiet = dataclasses.replace(consent, ask=None)
    if tool == "run_in_terminal":
        decision = quiet.command(subject)
    else:
        host = urllib.parse.urlsplit(subject).hostname
        if not host:
            return None  # the tool reports a bad URL itself
        decision = quiet.fetch(host, subject)
    return None if decision.allowed else CONSENT_WHY + decision.how


def granted(consent: Consent | None, tool: str, arguments: str) -> Consent | None:
    """The consent of one approved call held for consent: this exact command, or this
    URL's host (a redirect elsewhere is still checked), and nothing more."""
    subject = _consent_subject(tool, arguments)
    base = consent or Consent()
    if subject is None:
        return consent
    if tool == "run_in_terminal":
        # A pattern equal to the whole command line allows exactly that command.
        return dataclasses.replace(base, commands=(*base.commands, subject))
    host = urllib.parse.urlsplit(subject).hostname or ""
    return dataclasses.replace(base, hosts=(*base.hosts, host))
