"""MCP servers as tools: start them, list their tools, call them durably.

A workflow names MCP tools as prompt files do: ``server/*`` or ``server`` (every tool of a
server), ``server/tool``, or a bare tool name (the first configured server that has it). The
servers come from ``tools.mcp_config`` (the workspace's ``.vscode/mcp.json`` or
``--mcp-config``), never from a progress file::

    servers = open_servers(workflow, workspace, config_path=None, log_dir=run_folder)
    if servers is not None:
        names = servers.offer()          # starts the servers the workflow names
        tools.update(servers.tools)      # McpTool objects by the name the model sees
    ...
    servers.close()                      # stops every stdio server

The ``mcp`` SDK (extra ``[mcp]``) is imported only here, and only when a server starts. Calls
run on one event loop in a background thread; the engine's thread waits for each result.

The model sees a tool by its own name, or ``server_tool`` when that name is taken (by a
built-in, a declared command or another server's tool); names are cut to the characters
providers accept.

Durability: the engine records a call's start before ``McpTool.run`` sends it. A call that
was in flight when ``flow`` stopped is re-run on resume only when the tool is idempotent:
the server's ``readOnlyHint`` or ``idempotentHint`` annotation, unless the configuration's
``flow.idempotent`` says otherwise for that tool. A server that dies, hangs past its timeout
or breaks the protocol during a call raises ``ToolServerError``: an idempotent call is first
retried on a restarted server (twice, with a short backoff); otherwise the call stays in
flight and the run stops, so resume decides about it and no side effect happens twice.

Lifecycle: a stdio server runs under the supervisor (``tools.mcp_process``), its stdin a pipe
from ``flow``; ``close`` ends it, and when ``flow`` dies, however it dies, the supervisor ends
the server's whole process tree. Ctrl-C during a call says which server it stops and ends its
tree at once; the call stays in flight. Its stderr goes, redacted line by line, to
``mcp-SERVER.stderr.log`` beside the progress file; a server that fails to start has its last
lines in the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from ..base.errors import ToolServerError
from ..base.safeopen import refuse_special
from ..chat import ToolSpec
from ..workflow.toolnames import (
    BUILTIN_TOOLS,
)
from .mcp_listing import McpToolInfo, list_tools, mcp_sdk, task_only_line
from .mcp_process import (
    ServerStderr,
    guarded_command,
    tail_text,
)
from .mcp_records import McpConfig, McpServerConfig
from .mcp_results import format_result
from .tool import ToolContext, ToolResult

#: How often, and after how long, an idempotent call is retried on a restarted server.
RETRY_DELAYS = (0.5, 1.0)
#: Characters providers accept in a tool name, and its longest length.
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64
#: JSON-RPC codes the SDK uses for a broken link (not an answer from the server).
_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001


class _Connection:
    """One running server: its session lives in a task on the shared loop."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.session: Any = None
        self.tools: list[McpToolInfo] = []
        self.stop: asyncio.Event | None = None
        self.done: asyncio.Future[None] | None = None
        #: The task holding the session open (kept referenced so it is not collected).
        self.task: asyncio.Task[None] | None = None
        self.alive = False
        #: The stdio server's stderr (its log, its last lines, its supervisor's pid).
        self.stderr: ServerStderr | None = None


