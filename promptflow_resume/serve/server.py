"""Starting the dashboard: bind the address, print the URL (with its token), serve until
Ctrl-C, then interrupt the resumes it started (each checkpoints ``interrupted``)::

    serve([Path("project")], host="127.0.0.1", port=8765, announce=print)

Port 0 lets the system choose a free port; the URL printed names the one chosen.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from pathlib import Path

from ..base.errors import ServeError
from .runs import Served
from .security import Guard

#: The default port (``--port``).
DEFAULT_PORT = 8765
#: The default address: this machine only.
DEFAULT_HOST = "127.0.0.1"


def _require_extra() -> None:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise ServeError(
            f"flow serve needs the [serve] extra ({error.name} is not installed).",
            hint="Install it with: pip install 'promptflow-resume[serve]'.",
        ) from None


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port``; a taken or refused port is a ``ServeError``."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise ServeError(
            f"cannot serve on {host}: {error.strerror}.",
            hint="Give --host an address of this machine, e.g. 127.0.0.1.",
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as error:
        sock.close()
        why = "is in use" if error.errno == 98 else f"cannot be used ({error.strerror})"
        raise ServeError(
            f"port {port} on {host} {why}.",
            hint="Choose another with --port N (--port 0 lets the system choose one).",
        ) from None
    sock.set_inheritable(True)
    return sock


def serve(
    folders: Sequence[Path],
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the runs under ``folders`` (default: the current folder) until interrupted."""
    _require_extra()
    import uvicorn

    from .webapp import make_app

    served = Served.of(list(folders))
    sock = bind(host, port)
    guard = Guard.new(host, sock.getsockname()[1])
    app = make_app(served, guard)
    config = uvicorn.Config(
        app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    announce(guard.url())
    try:
        server.run(sockets=[sock])
    finally:
        app.app.state.dashboard.processes.stop_all()  # type: ignore[attr-defined]
        sock.close()
