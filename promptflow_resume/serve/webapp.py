"""The dashboard as a Starlette application: routes, each a few lines over ``runs``,
``pages``, ``actions`` and ``live``; ``security.GuardedApp`` wraps it all.

Routes (``KEY`` is a run's key, ``runs.Served``):

- ``GET /``: the runs list (``?status=&needs=1&q=&sort=``); ``GET /events/list``: its stream;
- ``GET /run/KEY``: a run's page, or a sidecar file beside it (as a download);
- ``GET /events/run/KEY?from=N``: the run's stream; ``GET /export/KEY``: the HTML report;
- ``GET /review/KEY``: a worktree run's changes; ``POST /act/ACTION/KEY``: an action;
- ``GET /static/serve.js``: the script.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote

from ..base.errors import FlowError
from ..base.textnorm import without_surrogates
from ..trust import trust_state
from . import pages
from .actions import ACTIONS, Processes
from .runs import NotServed, Served
from .script import SCRIPT
from .security import DOWNLOAD_POLICY, Guard, GuardedApp
from .sse import event, run_stamp, watch

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ..progress.model import Run
    from ..progress.state import RunState

#: A form larger than this is refused (answers are text; nothing needs more).
MAX_FORM_BYTES = 1024 * 1024
#: How often the list's stream re-reads the listing.
LIST_POLL_SECONDS = 1.0
#: Notes kept for the pages actions redirect to (oldest dropped first).
MAX_NOTES = 200
#: Runs kept read (``RunCache``).
CACHED_RUNS = 8


@dataclass
class Dashboard:
    """What the routes share: the folders, the guard, the resumes started, action notes."""

    served: Served
    guard: Guard
    processes: Processes
    notes: dict[str, tuple[str, bool]] = field(default_factory=dict)
    cache: RunCache = field(default_factory=lambda: RunCache())

    def note(self, text: str, error: bool) -> str:
        """Keep a sentence for the next page; returns its id (for ``?note=``)."""
        ident = secrets.token_urlsafe(8)
        self.notes[ident] = (text, error)
        while len(self.notes) > MAX_NOTES:
            self.notes.pop(next(iter(self.notes)))
        return ident


def _html(text: str, status: int = 200) -> Response:
    from starlette.responses import HTMLResponse

    return HTMLResponse(without_surrogates(text), status_code=status)


def _missing(what: str) -> Response:
    return _html(pages.message_page("Not found", f"{what} is not a run flow serve serves."), 404)


class RunCache:
    """The runs read last, each with the stamp of its files (``live.run_stamp``) when read:
    a page asked again, or a stream with nothing new, reads nothing. A run of 10,000 turns
    takes about half a second to read; showing it again from here takes a few milliseconds."""

    def __init__(self, size: int = CACHED_RUNS) -> None:
        self.size = size
        self.runs: dict[Path, tuple[object, Run, list[int]]] = {}
        self._lock = threading.Lock()

    def load(self, path: Path) -> tuple[Run, RunState]:
        """The run at ``path`` (read again when its files changed) and its state now."""
        run, state, _ = self.read(path)
        return run, state

    def read(self, path: Path) -> tuple[Run, RunState, list[int]]:
        """``load``, and the ids of the entries edited by hand (``LoadReport``)."""
        from ..progress import load_progress
        from ..progress.state import run_state

        stamp = run_stamp(path)
        with self._lock:
            known = self.runs.get(path)
        if known is not None and known[0] == stamp:
            _, run, edited = known
        else:
            run, report = load_progress(path)
            edited = list(report.edited_entries)
            with self._lock:
                self.runs.pop(path, None)
                self.runs[path] = (stamp, run, edited)
                while len(self.runs) > self.size:
                    self.runs.pop(next(iter(self.runs)))
        # The state is worked out each time: an owner can die without touching the files.
        return run, run_state(path, run.status, run.reason), edited


class DashboardRoutes:
    """The dashboard's routes, each a few lines over ``runs``, ``pages``, ``actions`` and
    ``live``, sharing one ``Dashboard``."""

    def __init__(self, board: Dashboard) -> None:
        self.board = board
        self.served = board.served
        self.guard = board.guard

    async def runs_list(self, request: Request) -> Response:
        """``GET /``: the runs list (``?status=&needs=1&q=&sort=``)."""
        q = request.query_params
        rows = await asyncio.to_thread(self.served.rows)
        trust = await asyncio.to_thread(trust_state, self.served.cwd)
        page = pages.list_page(
            rows,
            self.served.roots,
            status=q.get("status", ""),
            needs=q.get("needs") == "1",
            text=q.get("q", ""),
            sort=q.get("sort", "updated"),
            trust=trust.line() if trust.files or trust.refused else None,
        )
        return _html(page)

    async def list_events(self, request: Request) -> Response:
        """``GET /events/list``: the list's stream, its rows and the number waiting."""
        from starlette.responses import StreamingResponse

        q = request.query_params
        last: list[str] = [""]

        def body() -> str:
            rows = self.served.rows()
            kept = pages.select_rows(
                rows,
                status=q.get("status", ""),
                needs=q.get("needs") == "1",
                text=q.get("q", ""),
                sort=q.get("sort", "updated"),
            )
            waiting = sum(1 for r in rows if r.needs is not None)
            return f"{waiting}\n{pages.rows_html(kept)}"

        async def render() -> list[bytes]:
            waiting, _, html = last[0].partition("\n")
            return [event("rows", html), event("waiting", waiting)]

        def stamp() -> str:
            last[0] = body()
            return last[0]

        stream = watch(stamp, render, request.is_disconnected, every=LIST_POLL_SECONDS)
        return StreamingResponse(stream, media_type="text/event-stream")

    async def run_view(self, request: Request) -> Response:
        """``GET /run/KEY``: a run's page, or a sidecar file beside it (as a download)."""
        from starlette.responses import FileResponse

        key = request.path_params["key"]
        try:
            path = self.served.progress_file(key)
        except NotServed:
            try:
                side = self.served.sidecar_file(key)
            except NotServed:
                return _missing(key)
            return FileResponse(
                side,
                media_type="application/octet-stream",
                filename=side.name,
                headers={"content-security-policy": DOWNLOAD_POLICY},
            )
        try:
            run, state, edited = await asyncio.to_thread(self.board.cache.read, path)
        except FlowError as problem:
            return _html(pages.message_page("Cannot read the run", str(problem)), 422)
        note, failed = self.board.notes.get(request.query_params.get("note", ""), (None, False))
        start = request.query_params.get("start", "")
        page = pages.run_page(
            run,
            state,
            key=key,
            path=path,
            csrf=self.guard.csrf,
            process=self.board.processes.of(path),
            note=note,
            error=failed,
            start=int(start) if start.isdigit() else None,
            family=await asyncio.to_thread(self.family_of, path),
            edited=edited,
        )
        return _html(page)

    def family_of(self, path: Path) -> str:
        """The family of the run at ``path`` (its parent and children) as a page part."""
        from ..progress.children import children_of_file

        children = children_of_file(path)
        return pages.family_html(self.served.parent_key(path), children, self.served.key_or_none)

    async def run_events(self, request: Request) -> Response:
        """``GET /events/run/KEY?from=N``: the run's stream, entries from ``N`` on."""
        from starlette.responses import StreamingResponse

        key = request.path_params["key"]
        path = self.served.progress_file(key)
        try:
            sent = [max(0, int(request.query_params.get("from", "0")))]
        except ValueError:
            sent = [0]
        last_entry: list[tuple[int, str] | None] = [None]

        def render_now() -> list[bytes]:
            try:
                run, state, edited = self.board.cache.read(path)
            except FlowError:
                return []  # mid-write or broken: the next change tells more
            from ..show.html import entries_html, run_header

            out = []
            ts = run.transcript
            known = last_entry[0]
            if len(ts) < sent[0] or (
                known is not None
                and (ts[known[0]].content if known[0] < len(ts) else None) != known[1]
            ):
                return [event("reload", "")]
            out.append(event("head", run_header(run, state)))
            if len(ts) > sent[0]:
                out.append(
                    event(
                        "entries",
                        entries_html(
                            run, source=path.name, progress=path, start=sent[0], edited=edited
                        ),
                    )
                )
                sent[0] = len(ts)
            if ts:
                last_entry[0] = (len(ts) - 1, ts[-1].content)
            process = self.board.processes.of(path)
            panel = pages.actions_panel(run, state, key, self.guard.csrf, process, path)
            out.append(event("actions", panel))
            return out

        async def render() -> list[bytes]:
            return await asyncio.to_thread(render_now)

        def stamp() -> object:
            process = self.board.processes.of(path)
            lines = (len(process.lines), process.exit_code) if process is not None else None
            return (run_stamp(path), lines)

        stream = watch(stamp, render, request.is_disconnected)
        return StreamingResponse(stream, media_type="text/event-stream")

    async def run_api(self, request: Request) -> Response:
        """The run's facts as JSON (``runview``): what ``flow show --json`` prints."""
        from starlette.responses import JSONResponse

        key = request.path_params["key"]
        path = self.served.progress_file(key)
        from ..run.runview import run_facts

        try:
            run, state, _edited = await asyncio.to_thread(self.board.cache.read, path)
        except FlowError as error:
            return JSONResponse({"error": str(error)}, status_code=422)
        return JSONResponse({"key": key, **run_facts(run, state).to_dict()})

    async def export(self, request: Request) -> Response:
        """``GET /export/KEY``: the run's HTML report, as a download."""
        from starlette.responses import Response

        key = request.path_params["key"]
        path = self.served.progress_file(key)
        from ..show.html import REPORT_POLICY, html_page

        try:
            run, state, edited = await asyncio.to_thread(self.board.cache.read, path)
        except FlowError as error:
            return _html(pages.message_page("Cannot read the run", str(error)), 422)
        page = html_page(run, source=path.name, state=state, progress=path, edited=edited)
        name = f"{run.run_id}.html".replace('"', "")
        return Response(
            without_surrogates(page).encode("utf-8"),
            media_type="text/html; charset=utf-8",
            headers={
                "content-disposition": f'attachment; filename="{quote(name)}"',
                "content-security-policy": REPORT_POLICY,
            },
        )

    async def review(self, request: Request) -> Response:
        """``GET /review/KEY``: a worktree run's changes."""
        key = request.path_params["key"]
        path = self.served.progress_file(key)
        from ..worktree import review_run

        try:
            result = await asyncio.to_thread(review_run, path)
        except FlowError as error:
            return _html(pages.message_page("Cannot review the run", str(error)), 422)
        tree = result.tree
        facts = (
            f"branch {tree.branch} against base {tree.base[:12]}, {result.commits} commit(s)"
            + (", uncommitted changes included" if result.uncommitted else "")
        )
        return _html(pages.review_page(key, result.run_id, result.stat, result.diff, facts))

    async def compare(self, request: Request) -> Response:
        """``flow diff`` of the run against a git revision (``rev``) or another self.served run
        (``with``, its key): read only, so a GET without a CSRF token."""
        key = request.path_params["key"]
        other = request.query_params.get("with", "").strip()
        rev = request.query_params.get("rev", "").strip()
        path = self.served.progress_file(key)
        against = self.served.progress_file(other) if other else None
        from ..sharing.diff import diff_files, diff_revision

        try:
            if against is not None:
                result = await asyncio.to_thread(diff_files, against, path)
                title = f"{other} → {key}"
            else:
                result = await asyncio.to_thread(diff_revision, path, rev or "HEAD")
                title = f"{key} since {rev or 'HEAD'}"
        except FlowError as error:
            return _html(pages.message_page("Cannot compare", str(error)), 422)
        return _html(pages.compare_page(key, title, result.to_markdown()))

    async def act(self, request: Request) -> Response:
        """``POST /act/ACTION/KEY``: an action on the run (its form carries the CSRF token)."""
        from starlette.responses import RedirectResponse

        key = request.path_params["key"]
        action = ACTIONS.get(request.path_params["action"])
        path = self.served.progress_file(key)
        if action is None:
            return _missing(request.path_params["action"])
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_FORM_BYTES:
                return _html(pages.message_page("Refused", "The form is too large."), 413)
        form = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
        if not self.guard.csrf_ok((form.get("csrf") or [""])[0]):
            return _html(pages.message_page("Refused", "The form's CSRF token is wrong."), 403)
        try:
            text, error = await asyncio.to_thread(action, path, form, self.board.processes), False
        except FlowError as problem:
            text, error = str(problem), True
        ident = self.board.note(text, error)
        return RedirectResponse(f"{pages.run_url(key)}?note={ident}", status_code=303)

    async def script(self, request: Request) -> Response:
        """``GET /static/serve.js``: the script."""
        from starlette.responses import Response

        return Response(SCRIPT, media_type="text/javascript; charset=utf-8")


def make_app(served: Served, guard: Guard) -> GuardedApp:
    """The application, behind its guard."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    board = Dashboard(served, guard, Processes(served.cwd))
    routes = DashboardRoutes(board)
    table = [
        Route("/", routes.runs_list),
        Route("/events/list", routes.list_events),
        Route("/run/{key:path}", routes.run_view),
        Route("/events/run/{key:path}", routes.run_events),
        Route("/api/run/{key:path}", routes.run_api),
        Route("/export/{key:path}", routes.export),
        Route("/review/{key:path}", routes.review),
        Route("/compare/{key:path}", routes.compare),
        Route("/act/{action}/{key:path}", routes.act, methods=["POST"]),
        Route("/static/serve.js", routes.script),
    ]

    async def not_served(request: Request, error: Exception) -> Response:
        # Every handler names its file through ``served``; one that is not a served run's
        # ends here, as one page.
        return _missing(str(error))

    app = Starlette(routes=table, exception_handlers={NotServed: not_served})
    app.state.dashboard = board
    return GuardedApp(app, guard)
