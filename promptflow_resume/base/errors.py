"""One exception tree for every failure a user can cause.

Each class carries the process exit code the CLI maps it to, and a message written as one
paragraph that says what went wrong and how to fix it. Errors about a file carry its path and,
where known, the line, column and field path (``$.steps.analyze.status``)::

    raise ProgressSchemaError(
        "status must be one of running, paused, ...",
        path=p, line=7, column=9, field="$.status",
    )

Exit codes are part of the documented interface (``docs/spec.md``, "Exit codes").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Exit codes. 0 = success, 1 = the run ended without completing (failed, budget, timeout),
# 2 = usage error (typer's own), 3 = internal bug; the rest name a class of user error.
EXIT_OK = 0
EXIT_RUN_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_BUG = 3
EXIT_INVALID_FILE = 4
EXIT_NOT_FOUND = 5
EXIT_LOCKED = 6
EXIT_WORKFLOW_CHANGED = 7
EXIT_NEEDS_REVIEW = 8
EXIT_INPUT = 9
EXIT_PROVIDER = 10
EXIT_AWAITING_INPUT = 11
EXIT_STORAGE = 12
EXIT_TOOL_SERVER = 13
EXIT_GIT = 14
EXIT_AWAITING_APPROVAL = 15
EXIT_SUSPENDED = 16
#: A rewind or fork would overwrite files changed since the run last touched them (spec 12).
EXIT_FILES_CHANGED = 18
#: A file snapshot the progress file names is not in the repository (spec 12).
EXIT_SNAPSHOT_MISSING = 19
EXIT_TELEMETRY = 20
EXIT_SERVE = 21
EXIT_UNTRUSTED = 22
EXIT_INTERRUPTED = 130


class FlowError(Exception):
    """Base of every error a user can cause; the CLI prints it and exits with ``exit_code``."""

    exit_code: int = EXIT_INVALID_FILE

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.column = column
        self.field = field
        self.hint = hint

    @property
    def location(self) -> str | None:
        """``path:line:col`` (as much of it as is known), or None."""
        if self.path is None:
            return None
        loc = self.path
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        return loc

    def __str__(self) -> str:
        parts: list[str] = []
        if self.location:
            parts.append(f"{self.location}:")
        if self.field:
            parts.append(f"{self.field}:")
        parts.append(self.message.rstrip())
        text = " ".join(parts)
        if self.hint:
            text += " " + self.hint.strip()
        return text

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form for ``--json`` output."""
        return {
            "error": type(self).__name__,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "field": self.field,
            "hint": self.hint,
            "exit_code": self.exit_code,
        }


# --- files -------------------------------------------------------------------------------


class InvalidFileError(FlowError):
    """A file we were asked to read is not what it should be."""

    exit_code = EXIT_INVALID_FILE


class ProgressFormatError(InvalidFileError):
    """A progress file cannot be parsed (bad YAML, broken body, truncated, binary, too big)."""


