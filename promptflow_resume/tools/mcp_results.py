"""What an MCP tool call returns, as flow's ``ToolResult``: text as text, structured content
as JSON, the first binary block (an image, audio, a resource) as a sidecar::

    result = format_result(call_result, info, max_output=65536)
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from .declared import head_and_tail
from .mcp_listing import McpToolInfo
from .mcp_records import DEFAULT_MAX_OUTPUT
from .tool import ToolResult


def format_result(
    result: Any, info: McpToolInfo, *, max_output: int = DEFAULT_MAX_OUTPUT
) -> ToolResult:
    """A ``CallToolResult`` as a ``ToolResult``: text as text, structured content as JSON,
    images, audio and binary resources as one sidecar (the first) with a line saying so.

    Text longer than ``max_output`` bytes (UTF-8) is cut to its head and tail around a note
    saying how much is not shown; the whole text is then the sidecar (``cut``), so a binary
    block of the same result is listed but not kept.
    """
    items: list[str | _Blob] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            items.append(block.text)
        elif kind in ("image", "audio"):
            raw = _b64(block.data)
            items.append(_Blob(f"{kind} {block.mime_type}", raw, block.mime_type))
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            if text is not None:
                items.append(f"[resource {res.uri}]\n{text}")
            else:
                raw = _b64(getattr(res, "blob", "") or "")
                mime = getattr(res, "mime_type", None) or "application/octet-stream"
                items.append(_Blob(f"resource {res.uri}, {mime}", raw, mime))
        elif kind == "resource_link":
            items.append(f"[resource link {block.uri}]")
        else:
            items.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not any(
        getattr(b, "type", "") == "text" for b in result.content or []
    ):
        items.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    is_error = bool(getattr(result, "is_error", False))
    first_blob = next((item for item in items if isinstance(item, _Blob)), None)
    content = _join(items, first_blob)
    encoded = content.encode("utf-8")
    if len(encoded) > max_output:
        whole = _join(items, None).encode("utf-8")
        preview = head_and_tail(whole, max_output)
        return ToolResult(
            content=preview, is_error=is_error, data=whole, media_type="text/plain", cut=True
        )
    if first_blob is None:
        return ToolResult(content=content, is_error=is_error)
    return ToolResult(
        content=content, is_error=is_error, data=first_blob.raw, media_type=first_blob.mime
    )


@dataclass(frozen=True)
class _Blob:
    """A binary block of a result: what it is, its bytes and its media type."""

    label: str
    raw: bytes
    mime: str


def _join(items: list[str | _Blob], kept: _Blob | None) -> str:
    """The result's text, with one line per binary block saying whether ``kept`` is it."""
    parts = []
    for item in items:
        if isinstance(item, _Blob):
            fate = "kept in a sidecar" if item is kept else "not kept"
            parts.append(f"[{item.label}, {len(item.raw)} bytes: {fate}]")
        else:
            parts.append(item)
    return "\n".join(parts) if parts else "(no output)"


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=False)
    except ValueError:
        return text.encode("utf-8", "replace")
