"""``flow trust [DIR] [--revoke] [--list] [--json]``: trust a folder to run what it brings.

A repository's hooks files, MCP configurations and agents start programs and may send
credentials; flow uses them only for a folder trusted here, as its files were when trusted
(docs/spec.md 10.9). ``flow trust DIR`` records the hash of each such file in flow's own folder
and lists what they run; a file changed or added since makes the folder untrusted for it again.
``--revoke`` forgets a folder; ``--list`` shows every trusted folder and whether it still
matches. Exit 0, or 5 when DIR does not exist.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app, err, out, print_json


@app.command("trust")
def trust_command(
    folder: Path = typer.Argument(
        Path("."), metavar="DIR", help="The folder (a repository) to trust (default: here)."
    ),
    revoke: bool = typer.Option(
        False, "--revoke", help="Forget the folder's trust: its hooks and servers stop running."
    ),
    listing: bool = typer.Option(
        False, "--list", help="List the folders trusted on this machine, and what changed since."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> int:
    """Trust DIR to run its hooks (.github/hooks/), MCP servers (.vscode/mcp.json, .mcp.json)
    and agents' servers, as its files are now. A file changed or added later (a pull, a
    checkout) is not trusted until you run this again. In CI, pass --trust-workspace to the run
    instead. The trust is kept in flow's own folder, never in the repository."""
    from ..base.errors import EXIT_NOT_FOUND

    if listing:
        return _list(json_output)
    if not folder.is_dir():
        err(f"error: there is no folder {folder}; give the folder to trust.")
        return EXIT_NOT_FOUND
    if revoke:
        return _revoke(folder, json_output)
    return _trust(folder, json_output)


def _trust(folder: Path, json_output: bool) -> int:
    from ..trust import trust_folder, what_runs

    record, brought = trust_folder(folder)
    runs = what_runs(brought)
    if json_output:
        print_json(
            {
                "folder": record.folder,
                "at": record.at,
                "files": [
                    {"path": rel, "kind": brought.kind(rel), "hash": h, "runs": runs[rel]}
                    for rel, h in brought.files.items()
                ],
                "refused": dict(brought.refused),
            }
        )
        return 0
    if not brought.files:
        out(f"trusted {record.folder}: it brings nothing that runs (no hooks, MCP configuration")
        out("or agents); files added later are not trusted until you trust it again.")
    else:
        out(f"trusted {record.folder} as it is now; these run from it:")
        for rel in brought.files:
            out(f"  {rel}  ({brought.kind(rel)})")
            for line in runs[rel]:
                out(f"      {line}")
    for rel, why in brought.refused.items():
        err(f"never run: {rel} is {why}: flow trusts regular files only.")
    return 0


def _revoke(folder: Path, json_output: bool) -> int:
    from ..trust import revoke

    gone = revoke(folder)
    if json_output:
        print_json({"folder": str(folder.resolve()), "revoked": gone is not None})
    elif gone is None:
        out(f"{folder.resolve()} was not trusted; nothing changed.")
    else:
        out(f"{gone.folder} is no longer trusted: its hooks and MCP servers do not run.")
    return 0


def _list(json_output: bool) -> int:
    from ..trust import trusted_folders

    listed = trusted_folders()
    if json_output:
        print_json(
            [
                {
                    "folder": record.folder,
                    "at": record.at,
                    "files": len(record.files),
                    "state": state.to_dict() if state is not None else None,
                }
                for record, state in listed
            ]
        )
        return 0
    if not listed:
        out("no folder is trusted on this machine (`flow trust DIR` trusts one).")
    for record, state in listed:
        now = "the folder is gone" if state is None else state.line()
        out(f"{record.folder}  (trusted {record.at}, {len(record.files)} files): {now}")
    return 0
