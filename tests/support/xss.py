"""Script-injection payloads planted in every field of a progress file a page shows, for the
tests of ``flow show --html`` and ``flow serve``: a page that runs any of them sets
``window.__flow_xss`` or opens a dialog, which the browser tests watch for.

The payloads are the classic forms (tags, attributes breaking out of quotes, ``javascript:``
links, SVG, a closing ``</script>``, Markdown links and images, an HTML comment), written here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from promptflow_resume.progress import render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Approval, ErrorInfo, Run

#: What a payload does when it runs: sets this flag (and opens a dialog).
FLAG = "__flow_xss"
_JS = f"window.{FLAG}=1;alert(1)"
PAYLOADS = (
    f"<script>{_JS}</script>",
    f'<img src=x onerror="{_JS}">',
    f"\"><svg onload='{_JS}'>",
    f'\'><iframe src="javascript:{_JS}"></iframe>',
    f"</script><script>{_JS}</script>",
    f"[click](javascript:{_JS})",
    f"![x](javascript:{_JS})",
    f'<a href="javascript:{_JS}">link</a>',
    f'<details open ontoggle="{_JS}">',
    f"--><script>{_JS}</script><!--",
    f"<style>@import 'http://example.com/{FLAG}.css';</style>",
)
ALL = " ".join(PAYLOADS)


def plain_run() -> Run:
    """The example run without its sidecar (a file of its own a test would have to plant)."""
    run = example_run()
    for entry in run.transcript:
        entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    return run


def hostile_run(*, waiting: bool = False) -> Run:
    """The example run with the payloads in its name, reason, error, every entry and, with
    ``waiting``, a held tool call (status ``awaiting_approval``)."""
    run = plain_run()
    run.workflow = replace(run.workflow, name="release " + ALL)
    run.reason = "stopped " + ALL
    run.last_error = ErrorInfo(type="Boom" + PAYLOADS[0], message=ALL, at=run.updated)
    for entry in run.transcript:
        entry.content = entry.content + "\n\n" + "\n\n".join(PAYLOADS)
    if waiting:
        call = next(e for e in run.transcript if e.role == "tool_call")
        run.status, run.reason = "awaiting_approval", "a call waits " + ALL
        run.approvals = [
            Approval(
                call_id=call.call_id or "call_1",
                tool=call.tool or "tool",
                step=call.step or "inspect",
                entry=call.id,
                preview=ALL,
                why="approve: " + PAYLOADS[1],
            )
        ]
    return run


def plant(folder: Path) -> list[Path]:
    """Two hostile runs under ``folder/.flow/runs``; returns their progress files."""
    paths = []
    for name, waiting in (("xss-a", False), ("xss-b", True)):
        path = folder / ".flow" / "runs" / name / "progress.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(hostile_run(waiting=waiting)), encoding="utf-8")
        paths.append(path)
    return paths
