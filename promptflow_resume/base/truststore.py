"""Which folders the person trusts to run what they bring, by the content hash of each file.

A repository carries files that make flow start programs or send credentials: hooks files,
MCP server configurations, agents that define servers. flow runs them only for a folder the
person trusted with ``flow trust``, and only as they were then: trust records the sha256 of
every such file, kept in ``trust.json`` in flow's own folder (``base/flowhome.py``), outside
every repository. A file that changed since (a pull, a checkout, an edit) or that appeared
since is not trusted until the folder is trusted again (direnv's ``allow``; VS Code's
Workspace Trust)::

    record_folder(Path("repo"), {".vscode/mcp.json": "sha256:…"}, at="2026-11-28T10:00:00Z")
    trust = Trust.for_folder(Path("repo"))        # what this machine recorded for it
    trust.verdict(Path("repo/.vscode/mcp.json"))  # Verdict.TRUSTED, CHANGED, NEW, ...
    Trust.everything(Path("repo"), "--trust-workspace")  # CI: this process trusts all of it

A file outside the folder is not the folder's to vouch for: its verdict is ``OUTSIDE`` and the
caller decides (a person's own ``--mcp-config`` file needs no trust).
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .durable import replace_file
from .errors import SpecialFileError, StorageError
from .flowhome import flow_home, read_private
from .safeopen import read_regular

#: The file in flow's folder that holds the trust decisions.
TRUST_FILE = "trust.json"
#: Largest trust file read (thousands of folders fit in far less).
MAX_STORE_BYTES = 16 * 1024 * 1024
#: Largest file hashed for trust: a configuration or a script, never a data set.
MAX_TRUSTED_BYTES = 16 * 1024 * 1024
#: The flag and the variable that trust the whole workspace for one process (CI).
TRUST_FLAG = "--trust-workspace"
TRUST_VARIABLE = "FLOW_TRUST_WORKSPACE"
#: The folder name runs' worktrees live under (docs/spec.md 9.1): a worktree of a trusted
#: repository is trusted as the repository is, file by file.
_WORKTREES = (".flow", "worktrees")


class Verdict(enum.Enum):
    """What trust says of one file."""

    #: Trusted as it is now.
    TRUSTED = "trusted"
    #: The folder was never trusted on this machine (or its trust was revoked).
    NOT_TRUSTED = "not trusted"
    #: The folder is trusted, and this file differs from the one trusted.
    CHANGED = "changed since the folder was trusted"
    #: The folder is trusted, and this file was not there (or not looked at) then.
    NEW = "new since the folder was trusted"
    #: The file is not inside the folder: not the folder's to vouch for.
    OUTSIDE = "outside the folder"
    #: A link, a pipe or a device where a file should be: never trusted, whatever it leads to.
    REFUSED = "not a regular file"

    @property
    def allowed(self) -> bool:
        """True for a file trusted as it is."""
        return self is Verdict.TRUSTED


def file_digest(data: bytes) -> str:
    """``sha256:<64 hex>``: how trust names a file's content."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_of(path: Path) -> str | None:
    """The digest of the regular file ``path`` (read without following a link), or None when
    it is missing, not a regular file, or larger than ``MAX_TRUSTED_BYTES``."""
    try:
        data = read_regular(path, MAX_TRUSTED_BYTES, what="file")
    except (OSError, SpecialFileError):
        return None
    if data is None or len(data) > MAX_TRUSTED_BYTES:
        return None
    return file_digest(data)


@dataclass(frozen=True)
class TrustedFolder:
    """One folder's trust: when, and the digest of each file trusted (relative POSIX paths)."""

    folder: str
    at: str
    files: Mapping[str, str]


def store_path() -> Path:
    """``trust.json`` in flow's folder."""
    return flow_home() / TRUST_FILE


def _store_error(path: Path, why: str) -> StorageError:
    return StorageError(
        f"it cannot be used: {why}. It holds the folders you trusted to run their hooks and "
        "MCP servers.",
        path=path,
        hint="Fix its permissions (chmod 600, and 700 for its folder) or remove it and trust "
        "your folders again with `flow trust DIR`.",
    )


