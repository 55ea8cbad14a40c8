"""``flow serve``: the runs in a browser (the ``[serve]`` extra)."""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app, out


@app.command("serve")
def serve_command(
    dirs: list[Path] = typer.Argument(
        None,
        help="Folders whose runs to serve (the default layout .flow/runs and any progress.md "
        "below them); default: this folder.",
        show_default=False,
        metavar="DIR",
    ),
    port: int = typer.Option(8765, "--port", metavar="N", help="Port; 0 lets the system choose."),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        metavar="ADDRESS",
        help="Address to listen on; only this machine by default. Another address lets other "
        "machines connect (they still need the token).",
    ),
) -> int:
    """Serve a dashboard of runs in the browser: the runs list, each run's page updating live,
    and approvals, answers, resume, review/merge/discard and export as buttons. Prints the
    URL with its access token first; Ctrl-C stops it. Exit code 21 when it cannot start (port
    in use, [serve] extra missing), 5 for a missing folder."""
    from ..serve import serve

    def announce(url: str) -> None:
        out(url)
        import sys

        sys.stdout.flush()

    serve(dirs or [], host=host, port=port, announce=announce)
    return 0
