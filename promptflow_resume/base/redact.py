"""Secret redaction: the last filter before anything reaches the disk.

Two kinds of secrets are replaced:

- values of environment variables whose *names* look secret (``OPENAI_API_KEY``,
  ``GITHUB_TOKEN``, ``DB_PASSWORD``, ``AUTH_HEADER``, ``*CREDENTIAL*`` …) when the value has at
  least 8 characters and is not only digits: replaced with ``[REDACTED:<NAME>]``;
- well-known token shapes anywhere in the text (OpenAI/Anthropic ``sk-…``, GitHub ``ghp_…``
  and ``github_pat_…``, AWS ``AKIA…``, Slack ``xox?-…``, Google ``AIza…``, Stripe, Hugging
  Face, GitLab and npm tokens, JWTs, private key blocks, ``Bearer <token>``,
  ``Authorization: Basic <token>``, ``X-Api-Key: <key>``, passwords in URLs, and upper-case
  ``SECRET_NAME=value`` assignments): replaced with ``[REDACTED]``, keeping the prefix that
  says what the secret was for (``Bearer ``, ``https://user:``, ``API_KEY=``).

Usage::

    redactor = Redactor.from_environment()
    text, count = redactor.redact("curl -H 'Authorization: Bearer abc123…'")

The same redactor filters everything flow prints (``printing.for_people``).

Speed: this runs on every transcript entry. Environment values are found and replaced with
plain substring search (``str.replace``), longest first so a value is always replaced whole;
that is several times faster than one alternation of all values. Each token shape is its own
compiled pattern that begins with a literal (``sk-``, ``ghp_``, ``eyJ`` …), which lets the
regex engine skip to candidates instead of trying every shape at every position; conditions
that would need a look-behind (the token starts a word, the name before ``=`` looks secret)
are checked on the few candidates found. ``bench/bench_redact.py`` measures it.

Redacting twice changes nothing more: ``redact(redact(x)) == redact(x)``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

#: Shortest environment value that is treated as a secret; shorter ones ("1", "true") are
#: far more likely to be ordinary words than keys.
MIN_SECRET_LENGTH = 8
#: Shortest explicit extra value (``extra_values``) that is redacted.
MIN_EXTRA_LENGTH = 4

REDACTED = "[REDACTED]"

# Names that look like they hold a secret. ``AUTH`` at the start but not ``AUTHOR(S)``; ``PASS``
# only as a whole word (``DB_PASS``), never ``PWD`` (the shell's working directory).
_SECRET_NAME = re.compile(
    r"""
    (?:^|_)(?:KEY|APIKEY|TOKEN|PAT|PASS)$
    | SECRET | PASSWORD | PASSWD | PASSPHRASE | CREDENTIAL | PRIVATE_KEY | API_KEY
    | ^AUTH(?!ORS?(?:_|$))
    """,
    re.VERBOSE,
)
# Names that say where a secret lives or how it is used, not the secret itself.
_NOT_SECRET_NAME = re.compile(
    r"_(?:FILE|PATH|DIR|SOCK|SOCKET|URL|URI|ENDPOINT|HOST|DOMAIN|TYPE|METHOD|MODE|"
    r"ENABLED|ENABLE|DISABLED|PROVIDER|STORE|BACKEND|REGION|USER|USERNAME|ID)$"
)


def is_secret_name(name: str) -> bool:
    """True when an environment variable's name says it holds a secret."""
    upper = name.upper()
    return bool(_SECRET_NAME.search(upper)) and not _NOT_SECRET_NAME.search(upper)


# Characters of a token body (base64url and friends). A shape must not start right after one
# of them, so that ``desk-…`` or ``xghp_…`` are not taken for ``sk-…`` or ``ghp_…``.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_T = r"A-Za-z0-9_\-"
_HTTP_TOKEN = r"A-Za-z0-9._~+/\-"


