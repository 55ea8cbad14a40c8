"""``flow``: a thin command line over the library, with one error boundary.

Everything printed passes ``printing.for_people`` (secrets redacted, terminal controls made
visible). User errors (``FlowError``) print one paragraph and exit with the error's documented code;
Ctrl-C exits 130; anything else is a bug: a short message and exit 3 (set
``FLOW_RAISE_ERRORS=1`` to see the traceback).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from typing import Any, NoReturn, Protocol

from ..base.registry import Registry

# The typer app lives in ``cli.app`` (``from promptflow_resume.cli.app import app``); it is
# not re-exported here, so that `flow --version` never loads typer.
__all__ = ["COMMANDS", "CliCommand", "main", "register_commands"]


class CliCommand(Protocol):
    """What an entry of ``COMMANDS`` names: a typer command function. The module that defines
    it registers it on ``cli.app.app`` (``@app.command(name)``), so loading the entry is what
    registers the command; it returns the exit code (None for 0)."""

    def __call__(self, *args: Any, **kwargs: Any) -> int | None:
        """Run the command with the options typer parsed."""
        ...


#: ``flow`` command name → its function, in the order `flow --help` lists them. ``main``
#: loads only the one a command line names, so ``flow resume`` does not pay for the imports
#: of ``flow list`` or ``flow share``; another package adds a command the same way.
COMMANDS: Registry[CliCommand] = Registry("command")
COMMANDS.register("run", "promptflow_resume.cli.commands_run:run_command")
COMMANDS.register("resume", "promptflow_resume.cli.commands_run:resume_command")
COMMANDS.register("status", "promptflow_resume.cli.commands_run:status_command")
COMMANDS.register("batch", "promptflow_resume.cli.commands_batch:batch_command")
COMMANDS.register("check", "promptflow_resume.cli.commands_workflow:check")
COMMANDS.register("skills", "promptflow_resume.cli.commands_skills:skills_command")
COMMANDS.register("trust", "promptflow_resume.cli.commands_trust:trust_command")
COMMANDS.register("hooks", "promptflow_resume.cli.commands_hooks:hooks_command")
COMMANDS.register("validate", "promptflow_resume.cli.commands_progress:validate")
COMMANDS.register("show", "promptflow_resume.cli.commands_show:show")
COMMANDS.register("schema", "promptflow_resume.cli.commands_progress:schema")
COMMANDS.register("list", "promptflow_resume.cli.commands_detect:list_command")
COMMANDS.register("detect", "promptflow_resume.cli.commands_detect:detect_command")
COMMANDS.register("share", "promptflow_resume.cli.commands_share:share_command")
COMMANDS.register("fork", "promptflow_resume.cli.commands_share:fork_command")
COMMANDS.register("rewind", "promptflow_resume.cli.commands_share:rewind_command")
COMMANDS.register("log", "promptflow_resume.cli.commands_share:log_command")
COMMANDS.register("diff", "promptflow_resume.cli.commands_diff:diff_command")
COMMANDS.register("ci", "promptflow_resume.cli.commands_diff:ci_command")
COMMANDS.register("clean", "promptflow_resume.cli.commands_share:clean_command")
COMMANDS.register("review", "promptflow_resume.cli.commands_worktree:review_command")
COMMANDS.register("merge", "promptflow_resume.cli.commands_worktree:merge_command")
COMMANDS.register("discard", "promptflow_resume.cli.commands_worktree:discard_command")
COMMANDS.register("compact", "promptflow_resume.cli.commands_compact:compact_command")
COMMANDS.register("agents", "promptflow_resume.cli.commands_agents:agents_command")
COMMANDS.register("approve", "promptflow_resume.cli.commands_approve:approve_command")
COMMANDS.register("deny", "promptflow_resume.cli.commands_approve:deny_command")
COMMANDS.register("answer", "promptflow_resume.cli.commands_approve:answer_command")
COMMANDS.register("serve", "promptflow_resume.cli.commands_serve:serve_command")
COMMANDS.register("export", "promptflow_resume.cli.commands_export:export_command")


def register_commands(args: list[str] | None = None) -> None:
    """Register the command ``args`` names, or every command (for help and unknown names)."""
    name = next((a for a in args or () if not a.startswith("-")), "")
    for wanted in [name] if name in COMMANDS else COMMANDS:
        COMMANDS.load(wanted)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``flow`` console script; returns the process exit code."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        # The one answer that needs nothing else: no typer, no command modules.
        from ..progress import version_text

        sys.stdout.write(version_text() + "\n")
        return 0
    from ..base.collector import until_run

    # The cycle collector waits until a run starts: what a command loads before it (typer,
    # the modules, the file read) lives on, and passes over it find nothing
    # (``collector.until_run``). Everything any command prints, and the boundary's messages,
    # pass one filter: secrets redacted, terminal controls made visible (spec 10.6).
    with until_run():
        from ..base.printing import people_streams

        if argv is None:
            from ..base.hardening import hide_environment

            # flow's own process: the programs it starts get only the variables they are
            # given, and none may read the rest (model keys) out of /proc/<pid>/environ.
            hide_environment()

        with people_streams():
            return _main(args)


def _main(args: list[str]) -> int:
    import typer

    from ..base import notices
    from ..base.errors import EXIT_BUG, EXIT_INTERRUPTED, FlowError
    from .app import app, err, print_json

    register_commands(args)
    want_json = "--json" in args
    # Each command tells a notice once (a newer flow's file, docs/spec.md 2.5), on stderr.
    notices.forget()
    notices.set_sink(lambda text: err(f"notice: {text}"))
    try:
        result = app(args=args, prog_name="flow", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except FlowError as error:
        if os.environ.get("FLOW_RAISE_ERRORS") == "1":
            raise
        if want_json:
            print_json(error.to_dict())
        err(f"error: {error}")
        return error.exit_code
    except typer.Exit as exit_:
        return exit_.exit_code
    except typer.Abort:
        err("aborted.")
        return EXIT_INTERRUPTED
    except typer.TyperException as error:  # usage errors of typer's own (vendored) click
        show = getattr(error, "show", None)
        if callable(show):
            show()
        return int(getattr(error, "exit_code", 2))
    except KeyboardInterrupt:
        err("interrupted.")
        return EXIT_INTERRUPTED
    except Exception as error:  # the boundary: a bug must not print a traceback at users
        if os.environ.get("FLOW_RAISE_ERRORS") == "1":
            raise
        err(
            f"internal error: {type(error).__name__}: {error}. This is a bug in flow; "
            "rerun with FLOW_RAISE_ERRORS=1 to see the traceback and please report it."
        )
        return EXIT_BUG
    finally:
        notices.set_sink(None)


def _console_script() -> None:
    # As a process of its own, SIGTERM and SIGHUP stop any command the way Ctrl-C does
    # (exit 130, "interrupted"), also outside a run, where the engine has its own handlers.
    for name in ("SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.default_int_handler)
    code = main()
    # Everything is saved and said: a signal now must not turn the exit into a death by
    # signal (Python resets handlers to the default during shutdown, but not ignored ones).
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    _exit(code)


def _exit(code: int) -> NoReturn:
    """End the process with ``code`` without taking the interpreter apart.

    Every write is atomic or fsynced by now; what Python's shutdown adds is freeing each
    object one by one, 16-24 ms after `flow status` read a 1,000-turn run (more for longer
    ones). Exit handlers still run and the standard streams are flushed; a process whose
    other threads are still alive exits the usual way, which waits for them.
    """
    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe (`flow status | head -1`): what was said is lost either way.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
