"""The folders custom agents are found in, and an agent's file by name, reading only names.

Below the loader (a prompt file's ``agent: NAME`` is resolved while it loads), so it reads
each file's ``name:`` and nothing else; ``agentfind`` lists agents fully loaded. The folders,
first match winning:

1. each ``--agents DIR``, in the order given;
2. the workspace's ``.github/agents/`` and ``.claude/agents/``;
3. the user's ``~/.copilot/agents/`` and ``~/.claude/agents/``.

A name is the agent's ``name:`` or its file name without ``.agent.md`` / ``.md``, compared
without case::

    locate_agent("reviewer", Path.cwd())       # Path(".github/agents/reviewer.agent.md") or None
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..base.confine import leads_inside
from ..base.errors import SpecialFileError
from ..base.safeopen import read_regular
from ..base.textnorm import normalize_newlines
from .agentfile import AGENT_SUFFIX, agent_name
from .diagnostics import Collector
from .header import read_front_matter
from .records import Workflow
from .source import MAX_WORKFLOW_BYTES, FrontMatterUnclosed, split_source

#: Where a workspace keeps its agents, relative to its root.
WORKSPACE_FOLDERS: tuple[str, ...] = (".github/agents", ".claude/agents")
#: Where a user keeps agents for every workspace, relative to the home folder.
USER_FOLDERS: tuple[str, ...] = (".copilot/agents", ".claude/agents")


@dataclass(frozen=True)
class AgentPlaces:
    """Where agents are looked up by name: the workspace (None: the working directory) and
    the ``--agents`` folders."""

    workspace: Path | None = None
    extra: tuple[Path, ...] = ()

    def root(self) -> Path:
        """The workspace folder."""
        return self.workspace if self.workspace is not None else Path.cwd()


def in_workspace_folder(rel: str) -> bool:
    """True when ``rel`` (a path relative to a workspace, POSIX) is an agent file of the
    workspace's own agent folders: what a repository brings (docs/spec.md 10.9)."""
    folder, _, name = rel.rpartition("/")
    return folder in WORKSPACE_FOLDERS and name.endswith(".md")


def agent_folders(workspace: Path, extra: Sequence[Path] = ()) -> list[tuple[Path, str]]:
    """The folders searched, in order, each with its kind (``--agents``, ``workspace``,
    ``user``), those that do not exist too."""
    folders = [(Path(d), "--agents") for d in extra]
    folders += [(workspace / f, "workspace") for f in WORKSPACE_FOLDERS]
    home = Path.home()
    folders += [(home / f, "user") for f in USER_FOLDERS]
    return folders


def agent_files(folder: Path) -> list[Path]:
    """The agent files directly in ``folder``: ``*.agent.md``, and any ``*.md`` in a
    ``.github/agents`` or ``.claude/agents`` folder."""
    if not folder.is_dir():
        return []
    host_folder = folder.name == "agents" and folder.resolve().parent.name in (
        ".github",
        ".claude",
    )
    pattern = "*.md" if host_folder else f"*{AGENT_SUFFIX}"
    return sorted(p for p in folder.glob(pattern) if p.is_file())


def searched_files(
    workspace: Path, extra: Sequence[Path] = (), *, escaped: list[Path] | None = None
) -> list[tuple[Path, str]]:
    """Every agent file of the searched folders in search order, with its folder's kind; a
    folder given twice (``--agents .github/agents``) is read once. A workspace's file that
    leads out of the workspace (a link to a file elsewhere) is never read: it goes into
    ``escaped`` instead (docs/spec.md 10.9)."""
    seen: set[Path] = set()
    found: list[tuple[Path, str]] = []
    for folder, source in agent_folders(workspace, extra):
        for path in agent_files(folder):
            if source == "workspace" and not leads_inside(workspace, path):
                if escaped is not None:
                    escaped.append(path)
                continue
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                found.append((path, source))
    return found


def file_stem(path: Path) -> str:
    """The file name without ``.agent.md`` (or ``.md``), lower-cased."""
    base = path.name.lower()
    for suffix in (AGENT_SUFFIX, ".md"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def declared_name(path: Path) -> str:
    """The agent's name as its file gives it (``name:``, else the file name); a file that
    cannot be read or parsed is named by its file name."""
    data: dict[str, object] = {}
    try:
        raw = read_regular(path, MAX_WORKFLOW_BYTES, what="agent file", follow=True) or b""
        if len(raw) > MAX_WORKFLOW_BYTES:
            raise ValueError("too large")  # named by its file name, never read whole
        text = normalize_newlines(raw.decode("utf-8"))
        found = read_front_matter(split_source(text, path=str(path)), Collector(str(path)))
    except (OSError, ValueError, SpecialFileError, FrontMatterUnclosed):
        found = None
    if found is not None:
        data = found[0]
    return agent_name(data, path)


def agent_names(workspace: Path, extra: Sequence[Path] = ()) -> list[tuple[str, Path]]:
    """Every agent's (name, file) in search order, the first of each name only."""
    seen: set[str] = set()
    found: list[tuple[str, Path]] = []
    for path, _ in searched_files(workspace, extra):
        name = declared_name(path)
        if name.lower() not in seen:
            seen.add(name.lower())
            found.append((name, path))
    return found


def beside(workflow: Workflow, extra: Sequence[Path] = ()) -> tuple[Path, ...]:
    """The folders to search for the agents ``workflow`` hands off to or calls: ``extra``
    (``--agents``), then, for an agent file, its own folder, so agents kept side by side find
    each other wherever they live (the workspace's and the user's folders come after)."""
    if workflow.kind != "agent":
        return tuple(extra)
    own = workflow.path.parent
    return (*extra, own) if own not in extra else tuple(extra)


def locate_agent(name: str, workspace: Path, extra: Sequence[Path] = ()) -> Path | None:
    """The file of the agent called ``name`` (its ``name:`` or file name), or None."""
    wanted = name.strip().lower()
    for known, path in agent_names(workspace, extra):
        if known.lower() == wanted or file_stem(path) == wanted:
            return path
    return None


def searched_text(workspace: Path, extra: Sequence[Path] = ()) -> str:
    """ "searched A, B, … (agents found: x, y)" for a message about a name not found."""
    searched = ", ".join(str(f) for f, _ in agent_folders(workspace, extra))
    known = ", ".join(name for name, _ in agent_names(workspace, extra)) or "none"
    return f"searched {searched} (agents found: {known})"