# How a shape's match becomes its replacement. ``word``: the whole match, when it starts a
# word. ``keep``: the text before group ``keep`` stays. ``header``/``assign``: the name before
# the match decides whether it is a secret.
_Mode = Literal["all", "word", "keep", "bearer", "header", "assign"]
_SHAPES: tuple[tuple[str, _Mode, str], ...] = (
    # Private key blocks (PEM, OpenSSH, PGP). A block cut short (no END line, as in the head of
    # a long output) is redacted to the end of the base64 lines after the BEGIN line.
    (
        "private key",
        "all",
        r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]{0,65536}?-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:(?:\r?\n|\\n)[A-Za-z0-9+/=:, \-]{1,100})*)",
    ),
    # OpenAI and Anthropic (``sk-``, ``sk-proj-``, ``sk-ant-api03-``): a real key always mixes
    # in digits; a name like ``sk-learn-compatible-wrapper`` does not.
    ("openai/anthropic", "word", rf"sk-(?=[{_T}]*[0-9])[{_T}]{{20,}}"),
    # Stripe secret and restricted keys (two patterns: each starts with a literal).
    ("stripe", "word", r"sk_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("stripe restricted", "word", r"rk_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("github", "word", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"),
    # AWS access key ids (the secret key has no shape: it is caught by name or assignment).
    ("aws", "word", r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("slack", "word", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    ("google", "word", rf"AIza[{_T}]{{35}}"),
    ("huggingface", "word", r"hf_[A-Za-z0-9]{30,}"),
    ("gitlab", "word", rf"glpat-[{_T}]{{20,}}"),
    ("npm", "word", r"npm_[A-Za-z0-9]{36}"),
    # JSON Web Tokens: base64url ``{"`` header and payload, then the signature.
    ("jwt", "word", rf"eyJ[{_T}]{{8,}}\.eyJ[{_T}]{{8,}}\.[{_T}]*"),
    # ``Bearer <token>``: the token must contain a digit, so prose ("Bearer Authentication")
    # is left alone. Matched from ``earer`` so the scan can skip ahead; B/b is checked after.
    (
        "bearer",
        "bearer",
        rf"(?P<keep>earer\s+)(?=[{_HTTP_TOKEN}=]*[0-9])[{_HTTP_TOKEN}]{{12,}}=*",
    ),
    (
        "authorization",
        "keep",
        r"(?P<keep>uthorization[\"']?\s*[:=]\s*[\"']?(?:Basic|Token|token|Bearer|bearer)\s+)"
        rf"[{_HTTP_TOKEN}]{{8,}}=*",
    ),
    # ``X-Api-Key: …``, ``api-key: …``, ``X-Auth-Token: …``, ``Private-Token: …``; matched from
    # the ``-key``/``-token`` part, the word before it is checked after.
    (
        "api key header",
        "header",
        r"(?P<keep>-(?:[Kk]ey|KEY|[Tt]oken|TOKEN)[\"']?[ \t]*:[ \t]*[\"']?)"
        rf"[{_HTTP_TOKEN}=]{{8,}}",
    ),
    # ``scheme://user:password@host``: the password is replaced, the rest kept.
    (
        "url password",
        "keep",
        r"(?P<keep>://[^\s/:@'\"]{1,256}:)"
        # Not a placeholder: ``user:password@``, ``user:$PASS@``, ``user:<token>@``, ``***``.
        r"(?!(?:[Pp]ass(?:word|wd)?|PASS(?:WORD|WD)?|secret|token|pwd)@)(?![$<{%*\[])"
        r"[^\s/@'\"]{1,256}(?=@)",
    ),
    # ``API_KEY=value``, ``export DB_PASSWORD='value'``, ``"GITHUB_TOKEN": "value"``: an
    # upper-case secret-looking name (checked after) assigned a literal token-like value. Code
    # that assigns a call, an expression or a ``$VAR`` is left alone (the value must end at a
    # delimiter), and so are values without both letters and digits.
    (
        "assignment",
        "assign",
        r"(?P<keep>[=:]"
        # The name must end right before: cheap fixed-width look-behinds reject ``key: v``
        # and ``x = y`` without a call into Python for each candidate.
        r"(?:(?<=[A-Z0-9_].)|(?<=[A-Z0-9_][\"' ].)|(?<=[A-Z0-9_][\"'] .))"
        r"[ \t]?[\"']?)"
        # Letters and digits both: ``"no-key-required"`` or ``"password"`` are words.
        r"(?=[^\s'\",;]*[0-9])(?=[^\s'\",;]*[A-Za-z])"
        r"[A-Za-z0-9_\-+/=.~!%^*]{8,}(?=[\s'\",;]|$)",
    ),
)

# The upper-case name right before an assignment's ``=``/``:`` (optionally quoted, one space).
_NAME_BEFORE = re.compile(r"(?<![A-Za-z0-9_])([A-Z][A-Z0-9_]{1,80})[\"']?[ \t]?\Z")
# The word right before an API key header's ``-key``/``-token``.
_HEADER_WORD = re.compile(r"(?i:(?:api|auth|private))\Z")


@functools.cache
def _compiled() -> tuple[tuple[_Mode, re.Pattern[str]], ...]:
    # Compiled on first use (about 2 ms): a command that prints nothing but its own words
    # never needs them.
    return tuple((mode, re.compile(rx)) for _, mode, rx in _SHAPES)


#: Names of the token shapes recognized, for documentation and ``flow`` output.
SHAPE_NAMES: tuple[str, ...] = tuple(name for name, _, _ in _SHAPES)


class Redactor:
    """Replaces secrets in text; build one per run and reuse it for every entry."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        """``values`` maps a secret value to its label (a variable name, or "" for none)."""
        self._labels: dict[str, str] = {}
        for value, label in (values or {}).items():
            if not value:
                continue
            self._labels.setdefault(value, label)
            # Tool arguments are stored as JSON text: catch the escaped spelling too.
            escaped = json.dumps(value, ensure_ascii=False)[1:-1]
            self._labels.setdefault(escaped, label)
        # Longest first: where one secret contains another, the longer one is replaced whole.
        self._literals: tuple[str, ...] = tuple(sorted(self._labels, key=len, reverse=True))

    @classmethod
    def from_environment(
        cls, env: Mapping[str, str] = os.environ, *, extra_values: Iterable[str] = ()
    ) -> Redactor:
        """A redactor for the secret-looking variables in ``env`` plus ``extra_values``."""
        values: dict[str, str] = {}
        for name in sorted(env):
            value = env[name]
            if not is_secret_name(name) or not _plausible_secret(value):
                continue
            values.setdefault(value, name)
            stripped = value.strip()
            if stripped != value:
                values.setdefault(stripped, name)
        for value in extra_values:
            if len(value) >= MIN_EXTRA_LENGTH:
                values.setdefault(value, "")
        return cls(values)

    def with_values(self, extra_values: Iterable[str]) -> Redactor:
        """A redactor for this one's secrets plus ``extra_values`` (e.g. a child run's MCP
        configuration secrets); ``self`` is not changed."""
        values = dict(self._labels)
        for value in extra_values:
            if len(value) >= MIN_EXTRA_LENGTH:
                values.setdefault(value, "")
        return Redactor(values)

    @property
    def secret_count(self) -> int:
        """How many secret spellings (values and their JSON-escaped forms) are known."""
        return len(self._literals)

    def redact(self, text: str) -> tuple[str, int]:
        """``text`` with every secret replaced, and the number of replacements made."""
        count = 0
        # A substring search per value is far faster than one alternation of all values
        # over the text, and most texts contain none. Longest first, so a secret that
        # contains another is replaced whole.
        for value in self._literals:
            if value in text:
                label = self._labels[value]
                count += text.count(value)
                text = text.replace(value, f"[REDACTED:{label}]" if label else REDACTED)
        for mode, pattern in _compiled():
            text, n = _sub_shape(pattern, mode, text)
            count += n
        return text, count

    def redact_value(self, value: Any) -> tuple[Any, int]:
        """``value`` with secrets replaced in every string inside dicts, lists and tuples.

        Dict keys are left as they are (they are argument names, and renaming them could
        merge two keys); anything that is not a string or a container is returned unchanged.
        """
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            total = 0
            out: dict[Any, Any] = {}
            for key, item in value.items():
                out[key], n = self.redact_value(item)
                total += n
            return out, total
        if isinstance(value, (list, tuple)):
            total = 0
            items: list[Any] = []
            for item in value:
                red, n = self.redact_value(item)
                items.append(red)
                total += n
            return (tuple(items) if isinstance(value, tuple) else items), total
        return value, 0

    def redact_bytes(self, data: bytes) -> tuple[bytes, int]:
        """Redact raw bytes (a sidecar's content); bytes that are not UTF-8 pass through."""
        text = data.decode("utf-8", errors="surrogateescape")
        red, n = self.redact(text)
        if n == 0:
            return data, 0
        return red.encode("utf-8", errors="surrogateescape"), n


def _sub_shape(pattern: re.Pattern[str], mode: _Mode, text: str) -> tuple[str, int]:
    """Replace one shape's matches in ``text``; candidates that fail the after-check stay."""
    count = 0

    def replace(m: re.Match[str]) -> str:
        nonlocal count
        start = m.start()
        source = m.string
        keep = ""
        if mode == "word":
            if start > 0 and source[start - 1] in _TOKEN_CHARS:
                return m.group()
        elif mode == "bearer":
            if start == 0 or source[start - 1] not in "Bb":
                return m.group()
            keep = m.group("keep")
        elif mode == "header":
            if not _HEADER_WORD.search(source, max(0, start - 7), start):
                return m.group()
            keep = m.group("keep")
        elif mode == "assign":
            name = _NAME_BEFORE.search(source, max(0, start - 84), start)
            if name is None or not is_secret_name(name.group(1)):
                return m.group()
            keep = m.group("keep")
        elif mode == "keep":
            keep = m.group("keep")
        count += 1
        return keep + REDACTED

    return pattern.sub(replace, text), count


def _plausible_secret(value: str) -> bool:
    """Long enough, and not a bare number, to be replaced wherever it appears."""
    stripped = value.strip()
    return len(stripped) >= MIN_SECRET_LENGTH and not stripped.isdigit()
