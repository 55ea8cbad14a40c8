"""What a repository brings that runs, and the person's trust in it (``flow trust``).

A folder's *brought* files are the ones that make flow start programs or send credentials:

- every file under ``.github/hooks/`` (hooks files, and the scripts kept beside them), and
  Claude Code's ``.claude/settings.json`` and ``.claude/settings.local.json`` (their ``hooks``
  run as VS Code runs them);
- the MCP configurations ``.vscode/mcp.json`` and ``.mcp.json``;
- the agent files of ``.github/agents/`` and ``.claude/agents/`` (an agent's ``mcp-servers:``
  start programs when a handoff or a subagent call brings it in, and its ``hooks:`` run while
  it runs).

They are read as data always (``flow check``, ``flow status`` and the dashboard show them),
and used only as trust allows (``base/truststore.py``): a hooks file or an MCP configuration
whose verdict is not ``TRUSTED`` is left out of the run with one notice naming ``flow trust``;
a server the workflow needs from such a file stops the run before anything starts
(``UntrustedError``, exit 22). What the person names themselves (``--hooks FILE``,
``--mcp-config FILE``, the workflow or agent they run, the user-level folders) needs no trust::

    brought = brought_files(Path("repo"))     # relative path -> digest, and what was refused
    trust_folder(Path("repo"))                # records those digests in flow's folder
    state = trust_state(Path("repo"), Trust.for_folder(Path("repo")))
    state.trusted, state.changed, state.new
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base.clock import now_iso
from .base.truststore import (
    MAX_TRUSTED_BYTES,
    TRUST_FLAG,
    Trust,
    TrustedFolder,
    Verdict,
    digest_of,
    record_folder,
    revoke_folder,
)
from .workflow.agentdirs import WORKSPACE_FOLDERS as AGENT_FOLDERS
from .workflow.agentdirs import in_workspace_folder
from .workflow.hookfiles import CLAUDE_SETTINGS
from .workflow.mcpfiles import ROOT_CONFIG, WORKSPACE_CONFIG

#: The folder of a repository's hooks files and their scripts.
HOOKS_FOLDER = Path(".github") / "hooks"
#: Most files looked at under ``HOOKS_FOLDER`` (a hooks folder holds a few dozen).
MAX_HOOKS_FOLDER_FILES = 1000


@dataclass(frozen=True)
class Brought:
    """A folder's brought files as they are now."""

    root: Path
    #: Relative POSIX path -> digest, for every file that can be trusted.
    files: dict[str, str] = field(default_factory=dict)
    #: Relative path -> why it can never be trusted (a link, a pipe, too large).
    refused: dict[str, str] = field(default_factory=dict)

    def kind(self, rel: str) -> str:
        """``hooks``, ``script``, ``mcp`` or ``agent``: what the file is to flow."""
        return kind_of(rel)


def is_brought(rel: str) -> bool:
    """True when ``rel`` (relative to a folder, POSIX) is one of the files a folder brings."""
    return (
        rel in (WORKSPACE_CONFIG.as_posix(), ROOT_CONFIG.as_posix())
        or rel.startswith(HOOKS_FOLDER.as_posix() + "/")
        or in_workspace_folder(rel)
    )


def kind_of(rel: str) -> str:
    """What a brought file (relative path) is to flow."""
    if rel in (WORKSPACE_CONFIG.as_posix(), ROOT_CONFIG.as_posix()):
        return "mcp"
    if rel in {p.as_posix() for p in CLAUDE_SETTINGS}:
        return "hooks"
    if rel.startswith(HOOKS_FOLDER.as_posix() + "/"):
        inner = rel.removeprefix(HOOKS_FOLDER.as_posix() + "/")
        if inner.endswith(".json") and ("/" not in inner or inner.endswith("/hooks.json")):
            return "hooks"
        return "script"
    return "agent"


def _candidates(root: Path) -> Iterator[Path]:
    """Every path that would be a brought file, links included (they are refused)."""
    for rel in (WORKSPACE_CONFIG, ROOT_CONFIG, *CLAUDE_SETTINGS):
        if os.path.lexists(root / rel):
            yield root / rel
    hooks = root / HOOKS_FOLDER
    if hooks.is_dir() and not hooks.is_symlink():
        count = 0
        for folder, dirs, names in os.walk(hooks):  # never into a linked folder
            dirs.sort()
            for name in sorted(names):
                count += 1
                if count > MAX_HOOKS_FOLDER_FILES:
                    return
                yield Path(folder) / name
    for name in AGENT_FOLDERS:
        agents = root / name
        if agents.is_dir() and not agents.is_symlink():
            found = (p for p in agents.iterdir() if in_workspace_folder(f"{name}/{p.name}"))
            yield from sorted(found)


def brought_files(root: Path) -> Brought:
    """The brought files of ``root`` with their digests; links, special files and files over
    ``MAX_TRUSTED_BYTES`` are refused (never trusted, whatever leads to them)."""
    base = Path(os.path.realpath(root))
    files: dict[str, str] = {}
    refused: dict[str, str] = {}
    for path in _candidates(base):
        rel = path.relative_to(base).as_posix()
        if path.is_symlink():
            refused[rel] = "a symbolic link"
            continue
        digest = digest_of(path)
        if digest is None:
            size = path.stat().st_size if path.is_file() else None
            refused[rel] = (
                f"larger than {MAX_TRUSTED_BYTES:,} bytes"
                if size is not None and size > MAX_TRUSTED_BYTES
                else "not a regular file"
            )
            continue
        files[rel] = digest
    return Brought(base, files, refused)


