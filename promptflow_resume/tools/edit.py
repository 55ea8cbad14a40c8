"""Edit tools: create a file, replace a unique string, insert text, delete a file.

Each is a separate tool, like the editor's own, and each successful result ends with the
change as a unified diff in a ``diff`` code block, so the progress file shows what changed
(readable in a pull request)::

    replaced 1 occurrence in 'src/app.py'

    ```diff
    --- a/src/app.py
    +++ b/src/app.py
    @@ -1 +1 @@
    -x = 1
    +x = 2
    ```

An edit is not idempotent (replacing ``a`` by ``ab`` twice gives ``abb``), so it is reconciled
by its end state instead: before the call's start is recorded, ``expectation`` computes the
file's hash before and after the edit; on resume ``in_flight_state`` compares the file with
both. Already at the end state → the edit happened and is recorded as done; still at the start
state → it runs once; anything else → a person decides (``needs_review``).

Paths follow the rules of the other file tools (``base.confine``): inside the workspace,
symbolic links resolved, ``.git/`` and ``.flow/`` at the root refused.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..base import faults
from ..base.confine import PathEscapeError, confine, relative_name
from ..base.durable import replace_file
from ..chat import ToolSpec
from .builtin import MAX_WRITE_BYTES, PROTECTED_DIRS, _object_schema, error_result, guarded_call
from .filescan import SNIFF_BYTES
from .tool import Standalone, ToolContext, ToolResult

#: The hash recorded for "no file here".
ABSENT = "absent"
#: Diffs longer than this many lines are cut in the result (the file itself is complete).
MAX_DIFF_LINES = 400

InFlightState = Literal["applied", "not_applied", "changed"]


def file_state(path: Path) -> str:
    """``sha256:HEX`` of a file's bytes, or ``ABSENT`` when there is no regular file."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return ABSENT
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _text_state(text: str | None) -> str:
    if text is None:
        return ABSENT
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def unified_diff(rel: str, before: str | None, after: str | None) -> str:
    """A ``diff`` code block of the change from ``before`` to ``after`` (None: no file)."""
    old = [] if before is None else before.splitlines(keepends=True)
    new = [] if after is None else after.splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            old,
            new,
            fromfile="/dev/null" if before is None else f"a/{rel}",
            tofile="/dev/null" if after is None else f"b/{rel}",
        )
    )
    body: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            body.append(line[:-1])
        else:
            body.append(line)
            body.append("\\ No newline at end of file")
    if len(body) > MAX_DIFF_LINES:
        cut = len(body) - MAX_DIFF_LINES
        body = [*body[:MAX_DIFF_LINES], f"[... {cut} more diff lines not shown ...]"]
    text = "\n".join(body)
    # A fence longer than any run of backticks inside, so the diff cannot close it.
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}diff\n{text}\n{fence}"


@dataclass(frozen=True)
class Planned:
    """What an edit will do: the file, its text before (None: absent) and after."""

    path: Path
    rel: str
    before: str | None
    after: str | None
    summary: str


