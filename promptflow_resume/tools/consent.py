"""Consent for model-chosen commands and fetches.

Reading and editing inside the workspace need no consent; a shell command the model writes
(``run_in_terminal``) and a URL it fetches (``fetch_webpage``) do. The rules:

- allowed by the user's flags (``--allow-commands PATTERN``, ``--allow-fetch HOST``) or the
  workflow's own lists (``allow-commands:``, ``allow-fetch:``) → runs;
- otherwise, on a terminal, the person is asked: yes / no / always (for this command prefix,
  or this host, until the process ends);
- otherwise refused. A refusal is a tool result the model reads; the run goes on.

Nothing here is read from a progress file, so a shared progress file cannot allow anything::

    consent = Consent(commands=("pytest *",), hosts=("docs.python.org",), ask=None)
    consent.command("pytest -q tests")   # Decision(allowed=True, how="--allow-commands")

Patterns are shell-style globs (``*``, ``?``, ``[...]``) matched against the whole command
line; ``*`` alone allows every command. A pattern other than ``*`` matches only a *simple*
command (no ``;``, ``&``, ``|``, ``<``, ``>``, backquote, ``$`` or newline) unless it equals
the command exactly, so ``git *`` does not also allow ``git status; rm -rf ~``; and its
wildcards never stand for an argument that makes the program run others or write any file
(``tools.escapes``). A refusal says which rule refused the command.
"""

from __future__ import annotations

import fnmatch
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Answer = Literal["yes", "no", "always"]
#: Asks a person one question (the text shown) and returns the answer; None: no terminal.
Asker = Callable[[str], Answer]

_SHELL_CONTROL = set(";&|<>`$\n\r")


@dataclass(frozen=True)
class Decision:
    """Whether a command or fetch may go ahead, and what allowed or refused it."""

    allowed: bool
    how: str


def is_simple(command: str) -> bool:
    """True when ``command`` has no shell control characters (one program, its arguments)."""
    return not (set(command) & _SHELL_CONTROL)


def _shell_syntax(command: str) -> str:
    """The first shell syntax in ``command``, as a person would name it."""
    if "$(" in command:
        return "`$(`"
    first = min((command.index(c) for c in _SHELL_CONTROL if c in command), default=0)
    char = command[first]
    return "a newline" if char in "\r\n" else f"`{char}`"


def pattern_verdict(command: str, pattern: str) -> tuple[bool, str | None]:
    """Whether ``pattern`` allows ``command``, and when its glob matched but a rule refused
    the command, why (one clause naming the rule and the part of the command)."""
    command = command.strip()
    pattern = pattern.strip()
    if pattern == "*" or pattern == command:
        return True, None
    if not fnmatch.fnmatchcase(command, pattern):
        return False, None
    if not is_simple(command):
        return False, (
            f"`{pattern}` does not cover it: the command uses shell syntax "
            f"({_shell_syntax(command)}), which no pattern but `*` or the exact command allows"
        )
    from .escapes import refused_argument

    refused = refused_argument(command, pattern)
    if refused is not None:
        return False, f"`{pattern}` does not cover {refused}"
    return True, None


def command_matches(command: str, pattern: str) -> bool:
    """True when ``pattern`` allows ``command`` (see the module docstring)."""
    return pattern_verdict(command, pattern)[0]


