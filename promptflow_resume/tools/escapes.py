"""Arguments a ``*`` in a command pattern never stands for (docs/spec.md 1.6).

``--allow-commands 'git *'`` means "git, with whatever arguments"; but a few arguments turn a
harmless program into one that runs any other program or writes any file: ``git -c
alias.x='!cmd' x``, ``git log --output=FILE``, ``find . -exec …``. So a pattern's wildcard
matches such an argument only when the pattern names it literally (``git -c *``), and a
program that exists to run other programs (``env``, ``xargs``, ``sh`` …) is allowed only by
``*`` or the exact command. The table is short on purpose: a pattern is not a sandbox, and
a program can still do anything its configuration tells it to (a repository's hooks, a
Makefile). What is here closes the one-command ways out of a pattern that names a program::

    refused_argument("git -c alias.x=!sh x", "git *")
    # "`-c`: for git it sets any configuration value, … write `-c` in the pattern to allow it"
    refused_argument("git -c user.name=x log", "git -c *")   # None: the pattern names -c
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

#: Programs whose arguments name another program to run: a ``*`` never stands for them.
RUNNERS = frozenset(
    {
        "env", "xargs", "sh", "bash", "dash", "zsh", "ksh", "fish", "busybox", "sudo", "doas",
        "su", "nohup", "nice", "timeout", "setsid", "stdbuf", "watch", "parallel", "exec",
        "eval", "command", "time", "chroot", "unshare", "ssh",
    }
)  # fmt: skip

_RUNS = "it runs the program it names"
_WRITES = "it writes to any file"
_CONFIG = "it sets any configuration value, and an alias or core.pager so set runs any program"
_ELSEWHERE = "it works on another repository, whose configuration can run any program"

#: git's options before the sub-command (a repository's configuration can run programs).
_GIT_GLOBAL: dict[str, str] = {
    "-c": _CONFIG,
    "--config-env": _CONFIG,
    "--exec-path": "it chooses where git finds the programs it runs",
    "-C": _ELSEWHERE,
    "--git-dir": _ELSEWHERE,
    "--work-tree": _ELSEWHERE,
}
#: git's options anywhere after it.
_GIT_ANY: dict[str, str] = {
    "--output": _WRITES,
    "--output-directory": _WRITES,
    "-o": _WRITES,
    "--upload-pack": _RUNS,
    "--receive-pack": _RUNS,
    "--exec": _RUNS,
    "-x": _RUNS,
    "--extcmd": _RUNS,
    "--open-files-in-pager": _RUNS,
    "-O": _RUNS,
}
#: git sub-commands (word sequences right after the global options).
_GIT_SUBCOMMANDS: dict[tuple[str, ...], str] = {
    ("config",): "it writes configuration that can make later git commands run any program",
    ("submodule", "foreach"): "it runs the command it is given",
    ("bisect", "run"): "it runs the command it is given",
    ("filter-branch",): "it runs the commands it is given",
}
#: git global options that take the next word as their value.
_GIT_VALUED = frozenset({"-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env"})

_FIND_ANY: dict[str, str] = {
    "-exec": _RUNS,
    "-execdir": _RUNS,
    "-ok": _RUNS,
    "-okdir": _RUNS,
    "-delete": "it deletes the files it finds",
    "-fprint": _WRITES,
    "-fprint0": _WRITES,
    "-fprintf": _WRITES,
    "-fls": _WRITES,
}


def words_of(text: str) -> list[str]:
    """``text`` split into words as ``sh`` would (plain whitespace when its quotes are open)."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _is_option(word: str, option: str, *, abbreviations: bool) -> bool:
    """True when ``word`` is ``option``: itself, ``--opt=value``, a short option with its value
    joined (``-Ovim``), or (for git) an abbreviated long option (``--outp``)."""
    if word == option:
        return True
    if option.startswith("--"):
        name = word.split("=", 1)[0]
        if name == option:
            return True
        return abbreviations and len(name) > 3 and name.startswith("--") and option.startswith(name)
    if option.startswith("-") and len(option) == 2:
        return word.startswith(option) and not word.startswith("--")
    return word.startswith(option + "=")  # find's -name style options take no joined value


def _named(option: str, pattern_words: Sequence[str]) -> bool:
    """True when the pattern writes ``option`` itself (its value may be a wildcard)."""
    return any(
        w == option or w.startswith(option + "=") or (len(option) == 2 and w.startswith(option))
        for w in pattern_words
    )


def _refusal(word: str, option: str, program: str, why: str) -> str:
    return (
        f"`{word}`: for {program} {why}, so a wildcard never stands for it; write `{option}` in "
        "the pattern to allow it"
    )


def _git(args: list[str], pattern_words: list[str]) -> str | None:
    rest = list(args)
    while rest and rest[0].startswith("-"):
        word = rest.pop(0)
        for option, why in _GIT_GLOBAL.items():
            if _is_option(word, option, abbreviations=True) and not _named(option, pattern_words):
                return _refusal(word, option, "git", why)
        if word in _GIT_VALUED and rest:
            rest.pop(0)
    for sequence, why in _GIT_SUBCOMMANDS.items():
        if tuple(rest[: len(sequence)]) == sequence and not all(
            s in pattern_words for s in sequence
        ):
            return _refusal(" ".join(sequence), " ".join(sequence), "git", why)
    return _options(rest[1:], _GIT_ANY, pattern_words, "git", abbreviations=True)


def _options(
    args: list[str],
    table: dict[str, str],
    pattern_words: list[str],
    program: str,
    *,
    abbreviations: bool,
) -> str | None:
    for word in args:
        if word == "--":
            return None  # what follows is not an option
        # An option written in full is that option, not an abbreviation of a longer one.
        exact = [o for o in table if _is_option(word, o, abbreviations=False)]
        hits = exact or [o for o in table if _is_option(word, o, abbreviations=abbreviations)]
        for option in hits:
            if not _named(option, pattern_words):
                return _refusal(word, option, program, table[option])
    return None


def refused_argument(command: str, pattern: str) -> str | None:
    """Why ``pattern``'s wildcard may not stand for part of ``command`` (a glob match
    already), or None. The answer names the argument and what it would let the program do."""
    words = words_of(command)
    pattern_words = words_of(pattern)
    if not words:
        return None
    program = os.path.basename(words[0])
    if not pattern_words or pattern_words[0] != words[0]:
        return (
            f"the program `{words[0]}`: a pattern names its program as written, and only `*` "
            "alone stands for any program"
        )
    if program in RUNNERS:
        return (
            f"`{' '.join(words[1:])}`: {program} runs the program named in its arguments, so a "
            "wildcard never stands for them; only `*` or the exact command allows it"
        )
    if program == "git":
        return _git(words[1:], pattern_words)
    if program == "find":
        return _options(words[1:], _FIND_ANY, pattern_words, "find", abbreviations=False)
    return None