class McpServers:
    """The MCP servers of one run: started on first use, stopped by ``close``."""

    def __init__(
        self,
        config: McpConfig,
        *,
        wanted: Iterable[str] = (),
        reserved: Iterable[str] = (),
        log_dir: Path | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.config = config
        #: Tool names as the workflow wrote them, that no built-in or command resolved.
        self.wanted = list(wanted)
        self.reserved = set(reserved) | set(BUILTIN_TOOLS)
        self.log_dir = log_dir
        self.redact = redact or (lambda text: text)
        self.tools: dict[str, McpTool] = {}
        #: Written name -> the model-facing names it stands for (after ``offer``).
        self.resolved: dict[str, tuple[str, ...]] = {}
        self._conns: dict[str, _Connection] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._offered: tuple[str, ...] | None = None
        #: Told, in one line, which server an interrupted call stops (a reporter's notice).
        self.notice: Callable[[str], None] = lambda text: None
        #: While True (a first start into a folder made for it), errors do not point at the
        #: log file, which is removed with the folder when the start fails.
        self.logs_discarded = False

    # --- which servers and tools ---------------------------------------------------------

    def servers_for(self, name: str) -> list[str]:
        """Servers a written tool name needs started: its own, or every one for a bare name."""
        servers = self.config.servers
        head = name.split("/", 1)[0]
        if name in servers or head in servers:
            return [name if name in servers else head]
        return list(servers)

    def offer(self) -> tuple[str, ...]:
        """Start the servers the workflow names and resolve its names to tools (cached)."""
        if self._offered is not None:
            return self._offered
        needed: list[str] = []
        for name in self.wanted:
            for server in self.servers_for(name):
                if server not in needed:
                    needed.append(server)
        infos: list[McpToolInfo] = []
        for server in needed:
            infos.extend(self._ensure(server).tools)
        self._name_tools(infos)
        offered: list[str] = []
        for name in self.wanted:
            targets = self._match(name)
            self.resolved[name] = targets
            offered.extend(t for t in targets if t not in offered)
        self._offered = tuple(offered)
        return self._offered

    def tools_for(self, names: Iterable[str]) -> tuple[str, ...]:
        """The model-facing tools that written names resolve to (after ``offer``): what a
        step whose own list (a handoff chain's part) names those is offered."""
        offered = self.offer()
        found: list[str] = []
        for name in names:
            found.extend(t for t in self.resolved.get(name, ()) if t not in found)
        return tuple(t for t in offered if t in found)

    def _name_tools(self, infos: list[McpToolInfo]) -> None:
        infos = [info for info in infos if not info.task_required]
        counts: dict[str, int] = {}
        for info in infos:
            counts[_clean(info.name)] = counts.get(_clean(info.name), 0) + 1
        for info in infos:
            plain = _clean(info.name)
            taken = plain in self.reserved or counts[plain] > 1
            model_name = _clean(f"{info.server}_{info.name}") if taken else plain
            if model_name in self.tools:  # still taken: number it
                model_name = _clean(f"{model_name}_{len(self.tools)}")
            override = self.config.servers[info.server].idempotent.get(info.name)
            idempotent = (
                override if override is not None else (info.read_only or info.idempotent_hint)
            )
            self.tools[model_name] = McpTool(self, info, model_name, idempotent)

    def _match(self, written: str) -> tuple[str, ...]:
        servers = self.config.servers
        head, _, tail = written.partition("/")
        if written in servers or (head in servers and tail in ("", "*")):
            server = written if written in servers else head
            return tuple(n for n, t in self.tools.items() if t.info.server == server)
        if head in servers and tail:
            return tuple(
                n for n, t in self.tools.items() if t.info.server == head and t.info.name == tail
            )
        for n, t in self.tools.items():
            if t.info.name == written:
                return (n,)
        return ()

    def task_only(self) -> dict[str, list[str]]:
        """Per started server, the tools it lists that run only as MCP tasks (not offered)."""
        found: dict[str, list[str]] = {}
        for name, conn in self._conns.items():
            tools = [t.name for t in conn.tools if t.task_required]
            if tools:
                found[name] = tools
        return found

    def notices(self) -> list[str]:
        """Lines for the user about the configuration and the servers started: entries
        skipped or defined twice, tools that are not offered because they need MCP tasks."""
        lines = list(self.config.warnings) + self.config.skipped(self.wanted)
        for server, tools in self.task_only().items():
            lines.append(task_only_line(server, tools))
        return lines

    def fingerprints(self) -> dict[str, str]:
        """Per started server, a hash of its tool list (names, schemas, annotations)."""
        out: dict[str, str] = {}
        for name, conn in self._conns.items():
            listed = sorted((t.digest_source() for t in conn.tools), key=lambda d: d["name"])
            blob = json.dumps(listed, sort_keys=True, ensure_ascii=False).encode("utf-8")
            out[name] = "sha256:" + hashlib.sha256(blob).hexdigest()[:16]
        return out

    # --- the loop and the connections ----------------------------------------------------

    def _run(self, coro: Any, timeout: float) -> Any:
        """Run ``coro`` on the loop thread and wait for it, at most ``timeout`` seconds."""
        loop = self._start_loop()
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise
        except BaseException:
            # Interrupted (Ctrl-C) while waiting: do not leave the coroutine running.
            future.cancel()
            raise

    def _start_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="flow-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _ensure(self, server: str) -> _Connection:
        """The live connection to ``server``, starting it if needed."""
        conn = self._conns.get(server)
        if conn is not None and conn.alive:
            return conn
        mcp_sdk()  # a missing extra is said plainly, not as a server that failed to start
        config = self.config.servers[server]
        log = self._log_path(server)
        if log is not None:
            # The log sits in the run's folder, which may have come from elsewhere: a link
            # there (to someone's ~/.bashrc) is refused before the server starts.
            refuse_special(log, what=f"error log of the MCP server `{server}`")
        conn = _Connection(config)
        self._conns[server] = conn
        try:
            self._run(self._open(conn), config.start_timeout + 5)
        except FutureTimeout:
            self._stop(conn)
            raise ToolServerError(
                f"the MCP server `{server}` did not answer within {config.start_timeout:g} s of "
                "starting." + self._tail(conn),
                path=config.source,
                line=config.line,
                field=config.entry,
                hint=self._log_hint(server),
            ) from None
        except ToolServerError:
            raise
        except Exception as exc:
            self._stop(conn)
            raise ToolServerError(
                f"the MCP server `{server}` could not be started: {_describe(exc)}."
                + self._tail(conn),
                path=config.source,
                line=config.line,
                field=config.entry,
                hint=self._log_hint(server),
            ) from None
        return conn

    @staticmethod
    def _tail(conn: _Connection) -> str:
        """The server's last stderr lines, as a sentence for an error message."""
        return tail_text(conn.stderr.tail()) if conn.stderr is not None else ""

    def _log_hint(self, server: str) -> str:
        log = self._log_path(server)
        kept = log is not None and not self.logs_discarded
        where = f" Its error output is in {log}." if kept else ""
        return f"Check the server's command, url and environment in the configuration.{where}"

    def _log_path(self, server: str) -> Path | None:
        if self.log_dir is None:
            return None
        return self.log_dir / f"mcp-{_clean(server)}.stderr.log"

    async def _open(self, conn: _Connection) -> None:
        """Start the holder task and wait until the session is ready (or failed)."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        conn.stop = asyncio.Event()
        conn.done = loop.create_future()
        conn.task = loop.create_task(self._hold(conn, ready))
        await asyncio.wait_for(ready, conn.config.start_timeout)

    async def _hold(self, conn: _Connection, ready: asyncio.Future[None]) -> None:
        """Own the transport and session contexts for the connection's whole life."""
        mcp = mcp_sdk()
        config = conn.config
        errlog: ServerStderr | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                if config.transport == "stdio":
                    from mcp.client.stdio import stdio_client

                    errlog = conn.stderr = ServerStderr(self._log_path(config.name), self.redact)
                    command, args = guarded_command(config)
                    params = mcp.StdioServerParameters(
                        command=command,
                        args=args,
                        env=config.process_env(),
                        cwd=str(config.cwd) if config.cwd else None,
                    )
                    read, write = await stack.enter_async_context(
                        stdio_client(params, errlog=errlog.writer)
                    )
                    errlog.started()
                elif config.transport == "sse":
                    from mcp.client.sse import sse_client

                    # Events may pause for as long as one call may take.
                    read, write = await stack.enter_async_context(
                        sse_client(
                            config.url or "",
                            headers=dict(config.headers),
                            sse_read_timeout=max(300.0, config.timeout + 60),
                        )
                    )
                else:
                    from mcp.client.streamable_http import streamable_http_client
                    from mcp.shared._httpx_utils import create_mcp_http_client

                    client = await stack.enter_async_context(
                        create_mcp_http_client(headers=dict(config.headers))
                    )
                    read, write = await stack.enter_async_context(
                        streamable_http_client(config.url or "", http_client=client)
                    )
                session = await stack.enter_async_context(mcp.ClientSession(read, write))
                await session.initialize()
                conn.tools = await list_tools(session, config.name)
                conn.session = session
                conn.alive = True
                ready.set_result(None)
                assert conn.stop is not None
                await conn.stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            conn.alive = False
            if errlog is not None:
                errlog.close()
            if conn.done is not None and not conn.done.done():
                conn.done.set_result(None)

    def call(self, tool: McpTool, arguments: dict[str, Any], traceparent: str | None = None) -> Any:
        """Send one ``tools/call`` and return the SDK's result; ToolServerError on failure.
        ``traceparent`` goes in the request's ``_meta``, as the MCP convention for trace
        context says (docs/spec.md 13)."""
        server = tool.info.server
        config = self.config.servers[server]
        conn = self._ensure(server)
        timeout = config.timeout

        async def send() -> Any:
            if traceparent is None:
                return await conn.session.call_tool(
                    tool.info.name, arguments, read_timeout_seconds=timeout
                )
            return await conn.session.call_tool(
                tool.info.name,
                arguments,
                read_timeout_seconds=timeout,
                meta={"traceparent": traceparent},  # type: ignore[typeddict-unknown-key]
            )

        try:
            return self._run(send(), timeout + 5)
        except FutureTimeout:
            failure = f"did not answer within {timeout:g} s"
        except Exception as exc:
            if _is_server_answer(exc):
                raise
            timed_out = getattr(exc, "code", None) == _REQUEST_TIMEOUT
            failure = f"did not answer within {timeout:g} s" if timed_out else _describe(exc)
        except BaseException:  # Ctrl-C or SIGTERM: the call stays in flight, resume decides
            self._halt(conn, tool.info.name)
            raise
        # The server is dead, hung or confused: stop it, so the next use starts it afresh.
        self._stop(conn)
        raise ToolServerError(
            f"the MCP server `{server}` failed during a call of `{tool.info.name}`: {failure}.",
            path=config.source,
            line=config.line,
            field=config.entry,
            hint="The call is recorded as in flight; `flow resume` re-runs it if the tool is "
            "idempotent, and otherwise asks you to check its effect first. "
            + self._log_hint(server),
        )

    def _halt(self, conn: _Connection, tool: str) -> None:
        """Say which server an interrupted call stops, and end its process tree now (the
        MCP shutdown would first wait seconds for a busy server to read end of input)."""
        self.notice(f"stopping MCP server {conn.config.name} (call {tool} in flight)…")
        conn.alive = False
        if conn.stderr is not None:
            conn.stderr.stop_now()

    def _stop(self, conn: _Connection) -> None:
        """End one connection (its holder task leaves the contexts, stopping the server)."""
        conn.alive = False
        loop = self._loop
        if loop is None or conn.stop is None:
            return

        async def stop() -> None:
            assert conn.stop is not None
            conn.stop.set()
            if conn.done is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(conn.done), 10)

        with contextlib.suppress(Exception):
            self._run(stop(), 15)

    def close(self) -> None:
        """Stop every server and the loop thread."""
        for conn in list(self._conns.values()):
            self._stop(conn)
        self._conns.clear()
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            if not thread.is_alive():
                loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> McpServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class McpTool:
    """One MCP tool, callable by the model like any other tool."""

    def __init__(
        self, servers: McpServers, info: McpToolInfo, model_name: str, idempotent: bool
    ) -> None:
        self.servers = servers
        self.info = info
        self.idempotent = idempotent
        #: ``readOnlyHint``: no snapshot of the files after its calls (docs/spec.md 12).
        self.read_only = info.read_only
        description = info.description or f"The tool `{info.name}` of the MCP server {info.server}."
        schema = info.input_schema or {"type": "object", "properties": {}}
        self.spec = ToolSpec(name=model_name, description=description, parameters=schema)

    @property
    def server_ref(self) -> dict[str, str]:
        """The server that runs this tool, as a call's start record names it."""
        config = self.servers.config
        source = config.path
        with contextlib.suppress(ValueError):
            source = source.resolve().relative_to(Path.cwd().resolve())
        return {
            "name": self.info.server,
            "config": str(source),
            "id": config.servers[self.info.server].identity,
        }

    def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call the tool once (an idempotent one again on a restarted server if that fails)."""
        delays = RETRY_DELAYS if self.idempotent else ()
        for attempt in range(len(delays) + 1):
            try:
                result = self.servers.call(self, arguments, ctx.traceparent)
            except ToolServerError:
                if attempt >= len(delays):
                    raise
                time.sleep(delays[attempt])
                continue
            except Exception as exc:  # the server answered with a protocol error
                return ToolResult(
                    f"error: the MCP server {self.info.server} refused the call: {_describe(exc)}",
                    is_error=True,
                )
            config = self.servers.config.servers[self.info.server]
            return format_result(result, self.info, max_output=config.max_output)
        raise AssertionError("unreachable")  # pragma: no cover


def _clean(name: str) -> str:
    """``name`` with only the characters providers accept in a tool name."""
    return _NAME_OK.sub("_", name)[:_MAX_NAME] or "tool"


def _is_server_answer(exc: BaseException) -> bool:
    """True for an error the server sent (it got the call and refused it), not a broken link."""
    try:
        from mcp import MCPError
    except ImportError:  # pragma: no cover - the SDK is there once a server ran
        return False
    return isinstance(exc, MCPError) and exc.code not in (_CONNECTION_CLOSED, _REQUEST_TIMEOUT)


def _describe(exc: BaseException) -> str:
    """One line about an exception, from the innermost of an exception group."""
    while getattr(exc, "exceptions", None):  # an exception group (anyio task groups)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, FileNotFoundError) and exc.filename:
        text = f"no program {exc.filename!r} (is it installed and on PATH?)"
    return text.splitlines()[0][:300]
