"""The recorder: a provider wrapped so that each exchange is appended to a recording file
(``flow run --record``; the format is ``providers.recording``'s). Each exchange is appended,
flushed and fsynced before the reply is handed back::

    provider = RecordingProvider(create_provider(settings), Path("run.recording.jsonl"))
    reply = provider.complete(request)          # forwarded, then appended to the file
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Callable
from pathlib import Path

from ..base.durable import append_synced
from ..base.errors import ProviderSetupError
from ..base.safeopen import open_regular, read_regular
from .provider import Provider, Reply, Request
from .recording import (
    MAX_RECORDING_BYTES,
    RECORDING_VERSION,
    Redact,
    RequestHasher,
    canonical,
    common_prefix,
    parse_recording,
    parses_as_json,
    reply_to_dict,
    setup_error,
    stable_line,
)


def _created_stamp() -> str:
    """Now in UTC, or ``SOURCE_DATE_EPOCH`` when set, so re-recording can be byte-identical."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = (
        _dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc)
        if epoch.isdigit()
        else _dt.datetime.now(_dt.timezone.utc)
    )
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


class RecordingProvider:
    """Wraps a provider and appends each exchange to a recording file (``flow run --record``).

    An existing recording is continued (a resumed run keeps recording into the same file);
    ``fresh=True`` starts it over. A request already recorded with the same reply is not
    written again, so recording a deterministic run twice leaves the file unchanged. Failed
    calls are not recorded: only replies the run received are.
    """

    def __init__(
        self,
        inner: Provider,
        path: str | Path,
        redact: Redact | None = None,
        *,
        fresh: bool = False,
        created: str | None = None,
    ) -> None:
        self.inner = inner
        #: The wrapped provider's name: recording is invisible to the run.
        self.name = inner.name
        self.path = Path(path)
        self._redact = redact
        self._created = created
        self._hasher = RequestHasher(redact)
        #: Chain hashes of the last request written, the base of the next line's ``prefix``.
        self._written: list[str] = []
        self._known: dict[str, str] = {}
        self._has_header = False
        self._open_existing(fresh)

    def _open_existing(self, fresh: bool) -> None:
        try:
            # The recording of --record lives in the run's folder: never read through a link.
            data = read_regular(self.path, MAX_RECORDING_BYTES, what="recording")
            if data is None:
                return
        except OSError as err:
            raise setup_error(
                f"cannot read the recording: {err.strerror}.", path=self.path
            ) from None
        if not data:
            return
        if b"\n" not in data and data.startswith(b'{"flow_recording"') and not parses_as_json(data):
            self._truncate(0)  # our header, torn by a crash: nothing was recorded yet
            return
        try:
            rec = parse_recording(data, self.path)
        except ProviderSetupError as err:
            # Never overwrite a file that is not a recording (e.g. a mistyped path).
            err.hint = (
                "Choose another path for --record, or move this file away; flow does not "
                "overwrite a file that is not a valid recording."
            )
            raise
        if fresh:
            self._truncate(0)
            return
        if rec.torn_line is not None:
            self._truncate(rec.valid_size)
        if rec.missing_newline:
            self._append(b"\n")
        self._has_header = True
        self._written = rec.last_hashes()
        self._known = {ex.key: ex.reply_canonical for ex in rec.exchanges}

    def _truncate(self, size: int) -> None:
        fd = open_regular(self.path, what="recording", writable=True)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _append(self, data: bytes) -> None:
        append_synced(self.path, data, what="recording")

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Reply:
        """Forward to the wrapped provider, then append the exchange durably."""
        reply = self.inner.complete(request, on_text)
        self.record(request, reply)
        return reply

    def context_window(self, model: str | None = None) -> int | None:
        """What the wrapped provider's server says of the model's window (None: nothing)."""
        ask = getattr(self.inner, "context_window", None)
        window = ask(model) if callable(ask) else None
        return window if isinstance(window, int) else None

    def record(self, request: Request, reply: Reply) -> None:
        """Append one exchange (skipped when this exact exchange is already recorded)."""
        key = self._hasher.advance(request)
        reply_dict = reply_to_dict(reply, self._redact)
        reply_canonical = canonical(reply_dict)
        if self._known.get(key) == reply_canonical:
            return
        hashes = self._hasher.hashes
        prefix = common_prefix(self._written, hashes)
        line_request = {
            **self._hasher.meta,
            "prefix": prefix,
            "messages": self._hasher.messages[prefix:],
        }
        out = []
        if not self._has_header:
            model = request.model or reply.model
            header = {
                "flow_recording": RECORDING_VERSION,
                "provider": self.inner.name,
                "model": model,
                "created": self._created or _created_stamp(),
            }
            # Header keys keep this order so the version is the first thing a reader sees.
            out.append(json.dumps(header, ensure_ascii=False))
        out.append(
            '{"request": '
            + stable_line(line_request)
            + ', "reply": '
            + stable_line(reply_dict)
            + "}"
        )
        self._append(("\n".join(out) + "\n").encode("utf-8"))
        self._has_header = True
        if prefix == len(self._written):
            self._written.extend(hashes[prefix:])
        else:
            self._written = list(hashes)
        self._known[key] = reply_canonical