class EditTool(Standalone):
    """Shared behaviour of the edit tools: plan the change, check it, apply it, show the diff."""

    spec: ToolSpec
    #: Not safe to repeat blindly; resume reconciles it by its end state instead.
    idempotent: bool = False

    def plan(self, arguments: dict[str, Any], root: Path) -> Planned | ToolResult:
        """The change these arguments make to the workspace now, or an error result."""
        raise NotImplementedError

    def _planned(self, arguments: dict[str, Any], ctx: ToolContext) -> Planned | ToolResult:
        return guarded_call(self.spec, arguments, ctx, self.plan)

    def expectation(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, str] | None:
        """``{path, before, after}`` hashes to record with the call's start; None when the call
        will change nothing (an error, or the file already as asked)."""
        planned = self._planned(arguments, ctx)
        if isinstance(planned, ToolResult) or planned.before == planned.after:
            return None
        return {
            "path": planned.rel,
            "before": _text_state(planned.before),
            "after": _text_state(planned.after),
        }

    def in_flight_state(self, expect: dict[str, str], workspace: Path) -> InFlightState:
        """Where an interrupted call of this tool stands, judged by the file as it is now."""
        try:
            path = confine(workspace, expect["path"])
        except PathEscapeError:
            return "changed"
        now = file_state(path)
        if now == expect["after"]:
            return "applied"
        if now == expect["before"]:
            return "not_applied"
        return "changed"

    def before_candidates(self, arguments: dict[str, Any], after: str) -> list[str | None]:
        """Texts the file may have had before this edit produced ``after`` (to show a diff)."""
        return []

    def applied_result(
        self, expect: dict[str, str], arguments: dict[str, Any], workspace: Path
    ) -> ToolResult:
        """The result of an edit found already applied on resume, with its diff when the text
        before can be worked out (and is proven by the recorded hash)."""
        rel = expect["path"]
        head = (
            f"'{rel}': this edit was applied before the run stopped (the file matches the "
            "edit's end state), so it was not applied again"
        )
        try:
            path = confine(workspace, rel)
            after = None if expect["after"] == ABSENT else path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, PathEscapeError):
            return ToolResult(head)
        if after is None:
            return ToolResult(head)
        for before in self.before_candidates(arguments, after):
            if _text_state(before) == expect["before"]:
                return ToolResult(f"{head}\n\n{unified_diff(rel, before, after)}")
        return ToolResult(head)

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Apply the edit once and return a summary with the diff."""
        planned = self._planned(arguments, ctx)
        if isinstance(planned, ToolResult):
            return planned
        if planned.before == planned.after:
            return ToolResult(f"'{planned.rel}' already reads as asked; unchanged")
        try:
            _apply(planned)
        except OSError as exc:
            return error_result(f"{exc.strerror or type(exc).__name__} '{planned.rel}'")
        diff = unified_diff(planned.rel, planned.before, planned.after)
        return ToolResult(f"{planned.summary}\n\n{diff}")


def _apply(planned: Planned) -> None:
    path = planned.path
    faults.point("edit.before_write")
    if planned.after is None:
        path.unlink()
        faults.point("edit.after_write")
        return
    data = planned.after.encode("utf-8")
    if planned.before is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL + O_NOFOLLOW: never follow a link planted after the plan was made.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    else:
        replace_file(path, data, mode=None)
    faults.point("edit.after_write")


def _target(root: Path, name: str) -> tuple[Path, str] | ToolResult:
    path = confine(root, name)
    rel = relative_name(path, root)
    if rel == ".":
        return error_result("a file path is needed, not the workspace folder itself")
    top = rel.split("/", 1)[0]
    if top in PROTECTED_DIRS:
        return error_result(f"'{rel}' is inside {top}/, which tools may not change")
    if path.is_dir():
        return error_result(f"'{rel}' is a folder; name a file")
    if path.exists() and not path.is_file():
        return error_result(f"'{rel}' is not a regular file; it was left unchanged")
    return path, rel


def _existing(root: Path, name: str, hint: str) -> tuple[Path, str, str] | ToolResult:
    """The path, workspace-relative name and text of an existing text file, or an error
    result (``hint`` follows the one for a missing file)."""
    target = _target(root, name)
    if isinstance(target, ToolResult):
        return target
    path, rel = target
    if not path.exists():
        return error_result(f"there is no file '{rel}'{hint}")
    text = _read_text(path, rel)
    if isinstance(text, ToolResult):
        return text
    return path, rel, text


def _read_text(path: Path, rel: str) -> str | ToolResult:
    data = path.read_bytes()
    if b"\x00" in data[:SNIFF_BYTES]:
        return error_result(f"'{rel}' is a binary file; only text files can be edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return error_result(f"'{rel}' is not UTF-8 text; it can only be replaced with write_file")


def _encodable(text: str, what: str) -> ToolResult | None:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        return error_result(f"{what} is not valid Unicode ({exc.reason}); nothing was changed")
    if size > MAX_WRITE_BYTES:
        return error_result(f"{what} is {size} bytes; at most {MAX_WRITE_BYTES} can be written")
    return None


_PATH = {"type": "string", "description": "File path relative to the workspace."}


class CreateFile(EditTool):
    """``create_file {path, content}``: a new file; an existing one is not overwritten."""

    spec = ToolSpec(
        name="create_file",
        description=(
            "Create a new text file in the workspace with the given content (missing folders "
            "are created). Fails if the file exists: edit it with replace_string_in_file."
        ),
        parameters=_object_schema(
            {"path": _PATH, "content": {"type": "string", "description": "The file's content."}},
            ["path", "content"],
        ),
    )

    def plan(self, arguments: dict[str, Any], root: Path) -> Planned | ToolResult:
        """The new file, or an error when something is already there."""
        target = _target(root, arguments["path"])
        if isinstance(target, ToolResult):
            return target
        path, rel = target
        content: str = arguments["content"]
        if (bad := _encodable(content, "the content")) is not None:
            return bad
        if path.exists():
            existing = _read_text(path, rel)
            if existing == content:
                return Planned(path, rel, content, content, "")
            return error_result(
                f"'{rel}' already exists; change it with replace_string_in_file or insert_text"
            )
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return Planned(path, rel, None, content, f"created '{rel}' ({lines} lines)")

    def before_candidates(self, arguments: dict[str, Any], after: str) -> list[str | None]:
        """A created file had no text before."""
        return [None]


class ReplaceString(EditTool):
    """``replace_string_in_file {path, old_string, new_string}``: replace one unique string."""

    spec = ToolSpec(
        name="replace_string_in_file",
        description=(
            "Replace text in a file: old_string must occur exactly once (include a few lines "
            "of context to make it unique); it is replaced by new_string."
        ),
        parameters=_object_schema(
            {
                "path": _PATH,
                "old_string": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The exact text to replace, occurring once in the file.",
                },
                "new_string": {"type": "string", "description": "The replacement text."},
            },
            ["path", "old_string", "new_string"],
        ),
    )

    def plan(self, arguments: dict[str, Any], root: Path) -> Planned | ToolResult:
        """The file with the one occurrence replaced, or an error naming how many there are."""
        found = _existing(root, arguments["path"], "; create it with create_file")
        if isinstance(found, ToolResult):
            return found
        path, rel, text = found
        old: str = arguments["old_string"]
        new: str = arguments["new_string"]
        if (bad := _encodable(new, "new_string")) is not None:
            return bad
        # Files with CRLF line ends: the model usually sends LF; match what the file holds.
        if old not in text and "\r\n" in text and "\r\n" not in old:
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
        if count == 0:
            return error_result(
                f"old_string was not found in '{rel}'; read the file and copy the text exactly, "
                "including whitespace"
            )
        if count > 1:
            return error_result(
                f"old_string occurs {count} times in '{rel}'; include more surrounding lines so "
                "that it occurs exactly once"
            )
        at = text.index(old)
        after = text[:at] + new + text[at + len(old) :]
        line = text.count("\n", 0, at) + 1
        return Planned(path, rel, text, after, f"replaced 1 occurrence in '{rel}' at line {line}")

    def before_candidates(self, arguments: dict[str, Any], after: str) -> list[str | None]:
        """``after`` with one occurrence of new_string put back to old_string (each one)."""
        old: str = arguments.get("old_string", "")
        new: str = arguments.get("new_string", "")
        if "\r\n" in after and "\r\n" not in old:
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        found: list[str | None] = []
        at = after.find(new)
        while at != -1 and len(found) < 100:
            found.append(after[:at] + old + after[at + len(new) :])
            at = after.find(new, at + 1) if new else -1
        return found


class InsertText(EditTool):
    """``insert_text {path, line, text}``: insert lines before a line (0 or past the end:
    append)."""

    spec = ToolSpec(
        name="insert_text",
        description=(
            "Insert text into a file before the given 1-based line number; line 0 or a number "
            "past the end appends at the end of the file."
        ),
        parameters=_object_schema(
            {
                "path": _PATH,
                "line": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Insert before this line (1-based); 0 appends.",
                },
                "text": {"type": "string", "minLength": 1, "description": "The text to insert."},
            },
            ["path", "line", "text"],
        ),
    )

    def plan(self, arguments: dict[str, Any], root: Path) -> Planned | ToolResult:
        """The file with the text inserted as whole lines."""
        found = _existing(root, arguments["path"], "; create it with create_file")
        if isinstance(found, ToolResult):
            return found
        path, rel, text = found
        insert: str = arguments["text"]
        if (bad := _encodable(insert, "the text")) is not None:
            return bad
        newline = "\r\n" if "\r\n" in text else "\n"
        if not insert.endswith("\n"):
            insert += newline
        lines = text.splitlines(keepends=True)
        number = int(arguments["line"])
        if number == 0 or number > len(lines):
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += newline
            lines.append(insert)
            where = "at the end"
        else:
            lines.insert(number - 1, insert)
            where = f"before line {number}"
        count = insert.count("\n")
        return Planned(
            path, rel, text, "".join(lines), f"inserted {count} line(s) {where} of '{rel}'"
        )

    def before_candidates(self, arguments: dict[str, Any], after: str) -> list[str | None]:
        """``after`` without the inserted lines, wherever they occur."""
        block: str = arguments.get("text", "")
        newline = "\r\n" if "\r\n" in after else "\n"
        if block and not block.endswith("\n"):
            block += newline
        found: list[str | None] = []
        at = after.find(block) if block else -1
        while at != -1 and len(found) < 100:
            rest = after[:at] + after[at + len(block) :]
            found.append(rest)
            if at == len(after) - len(block) and rest.endswith(newline):
                found.append(rest[: -len(newline)])  # a newline was added to end the last line
            at = after.find(block, at + 1)
        return found


class DeleteFile(EditTool):
    """``delete_file {path}``: remove a file (the diff shows its last content)."""

    spec = ToolSpec(
        name="delete_file",
        description="Delete a file in the workspace.",
        parameters=_object_schema({"path": _PATH}, ["path"]),
    )

    def plan(self, arguments: dict[str, Any], root: Path) -> Planned | ToolResult:
        """The file gone, or an error when there is none."""
        found = _existing(root, arguments["path"], "")
        if isinstance(found, ToolResult):
            return found
        path, rel, text = found
        return Planned(path, rel, text, None, f"deleted '{rel}'")