def command_prefix(command: str) -> str:
    """What "always" allows: the program, and for tools with sub-commands its first word
    (``git status -s`` → ``git status``)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if not words:
        return command.strip()
    if len(words) > 1 and not words[1].startswith("-"):
        return " ".join(words[:2])
    return words[0]


def host_matches(host: str, pattern: str) -> bool:
    """True when ``pattern`` (a host name, ``*.example.org`` or ``*``) allows ``host``."""
    host = host.lower().rstrip(".")
    pattern = pattern.lower().strip().rstrip(".")
    if pattern == "*" or pattern == host:
        return True
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return False


@dataclass
class Consent:
    """Who allowed what in this process: the flags, the workflow's lists, a terminal."""

    #: From ``--allow-commands``.
    commands: tuple[str, ...] = ()
    #: From the workflow's ``allow-commands:``.
    workflow_commands: tuple[str, ...] = ()
    #: From ``--allow-fetch``.
    hosts: tuple[str, ...] = ()
    #: From the workflow's ``allow-fetch:``.
    workflow_hosts: tuple[str, ...] = ()
    #: Asks on a terminal; None when there is none.
    ask: Asker | None = None
    #: Prefixes and hosts a person answered "always" for, in this process only.
    _always_commands: list[str] = field(default_factory=list)
    _always_hosts: list[str] = field(default_factory=list)

    def command(self, command: str) -> Decision:
        """May the model's shell ``command`` run?"""
        reasons: list[str] = []
        for patterns, how in (
            (self.commands, "--allow-commands"),
            (self.workflow_commands, "the workflow's allow-commands"),
        ):
            for pattern in patterns:
                allowed, why = pattern_verdict(command, pattern)
                if allowed:
                    return Decision(True, how)
                if why is not None:
                    reasons.append(why)
        if is_simple(command) and any(
            command_matches(command, p) or command_matches(command, p + " *")
            for p in self._always_commands
        ):
            return Decision(True, "allowed always on the terminal")
        if self.ask is None:
            if reasons:
                return Decision(False, f"{reasons[0]}; there is no terminal to ask")
            return Decision(False, "no terminal to ask and no --allow-commands pattern allows it")
        prefix = command_prefix(command)
        offer = f"always `{prefix}`" if is_simple(command) else "always (this exact command)"
        answer = self.ask(f"Run the command `{command}`? [y]es / [n]o / [a]{offer[1:]}: ")
        if answer == "always":
            self._always_commands.append(prefix if is_simple(command) else command)
            return Decision(True, "allowed always on the terminal")
        if answer == "yes":
            return Decision(True, "allowed on the terminal")
        return Decision(False, "refused on the terminal")

    def fetch(self, host: str, url: str) -> Decision:
        """May the model fetch ``url`` (on ``host``)?"""
        for patterns, how in (
            (self.hosts, "--allow-fetch"),
            (self.workflow_hosts, "the workflow's allow-fetch"),
            (tuple(self._always_hosts), "allowed always on the terminal"),
        ):
            if any(host_matches(host, p) for p in patterns):
                return Decision(True, how)
        if self.ask is None:
            return Decision(False, "no terminal to ask and no --allow-fetch HOST allows it")
        answer = self.ask(f"Fetch {url}? [y]es / [n]o / [a]lways {host}: ")
        if answer == "always":
            self._always_hosts.append(host)
            return Decision(True, "allowed always on the terminal")
        if answer == "yes":
            return Decision(True, "allowed on the terminal")
        return Decision(False, "refused on the terminal")


def parse_answer(text: str) -> Answer | None:
    """``y``/``yes``, ``n``/``no``, ``a``/``always`` (any case), or None for anything else."""
    word = text.strip().lower()
    if word in ("y", "yes"):
        return "yes"
    if word in ("n", "no", ""):
        return "no"
    if word in ("a", "always"):
        return "always"
    return None


def terminal_asker(
    read: Callable[[], str] = input, write: Callable[[str], object] | None = None
) -> Asker:
    """An ``Asker`` that prints the question on stderr and reads a line from stdin."""

    def show(text: str) -> None:
        if write is not None:
            write(text)
        else:
            sys.stderr.write(text)
            sys.stderr.flush()

    def ask(question: str) -> Answer:
        for _ in range(3):
            show(question)
            try:
                answer = parse_answer(read())
            except EOFError:
                return "no"
            if answer is not None:
                return answer
            show("Please answer y, n or a.\n")
        return "no"

    return ask


def patterns(values: Sequence[str] | None) -> tuple[str, ...]:
    """Non-empty, stripped patterns from a flag or a workflow list."""
    return tuple(v.strip() for v in values or () if isinstance(v, str) and v.strip())