def trust_folder(root: Path) -> tuple[TrustedFolder, Brought]:
    """Trust ``root`` as it is now: record the digest of each brought file."""
    brought = brought_files(root)
    return record_folder(brought.root, brought.files, at=now_iso()), brought


def revoke(root: Path) -> TrustedFolder | None:
    """Forget ``root``'s trust; what was recorded, or None when it was not trusted."""
    return revoke_folder(root)


def trust_for(root: Path, *, everything: bool = False, how: str = TRUST_FLAG) -> Trust:
    """The trust a run in ``root`` works under: the whole folder with ``everything``
    (``--trust-workspace``), else what ``flow trust`` recorded."""
    return Trust.entire(root, how) if everything else Trust.for_folder(root)


def portable(trust: Trust) -> Trust:
    """``trust`` as it can judge a copy of its folder made elsewhere (``Trust.to_record``): a
    whole-folder trust becomes the digests of the folder's brought files as they are now."""
    if not trust.everything:
        return trust
    return Trust.of_files(trust.root, brought_files(trust.root).files, trust.how)


@dataclass(frozen=True)
class TrustState:
    """Whether a folder's brought files may run, for ``flow status``, ``flow check`` and the
    dashboard."""

    root: Path
    #: True when every brought file is trusted as it is (vacuously, when there are none).
    trusted: bool
    #: ``flow trust on …`` / ``--trust-workspace``; empty when never trusted.
    how: str
    #: Relative paths, each with its verdict, of the brought files that would not run.
    blocked: dict[str, Verdict] = field(default_factory=dict)
    #: Brought files that can never be trusted, with why.
    refused: dict[str, str] = field(default_factory=dict)
    #: Every brought file (relative path), trusted or not.
    files: tuple[str, ...] = ()

    def line(self) -> str:
        """One line for people: trusted, or what would not run and how to trust it."""
        if not self.files and not self.refused:
            return "nothing here runs (no hooks, MCP configuration or agents)"
        refused = ", ".join(f"{rel} ({why})" for rel, why in self.refused.items())
        never = f"; never run: {refused}" if refused else ""
        if not self.blocked:
            return f"trusted ({self.how}){never}" if self.files else f"nothing here runs{never}"
        blocked = ", ".join(f"{rel} ({verdict.value})" for rel, verdict in self.blocked.items())
        head = f"trusted ({self.how}) except" if self.how else "not trusted"
        return (
            f"{head}: {blocked} do not run; `flow trust {self.root}` trusts them as they are "
            f"now{never}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "folder": str(self.root),
            "trusted": self.trusted,
            "how": self.how or None,
            "blocked": {rel: verdict.value for rel, verdict in self.blocked.items()},
            "refused": dict(self.refused),
            "files": list(self.files),
        }


def trust_state(root: Path, trust: Trust | None = None) -> TrustState:
    """Which of ``root``'s brought files would run under ``trust`` (this machine's record
    when not given)."""
    trust = trust if trust is not None else Trust.for_folder(root)
    brought = brought_files(root)
    blocked = {
        rel: verdict
        for rel in brought.files
        if not (verdict := trust.verdict(brought.root / rel)).allowed
    }
    return TrustState(
        root=brought.root,
        trusted=not blocked,
        how=trust.how,
        blocked=blocked,
        refused=dict(brought.refused),
        files=tuple(brought.files),
    )


def what_runs(brought: Brought) -> dict[str, list[str]]:
    """For each brought file, what it makes flow run, for people to read before they trust
    it: a hooks file's commands, an MCP configuration's servers (their programs or URLs, as
    written, unexpanded)."""
    from .tools.mcp_config import raw_servers
    from .workflow.hookfiles import check_hooks

    found: dict[str, list[str]] = {}
    for rel in brought.files:
        path = brought.root / rel
        kind = kind_of(rel)
        if kind == "hooks":
            loaded = check_hooks(path, brought.root)
            found[rel] = [f"{h.ref.partition('#')[2]}: {h.bash}" for h in loaded.hooks]
        elif kind == "mcp":
            found[rel] = [_server_line(name, spec) for name, spec in raw_servers(path).items()]
        elif kind == "agent":
            found[rel] = _agent_lines(path)
        else:
            found[rel] = []
    return found


def _agent_lines(path: Path) -> list[str]:
    """What an agent file runs: its ``hooks:`` and its ``mcp-servers:``."""
    from .base.errors import FlowError
    from .workflow import check_workflow

    try:
        workflow, _ = check_workflow(path)
    except FlowError:
        return []
    if workflow is None:
        return []
    lines = [f"hooks.{h.ref.partition('#')[2]}: {h.bash}" for h in workflow.agent_hooks]
    lines += [_server_line(name, spec) for name, spec in workflow.mcp_servers.items()]
    return lines


def _server_line(name: str, spec: Any) -> str:
    if not isinstance(spec, dict):
        return f"{name}: (not a server entry)"
    if isinstance(spec.get("url"), str):
        return f"{name}: {spec['url']}"
    args = spec.get("args")
    parts = [spec.get("command", "?"), *(args if isinstance(args, list) else [])]
    return f"{name}: " + " ".join(str(part) for part in parts)


def trusted_folders() -> list[tuple[TrustedFolder, TrustState | None]]:
    """Every folder trusted on this machine, with its state now (None: the folder is gone)."""
    from .base.truststore import load_store

    listed: list[tuple[TrustedFolder, TrustState | None]] = []
    for key, record in sorted(load_store().items()):
        folder = Path(key)
        state = trust_state(folder) if folder.is_dir() else None
        listed.append((record, state))
    return listed