class ProgressSchemaError(InvalidFileError):
    """A progress file's front matter parses but violates ``schemas/progress.schema.json``.

    The error itself names the first problem (by position in the file); ``problems`` holds
    every one, first included, for ``flow validate`` to list.
    """

    def __init__(
        self, message: str, *, problems: list[FlowError] | None = None, **where: Any
    ) -> None:
        super().__init__(message, **where)
        self.problems: list[FlowError] = list(problems or [])

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` form, with every problem."""
        data = super().to_dict()
        data["problems"] = [
            {
                "message": p.message,
                "line": p.line,
                "column": p.column,
                "field": p.field,
            }
            for p in self.problems
        ]
        return data


class UntrustedParamError(InvalidFileError):
    """A progress file's model parameter that flow does not send (docs/spec.md 10.2)."""


class UnsupportedVersionError(InvalidFileError):
    """A progress file of a format version this build cannot read."""


class SidecarError(InvalidFileError):
    """A sidecar file is missing, altered, or its link leaves the sidecar folder."""


class DigestError(InvalidFileError):
    """Recorded transcript digests do not add up: corruption, not a hand edit."""


class SpecialFileError(InvalidFileError):
    """A run's file is a symbolic link, a folder, a pipe, a device or a socket where flow reads
    or writes only regular files (docs/spec.md 10.4)."""


class WorkflowError(InvalidFileError):
    """A workflow file (``*.prompt.md``) cannot be loaded or fails its checks."""


class StorageError(FlowError):
    """A run's files cannot be written or read: disk full, file size limit, read-only folder,
    no permission. What was written before stays intact; the run resumes once that is fixed."""

    exit_code = EXIT_STORAGE


class FileNotFoundFlowError(FlowError):
    """A file named on the command line (or referenced by a progress file) does not exist."""

    exit_code = EXIT_NOT_FOUND


# --- runs --------------------------------------------------------------------------------


class RunLockedError(FlowError):
    """Another live process owns the run."""

    exit_code = EXIT_LOCKED


class WorkflowChangedError(FlowError):
    """The workflow changed in steps already started, and no flag says what to do."""

    exit_code = EXIT_WORKFLOW_CHANGED


class NeedsReviewError(FlowError):
    """A run cannot continue without a person's decision (e.g. a non-idempotent tool in flight)."""

    exit_code = EXIT_NEEDS_REVIEW


class AwaitingInputError(FlowError):
    """A run waits for an answer a person must write into the progress file."""

    exit_code = EXIT_AWAITING_INPUT


class InputError(FlowError):
    """A missing, malformed or mistyped input value or option."""

    exit_code = EXIT_INPUT


class NotConfirmedError(InputError):
    """A file from someone else asks for what only the person running flow may grant: an
    endpoint for their key, or wider permissions (docs/spec.md 10.2, 10.7). Nothing was
    sent or run; a flag confirms it."""


class EndpointNotConfirmedError(NotConfirmedError):
    """Requests (and the key) would go to an endpoint that only a file named."""


class PermissionsNotConfirmedError(NotConfirmedError):
    """The workflow allows more commands or hosts than when the run last went on."""


class ProviderError(FlowError):
    """A model provider failed. ``transient`` errors are retried; permanent ones end the run."""

    exit_code = EXIT_PROVIDER

    def __init__(
        self,
        message: str,
        *,
        transient: bool = False,
        retry_after: float | None = None,
        status_code: int | None = None,
        reason: str = "provider_error",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.transient = transient
        self.retry_after = retry_after
        self.status_code = status_code
        self.reason = reason


class ModelUnavailableError(ProviderError):
    """The provider said the requested model does not exist or is not available to this key
    (OpenAI: HTTP 404/403 with code ``model_not_found``; Anthropic: 404 ``not_found_error``
    naming the model). Only this class lets a run fall to the next model of its ``model:``
    list (docs/spec.md 5.3); ``model`` is the model that was refused."""

    REASON = "model_not_found"

    def __init__(
        self, message: str, *, model: str | None, status_code: int | None, hint: str | None = None
    ) -> None:
        super().__init__(
            message, transient=False, status_code=status_code, reason=self.REASON, hint=hint
        )
        self.model = model


class ModelsRefusedError(ProviderError):
    """Every model of a run's ``model:`` list was refused as unknown or unavailable."""

    REASON = "models_refused"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, transient=False, status_code=None, reason=self.REASON, hint=hint)


class ProviderSetupError(ProviderError):
    """A provider cannot be used at all: missing key, missing extra, unknown name."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, transient=False, reason="provider_setup", hint=hint)


class ReplayMismatchError(ProviderError):
    """A replayed run sent a request that differs from the recording."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, transient=False, reason="replay_mismatch", hint=hint)


class DeadlineError(ProviderError):
    """A retry was not started because its wait would pass the run's time limit; the engine
    stops the run as ``timeout``. Decided by the class, never by the ``reason`` words."""

    REASON = "deadline"

    def __init__(self, message: str, *, status_code: int | None, hint: str | None = None) -> None:
        super().__init__(
            message, transient=False, status_code=status_code, reason=self.REASON, hint=hint
        )


class ContextLengthError(ProviderError):
    """The provider refused the request as too long for the model's context window (OpenAI's
    ``context_length_exceeded``, llama.cpp's ``exceed_context_size_error``, vLLM's and
    Ollama's words for it); ``window`` is the window in tokens when the server said it."""

    REASON = "context_length_exceeded"

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None,
        window: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(
            message, transient=False, status_code=status_code, reason=self.REASON, hint=hint
        )
        self.window = window


class ProviderTimeoutError(ProviderError):
    """A model request timed out: no token for the idle timeout (``idle_timeout``, transient:
    a stalled stream is retried), or past the whole-request limit (``request_timeout``,
    permanent: the same generation at the same speed would not finish in time either).
    ``tokens`` counts the pieces of reply that had arrived (0: nothing came at all), which
    ``providers.retry`` reads to stop retrying a server that never answers in time."""

    IDLE = "idle_timeout"
    WHOLE = "request_timeout"

    def __init__(self, message: str, *, tokens: int, whole: bool, hint: str | None = None) -> None:
        super().__init__(
            message,
            transient=not whole,
            reason=self.WHOLE if whole else self.IDLE,
            hint=hint,
        )
        self.tokens = tokens
        self.whole = whole


class QuotaWindowError(ProviderError):
    """The provider refused for a quota or rate window that opens later than a retry in this
    process should wait: the engine stops the run ``suspended`` until ``until`` (seconds since
    the epoch, UTC) instead of sleeping (docs/spec.md 4.18). Decided by the class."""

    REASON = "quota_window"

    def __init__(
        self, message: str, *, until: float, status_code: int | None, hint: str | None = None
    ) -> None:
        super().__init__(
            message, transient=False, status_code=status_code, reason=self.REASON, hint=hint
        )
        self.until = until


class SuspendedError(FlowError):
    """``flow resume`` (without ``--wait``) of a run suspended until a moment still to come:
    nothing is sent and the file is not touched."""

    exit_code = EXIT_SUSPENDED


class ToolServerError(FlowError):
    """An MCP server could not be started, or failed during a call (died, hung, spoke
    nonsense). A call it was running stays recorded as in flight, so resume decides about it."""

    exit_code = EXIT_TOOL_SERVER


class FilesError(FlowError):
    """An error about files it names one by one (a merge's conflicts, a restore's changed
    files): ``files`` is in the ``--json`` form too. Mixed into the error that says why."""

    def __init__(self, message: str, *, files: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.files = list(files)

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` form, with the files."""
        data = super().to_dict()
        data["files"] = list(self.files)
        return data


class GitError(FlowError):
    """A run in its own git worktree (``flow run --worktree``, ``review``, ``merge``,
    ``discard``) met a git problem: not a repository, uncommitted changes, an existing branch,
    a merge conflict, git not installed. Nothing is lost: the worktree and branch stay."""

    exit_code = EXIT_GIT


class TelemetryError(FlowError):
    """Spans could not be sent or written (``flow export otel``, docs/spec.md 13): the
    ``[otel]`` extra is not installed, or the OTLP endpoint refused them or did not answer.
    A run never fails for this: its live spans are dropped with a notice."""

    exit_code = EXIT_TELEMETRY


class ServeError(FlowError):
    """``flow serve`` could not start: its port is taken or not allowed, the address cannot
    be bound, or the ``[serve]`` extra (starlette, uvicorn) is not installed."""

    exit_code = EXIT_SERVE


class UntrustedError(FlowError):
    """The run needs something its workspace brings (an MCP server of the workspace's
    configuration, an agent's server) from a folder the person has not trusted as it is now
    (``flow trust``, docs/spec.md 10.9). Nothing was started or written."""

    exit_code = EXIT_UNTRUSTED