def load_store() -> dict[str, TrustedFolder]:
    """Every folder trusted on this machine, by real path (empty when nothing is)."""
    path = store_path()
    data = read_private(
        path, MAX_STORE_BYTES, what="trust file", problem=lambda why: _store_error(path, why)
    )
    if data is None:
        return {}
    try:
        raw = json.loads(data.decode("utf-8"))
        folders = raw["folders"]
        return {
            name: TrustedFolder(name, str(entry["at"]), dict(entry["files"]))
            for name, entry in folders.items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise _store_error(path, f"it is not a trust file ({type(error).__name__})") from None


def _save_store(folders: Mapping[str, TrustedFolder]) -> None:
    path = store_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    body = {
        "version": 1,
        "folders": {
            name: {"at": f.at, "files": dict(sorted(f.files.items()))}
            for name, f in sorted(folders.items())
        },
    }
    text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    replace_file(path, text.encode("utf-8"), mode=0o600)


def folder_key(folder: Path) -> str:
    """How the store names a folder: its real path."""
    return os.path.realpath(folder)


def record_folder(folder: Path, files: Mapping[str, str], *, at: str) -> TrustedFolder:
    """Trust ``folder`` with exactly ``files`` (relative path -> digest), replacing what was
    recorded for it before."""
    folders = load_store()
    key = folder_key(folder)
    folders[key] = TrustedFolder(key, at, dict(files))
    _save_store(folders)
    return folders[key]


def revoke_folder(folder: Path) -> TrustedFolder | None:
    """Forget ``folder``'s trust; what was recorded, or None when it was not trusted."""
    folders = load_store()
    gone = folders.pop(folder_key(folder), None)
    if gone is not None:
        _save_store(folders)
    return gone


def _trusted_record(folder: str, folders: Mapping[str, TrustedFolder]) -> TrustedFolder | None:
    """The record that covers ``folder``: its own, else, for a run's worktree
    (``<repo>/.flow/worktrees/<id>``), the repository's."""
    if folder in folders:
        return folders[folder]
    parts = Path(folder).parts
    if len(parts) > 3 and parts[-3:-1] == _WORKTREES:
        return folders.get(str(Path(*parts[:-3])))
    return None


@dataclass(frozen=True)
class Trust:
    """What one process may run of what the folder ``root`` brings."""

    #: The folder, as its real path.
    root: Path
    #: Relative path -> digest of each file trusted (empty: nothing is).
    files: Mapping[str, str] = field(default_factory=dict)
    #: Every file of the folder is trusted, as it is (``--trust-workspace``).
    everything: bool = False
    #: Where the trust comes from, for people: ``flow trust on …``, ``--trust-workspace``.
    how: str = ""
    #: Whether a ``flow trust`` record exists for the folder at all.
    recorded: bool = False

    @classmethod
    def for_folder(cls, folder: Path) -> Trust:
        """What this machine's ``flow trust`` recorded for ``folder`` (or its repository)."""
        key = folder_key(folder)
        record = _trusted_record(key, load_store())
        if record is None:
            return cls(Path(key))
        how = f"flow trust on {record.at}"
        return cls(Path(key), dict(record.files), how=how, recorded=True)

    @classmethod
    def entire(cls, folder: Path, how: str) -> Trust:
        """Every file of ``folder`` is trusted by this process (``how`` says why)."""
        return cls(Path(folder_key(folder)), everything=True, how=how, recorded=True)

    @classmethod
    def of_files(cls, folder: Path, files: Mapping[str, str], how: str) -> Trust:
        """Exactly ``files`` (relative path -> digest) are trusted, as given by ``how``
        (the base commit of a pull request, say)."""
        return cls(Path(folder_key(folder)), dict(files), how=how, recorded=True)

    def to_record(self) -> dict[str, object]:
        """This decision as plain data, to judge a copy of the folder made elsewhere (a batch
        row on a Ray node, docs/spec.md 8.6): the digests trusted and how. A copy is judged
        file by file against these digests, never by what the other machine recorded; a
        whole-folder trust (``everything``) is first turned into the digests of the files it
        covers now (``trust.portable``), so the copy runs only what was trusted here."""
        if self.everything:
            raise ValueError("a whole-folder trust is carried as the digests of its files")
        return {"files": dict(self.files), "how": self.how, "recorded": self.recorded}

    @classmethod
    def from_record(cls, folder: Path, record: Mapping[str, object]) -> Trust:
        """The decision ``to_record`` carried, for the copy of the folder at ``folder``."""
        files = record.get("files")
        return cls(
            Path(folder_key(folder)),
            {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {},
            how=str(record.get("how") or ""),
            recorded=record.get("recorded") is True,
        )

    def relative(self, path: Path) -> str | None:
        """``path`` relative to the folder (POSIX), or None when it lies outside. The path as
        written counts, not where a link leads: the file at that place is what is judged."""
        absolute = Path(os.path.abspath(path))
        # The folder may be reached through a link (macOS's /tmp): then the file's folder is
        # taken by its real place, the file's own name as it is.
        for candidate in (absolute, Path(os.path.realpath(absolute.parent)) / absolute.name):
            try:
                rel = candidate.relative_to(self.root).parts
            except ValueError:
                continue
            # A run's worktree holds the repository's own files: judged as the repository's.
            if len(rel) > 3 and rel[:2] == _WORKTREES:
                rel = rel[3:]
            return "/".join(rel)
        return None

    def verdict(self, path: Path) -> Verdict:
        """Whether the file at ``path`` may be used as the executable configuration it is."""
        rel = self.relative(path)
        if rel is None:
            return Verdict.OUTSIDE
        if os.path.islink(path) or not os.path.isfile(path):
            return Verdict.REFUSED
        if self.everything:
            return Verdict.TRUSTED
        if not self.recorded:
            return Verdict.NOT_TRUSTED
        if rel not in self.files:
            return Verdict.NEW
        return Verdict.TRUSTED if digest_of(path) == self.files[rel] else Verdict.CHANGED


def untrusted_notice(skipped: Iterable[tuple[str, Verdict]], root: Path) -> str | None:
    """The one line a run prints about the brought files it leaves out, or None."""
    items = list(skipped)
    if not items:
        return None
    listed = ", ".join(f"{rel} ({verdict.value})" for rel, verdict in items)
    return (
        f"not used: {listed}: the folder {root} is not trusted to run what it brings; "
        f"`flow trust {root}` trusts it as it is now ({TRUST_FLAG}: for this run only)"
    )
