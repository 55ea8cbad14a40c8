"""Built-in file tools: read, write and list files inside the workspace (``tools.searchfiles``
searches them), and what every built-in tool shares.

Every path the model gives is taken relative to the workspace root (``ToolContext.workspace``)
and must stay inside it: ``..`` that climbs out, an absolute path elsewhere, or a symbolic link
that points outside is refused. A refusal, a missing file or a bad argument is a
``ToolResult`` with ``is_error=True`` that tells the model what to do instead; a tool never
raises for anything the model can cause. Paths in results are relative to the workspace root
with ``/`` separators, so the model can pass them straight back.

All four are idempotent (safe to run again when a run is resumed): reading, listing and
searching change nothing, and ``write_file`` leaves the same file behind however often it runs
with the same arguments.

Output is bounded so that one call cannot flood the conversation: ``read_file`` returns at most
``MAX_READ_LINES`` lines and ``MAX_READ_CHARS`` characters per call (and says how to read on),
``list_files`` at most ``MAX_LIST_ENTRIES`` paths.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ..base.confine import PathEscapeError, confine, is_within, relative_name
from ..base.durable import replace_file
from ..base.globs import glob_regex
from ..chat import ToolSpec
from .filescan import SNIFF_BYTES, walk
from .tool import Standalone, ToolContext, ToolResult

T = TypeVar("T")

MAX_READ_LINES = 2000
MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 1000
MAX_WRITE_BYTES = 16 * 1024 * 1024
#: Top-level folders ``write_file`` refuses: version control data, and flow's own runs
#: (a model that overwrote a progress file would corrupt its own checkpoint).
PROTECTED_DIRS = (".git", ".flow")


@functools.lru_cache(maxsize=128)
def _validator(schema_json: str) -> Any:
    # jsonschema is imported on first use: it costs ~50 ms, and `flow --help` never needs it.
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(schema_json))


def validate_arguments(schema: Mapping[str, Any], arguments: Any) -> str | None:
    """Why ``arguments`` do not fit the JSON Schema ``schema``, or None when they do."""
    if not schema:
        return None
    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.path])
    if not errors:
        return None
    lines = []
    for err in errors[:5]:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.path)
        lines.append(f"${where}: {err.message}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "invalid arguments: " + "; ".join(lines) + more


def error_result(message: str) -> ToolResult:
    """An error the model sees (and can correct), as a result rather than an exception."""
    return ToolResult(content=f"error: {message}", is_error=True)


def _object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def skill_target(ctx: ToolContext, path: Any) -> tuple[Path, str] | None:
    """(folder, path relative to it) when ``path`` leads outside the workspace into the
    folder of a skill the run may load; None otherwise (the workspace's own rules apply).

    Only where the path is written to lead counts here; the tool then confines the rest to
    that folder like to a workspace, so a link inside a skill cannot lead further out.
    """
    if not isinstance(path, str) or "\x00" in path:
        return None
    root = Path(os.path.abspath(ctx.workspace))
    candidate = Path(os.path.normpath(root / path))
    if is_within(candidate, root):
        return None
    for folder in ctx.skill_folders():
        base = Path(os.path.abspath(folder))
        if is_within(candidate, base):
            return base, os.path.relpath(candidate, base)
    return None


class BuiltinTool(Standalone):
    """Shared behaviour of the file tools: argument check, workspace, errors as results."""

    spec: ToolSpec
    idempotent: bool = True
    #: The read tools also read inside the folders of the run's skills (``skill_target``).
    reads_skills: bool = False

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Check ``arguments`` against the spec, then do the work inside ``ctx.workspace``
        (or inside a skill's folder, for a read tool given a path there)."""
        target = skill_target(ctx, arguments.get("path")) if self.reads_skills else None
        work = partial(self._run_for, ctx=ctx)
        if target is not None:
            folder, rel = target
            inside = replace(ctx, workspace=folder)
            return guarded_call(self.spec, {**arguments, "path": rel}, inside, work)
        return guarded_call(self.spec, arguments, ctx, work)

    def _run_for(self, arguments: dict[str, Any], root: Path, *, ctx: ToolContext) -> ToolResult:
        """The work, for a tool whose answer depends on the call's context (its advice)."""
        return self._run(arguments, root)

    def _run(self, arguments: dict[str, Any], root: Path) -> ToolResult:
        raise NotImplementedError


def listing_advice(ctx: ToolContext, what: str) -> str:
    """``; <tool> shows what exists`` naming a tool the model was offered that lists or finds
    files (``what`` says what it would show), or nothing when it has none: a model told to
    call a tool it does not have only fails again."""
    offered = ctx.offered
    for tool in ("list_files", "search_files"):
        if offered is None or tool in offered:
            return f"; {tool} {what}"
    return ""


def guarded_call(
    spec: ToolSpec,
    arguments: dict[str, Any],
    ctx: ToolContext,
    work: Callable[[dict[str, Any], Path], T],
) -> T | ToolResult:
    """``work(arguments, workspace)`` once ``arguments`` match ``spec`` and the workspace
    exists; a bad argument, a path outside the workspace or an OS error comes back as an error
    result the model reads (the file tools and the edit tools' planning share this)."""
    problem = validate_arguments(spec.parameters, arguments)
    if problem is not None:
        return error_result(f"{problem}. Expected: {signature(spec)}.")
    root = Path(ctx.workspace)
    if not root.is_dir():
        return error_result(f"the workspace folder {root} does not exist")
    try:
        return work(arguments, root)
    except PathEscapeError as exc:
        return error_result(str(exc))
    except OSError as exc:
        # Permission denied, a file removed mid-call, a full disk: the model should know.
        reason = exc.strerror or type(exc).__name__
        name = f" '{relative_name(Path(exc.filename), root)}'" if exc.filename else ""
        return error_result(f"{reason}{name}")


def signature(spec: ToolSpec) -> str:
    """``name(required, optional?)``: how a tool is called, for error messages."""
    props = spec.parameters.get("properties", {})
    required = set(spec.parameters.get("required", ()))
    parts = [name if name in required else f"{name}?" for name in props]
    return f"{spec.name}({', '.join(parts)})"


# --- read_file ----------------------------------------------------------------------------


class ReadFile(BuiltinTool):
    """``read_file {path, offset?, limit?}``: a text file's lines.

    The whole file comes back exactly as stored when it fits in one call. Otherwise the
    requested lines come back followed by one line in brackets saying which lines were shown
    and the ``offset`` to read on from. Binary files are described (size, kind), not shown.
    """

    #: Changes no file: no snapshot after its calls (docs/spec.md 12).
    read_only = True

    reads_skills = True
    spec = ToolSpec(
        name="read_file",
        description=(
            "Read a text file in the workspace. Returns the file's text; for long files, up to "
            f"{MAX_READ_LINES} lines per call: pass offset (1-based line number) and limit "
            "(number of lines) to read other parts."
        ),
        parameters=_object_schema(
            {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "First line to read (1-based). Default 1.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"Number of lines to read (at most {MAX_READ_LINES}).",
                },
            },
            ["path"],
        ),
    )

    def _run_for(self, arguments: dict[str, Any], root: Path, *, ctx: ToolContext) -> ToolResult:
        name = arguments["path"]
        path = confine(root, name)
        rel = relative_name(path, root)
        if not path.exists():
            return error_result(
                f"there is no file '{rel}'{listing_advice(ctx, 'shows what exists')}"
            )
        if path.is_dir():
            return error_result(f"'{rel}' is a folder{listing_advice(ctx, 'shows what it holds')}")
        if not path.is_file():
            # A FIFO or device would block or never end.
            return error_result(f"'{rel}' is not a regular file; only files can be read")
        offset = int(arguments.get("offset", 1))
        limit = min(int(arguments.get("limit", MAX_READ_LINES)), MAX_READ_LINES)
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
            if b"\x00" in head:
                size = os.fstat(fh.fileno()).st_size
                return ToolResult(describe_binary(rel, size, head))
            fh.seek(0)
            return self._lines(fh, rel, offset, limit)

    @staticmethod
    def _lines(fh: Any, rel: str, offset: int, limit: int) -> ToolResult:
        shown: list[str] = []
        chars = 0
        total = 0
        last = offset - 1
        invalid = cut = False
        for raw in fh:
            total += 1
            if total < offset or len(shown) >= limit or chars >= MAX_READ_CHARS:
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                line = raw.decode("utf-8", errors="replace")
                invalid = True
            if chars + len(line) > MAX_READ_CHARS:
                if shown:
                    chars = MAX_READ_CHARS  # stop here; the next call starts at this line
                    continue
                # One line longer than a whole call (minified code): show its start.
                line = line[:MAX_READ_CHARS]
                cut = True
            shown.append(line)
            chars += len(line)
            last = total
        if total == 0:
            return ToolResult(f"(the file '{rel}' is empty)")
        if offset > total:
            return error_result(
                f"offset {offset} is past the end of '{rel}', which has {total} lines"
            )
        text = "".join(shown)
        notes = []
        if offset > 1 or last < total:
            more = f"; read on with offset={last + 1}" if last < total else ""
            notes.append(f"lines {offset}-{last} of {total}{more}")
        if cut:
            notes.append(f"line {last} is longer than {MAX_READ_CHARS} characters and was cut")
        if invalid:
            notes.append("the file is not valid UTF-8; undecodable bytes are shown as \ufffd")
        if notes:
            sep = "" if text.endswith("\n") else "\n"
            text += f"{sep}[{'; '.join(notes)}]"
        return ToolResult(text)


_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (also docx, xlsx, jar, wheel)"),
    (b"\x1f\x8b", "gzip archive"),
    (b"\x7fELF", "ELF executable"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\x00asm", "WebAssembly module"),
    (b"\xca\xfe\xba\xbe", "Java class or Mach-O binary"),
    (b"MZ", "Windows executable"),
    (b"BZh", "bzip2 archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
)


def describe_binary(rel: str, size: int, head: bytes) -> str:
    """A one-line description of a binary file: its size and, where known, its kind."""
    kind = "unknown kind"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        kind = "WebP image"
    else:
        kind = next((k for magic, k in _MAGIC if head.startswith(magic)), kind)
    return f"'{rel}' is a binary file ({kind}, {size} bytes); its content is not shown as text."


# --- write_file ---------------------------------------------------------------------------


class WriteFile(BuiltinTool):
    """``write_file {path, content}``: create or replace a text file (UTF-8, as given).

    Idempotent: writing the same content again leaves the same file (and is reported as
    unchanged without touching it). Folders on the way are created. An existing file is
    replaced atomically (a temporary file renamed over it) and keeps its permissions. Writing
    into ``.git/`` or ``.flow/`` at the workspace root is refused.
    """

    spec = ToolSpec(
        name="write_file",
        description=(
            "Create or overwrite a text file in the workspace with the given content "
            "(the whole file). Missing folders are created."
        ),
        parameters=_object_schema(
            {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "content": {"type": "string", "description": "The complete new file content."},
            },
            ["path", "content"],
        ),
    )

    def _run(self, arguments: dict[str, Any], root: Path) -> ToolResult:
        path = confine(root, arguments["path"])
        rel = relative_name(path, root)
        top = rel.split("/", 1)[0]
        if top in PROTECTED_DIRS:
            return error_result(f"'{rel}' is inside {top}/, which tools may not change")
        if rel == ".":
            return error_result("a file path is needed, not the workspace folder itself")
        try:
            data = arguments["content"].encode("utf-8")
        except UnicodeEncodeError as exc:
            return error_result(
                f"the content is not valid Unicode ({exc.reason} at character {exc.start}); "
                "nothing was written"
            )
        if len(data) > MAX_WRITE_BYTES:
            return error_result(
                f"the content is {len(data)} bytes; write_file takes at most {MAX_WRITE_BYTES}"
            )
        if path.is_dir():
            return error_result(f"'{rel}' is a folder; choose a file name inside it")
        if path.exists():
            if not path.is_file():
                return error_result(f"'{rel}' is not a regular file; it was left unchanged")
            if not os.access(path, os.W_OK):
                return error_result(f"'{rel}' is read-only; it was left unchanged")
            old = path.read_bytes()
            if old == data:
                return ToolResult(
                    f"'{rel}' already has this content ({len(data)} bytes); unchanged"
                )
            replace_file(path, data, mode=None)
            return ToolResult(f"wrote {len(data)} bytes to '{rel}' (replaced {len(old)} bytes)")
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL + O_NOFOLLOW: never follow a link planted after the check above.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return ToolResult(f"wrote {len(data)} bytes to '{rel}' (new file)")


# --- list_files ---------------------------------------------------------------------------


class ListFiles(BuiltinTool):
    """``list_files {path?, pattern?}``: a folder's entries, or files matching a glob.

    Without ``pattern``: the folder's direct entries, one per line, folders ending in ``/``
    and symbolic links shown as ``name -> target``. With ``pattern``: every file below the
    folder whose path matches the glob (``*``, ``?``, ``[abc]``, ``{a,b}``, ``**/``); a pattern
    without ``/`` is matched against file names only. Recursive listing skips
    ``SKIPPED_DIRS`` (``.git``, ``node_modules`` …) and does not follow links to folders.
    """

    #: Changes no file: no snapshot after its calls (docs/spec.md 12).
    read_only = True

    reads_skills = True
    spec = ToolSpec(
        name="list_files",
        description=(
            "List files in the workspace. Without pattern: the entries of one folder (folders "
            "end with '/'). With pattern: all files below the folder matching a glob such as "
            "'*.py', 'src/**/*.ts' or '*.{md,txt}'."
        ),
        parameters=_object_schema(
            {
                "path": {
                    "type": "string",
                    "description": "Folder relative to the workspace. Default: the workspace root.",
                },
                "pattern": {
                    "type": "string",
                    "description": "Glob to match files below the folder, e.g. '**/*.py'.",
                },
            },
            [],
        ),
    )

    def _run(self, arguments: dict[str, Any], root: Path) -> ToolResult:
        folder = confine(root, arguments.get("path") or ".")
        rel = relative_name(folder, root)
        if not folder.exists():
            return error_result(f"there is no folder '{rel}'")
        if not folder.is_dir():
            return error_result(f"'{rel}' is a file, not a folder; read it with read_file")
        pattern = arguments.get("pattern")
        if pattern:
            matcher = glob_matcher(pattern)
            cut = 0 if rel == "." else len(rel) + 1
            lines = (r for _, r in walk(str(root), str(folder)) if matcher(r[cut:]))
            empty = f"(no files under '{rel}' match '{pattern}')"
        else:
            lines = (_entry_line(entry, root) for entry in _sorted_entries(folder))
            empty = f"(the folder '{rel}' is empty)"
        shown, more = _take(lines, MAX_LIST_ENTRIES)
        if not shown:
            return ToolResult(empty)
        text = "\n".join(shown)
        if more:
            text += (
                f"\n[{MAX_LIST_ENTRIES} entries shown, more not listed; narrow with path or "
                "pattern]"
            )
        return ToolResult(text)


def _sorted_entries(folder: Path) -> list[os.DirEntry[str]]:
    with os.scandir(folder) as it:
        return sorted(it, key=lambda e: e.name)


def _entry_line(entry: os.DirEntry[str], root: Path) -> str:
    name = relative_name(Path(entry.path), root)
    if entry.is_symlink():
        return f"{name} -> {os.readlink(entry.path)}"
    return f"{name}/" if entry.is_dir() else name


def _rel(path: Path, folder: Path) -> str:
    return os.path.relpath(path, folder).replace(os.sep, "/")


def _take(items: Iterator[str], limit: int) -> tuple[list[str], bool]:
    """The first ``limit`` items, and whether there were more."""
    shown: list[str] = []
    for item in items:
        if len(shown) == limit:
            return shown, True
        shown.append(item)
    return shown, False


def walk_files(folder: Path, root: Path | None = None) -> Iterator[Path]:
    """Regular files below ``folder`` in sorted order (see ``scan.walk``); ``root`` is the
    workspace whose ``.gitignore`` files apply (default: ``folder`` itself)."""
    for path, _ in walk(str(root if root is not None else folder), str(folder)):
        yield Path(path)


def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """A predicate on ``/``-separated relative paths for a glob; no ``/`` → names only."""
    glob = pattern.strip()
    while glob.startswith("./"):
        glob = glob[2:]
    regex = re.compile(glob_regex(glob or "*") + r"\Z", re.DOTALL)
    if "/" in glob:
        return lambda rel: regex.match(rel) is not None
    return lambda rel: regex.match(rel.rsplit("/", 1)[-1]) is not None
