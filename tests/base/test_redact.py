"""Secret redaction: what is replaced, what is left alone, and that it cannot be undone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptflow_resume.base.redact import REDACTED, Redactor, is_secret_name
from tests import support

# Token-shaped test values are assembled at run time so that no complete token literal sits
# in the repository (secret scanners would flag it, and rightly so).
ALNUM = "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0zA1bC2dE3fG4hJ5kL6mN7pQ8"
OPENAI = "sk-" + "proj-" + ALNUM[:48]
ANTHROPIC = "sk-" + "ant-api03-" + ALNUM[:40] + "-" + ALNUM[:20] + "AA"
GITHUB_CLASSIC = "gh" + "p_" + ALNUM[:36]
GITHUB_OAUTH = "gh" + "o_" + ALNUM[:36]
GITHUB_FINE = "github" + "_pat_" + ALNUM[:22] + "_" + ALNUM[:40]
AWS_ID = "AK" + "IA" + "IOSFODNN7EXAMPLE"
SLACK = "xo" + "xb-" + "123456789012-1234567890123-" + ALNUM[:24]
GOOGLE = "AI" + "za" + ALNUM[:35]
HUGGINGFACE = "hf" + "_" + ALNUM[:34].replace("_", "x")
GITLAB = "gl" + "pat-" + ALNUM[:20]
NPM = "np" + "m_" + ALNUM[:36]
STRIPE = "sk" + "_live_" + ALNUM[:24]
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "\n".join(["MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Ysdw" + "Q" * 24] * 4)
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----"
OPENSSH = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "\n-----END OPENSSH PRIVATE KEY-----"

SHAPES = [
    ("openai", f"key is {OPENAI} ok", "key is [REDACTED] ok"),
    ("anthropic", f"x-api-key={ANTHROPIC}", "x-api-key=[REDACTED]"),
    ("github classic", f"token {GITHUB_CLASSIC}.", "token [REDACTED]."),
    ("github oauth", f"({GITHUB_OAUTH})", "([REDACTED])"),
    ("github fine-grained", f"'{GITHUB_FINE}'", "'[REDACTED]'"),
    ("aws key id", f"aws_access_key_id = {AWS_ID}\n", "aws_access_key_id = [REDACTED]\n"),
    ("slack", f"hook {SLACK} end", "hook [REDACTED] end"),
    ("google", f"?key={GOOGLE}&q=1", "?key=[REDACTED]&q=1"),
    ("huggingface", f"login {HUGGINGFACE}", "login [REDACTED]"),
    ("gitlab", f"{GITLAB}", "[REDACTED]"),
    ("npm", f"//registry/:_authToken={NPM}", "//registry/:_authToken=[REDACTED]"),
    ("stripe", f"stripe.api_key = '{STRIPE}'", "stripe.api_key = '[REDACTED]'"),
    ("jwt", f"cookie: session={JWT}; Path=/", "cookie: session=[REDACTED]; Path=/"),
    (
        "bearer header",
        "curl -H 'Authorization: Bearer abc.DEF-123_456~789+xyz/='",
        "curl -H 'Authorization: Bearer [REDACTED]'",
    ),
    ("bearer lower", "bearer 9f8e7d6c5b4a39281706", "bearer [REDACTED]"),
    (
        "basic auth",
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "Authorization: Basic [REDACTED]",
    ),
    ("api key header", "X-Api-Key: 0123456789abcdef", "X-Api-Key: [REDACTED]"),
    ("private token header", '"Private-Token": "zzzzzzzz1234"', '"Private-Token": "[REDACTED]"'),
    (
        "url password",
        "git clone https://alice:hunter2hunter2@git.example.com/r.git",
        "git clone https://alice:[REDACTED]@git.example.com/r.git",
    ),
    ("pem block", f"key:\n{PEM}\ndone", "key:\n[REDACTED]\ndone"),
    ("openssh block", f"{OPENSSH}\n", "[REDACTED]\n"),
    (
        "pem cut short",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIEvQIBADANBg",
        "[REDACTED]",
    ),
    ("pem in json", json.dumps({"k": PEM}), json.dumps({"k": REDACTED})),
    ("dotenv", "DB_PASSWORD=s3cr3t-Passw0rd\n", "DB_PASSWORD=[REDACTED]\n"),
    ("export quoted", "export API_TOKEN='abcd1234efgh'", "export API_TOKEN='[REDACTED]'"),
    ("json field", '{"GITHUB_TOKEN": "abcdefgh12345678"}', '{"GITHUB_TOKEN": "[REDACTED]"}'),
    ("yaml field", "SECRET_KEY: django-insecure-abc123", "SECRET_KEY: [REDACTED]"),
]

UNCHANGED = [
    ("python code", "def get_token(self) -> str:\n    return self._token_cache[key]\n"),
    ("env lookup", 'OPENAI_API_KEY = os.environ["OPENAI_API_KEY"]'),
    ("env reference", "API_KEY: ${{ secrets.API_KEY }}\nTOKEN=$GITHUB_TOKEN"),
    ("call", "SECRET_KEY = load_secret_key(path)"),
    ("numbers", "MAX_TOKENS=4096\nTOKEN_LIMIT: 100000000\n"),
    (
        "flow hash",
        "hash: sha256:v1:" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ),
    ("uuid", "run_id: 550e8400-e29b-41d4-a716-446655440000"),
    ("git sha", "commit 3f786850e387550fdab836ed7e6dc881de23001b"),
    (
        "data url",
        "src='data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk'",
    ),
    ("prose bearer", "The bearer of this letter knows Bearer Authentication well."),
    ("words", "a task-list, the skeleton key, desk-lamp-assembly-instructions-v2 and AKIA."),
    ("sk identifier", "import sk-learn-compatible-wrapper-module"),
    ("plain url", "see https://example.com:8080/path?q=1 and ssh://git@github.com/x.git"),
    ("email", "mail alice@example.com or bob.smith@corp.example.org"),
    ("public key", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n"),
    ("markdown", "## Step 1: Analyze\n\n- **Note:** important.\n| key | value |\n"),
    ("lowercase yaml", "api_key: abcdefgh12345678\npassword: hunter2hunter2"),
    ("redacted already", "API_KEY=[REDACTED:API_KEY] and Bearer [REDACTED]"),
    ("tokenizers", "TOKENIZERS_PARALLELISM=false PRIMARY_COLOR=deepskyblue"),
    ("word constants", 'NO_KEY = "no-key-required"\nPASSWORD_FIELD = "password"\nAPI_KEY=changeme'),
    ("dates", "TOKEN_EXPIRES: 2026-01-02"),
    (
        "url placeholders",
        "scheme://user:password@host, https://u:$TOKEN@h, https://u:<token>@h, ftp://a:***@b",
    ),
    ("header prose", "Use the api-key: header. Monkey: bananas-and-more"),
]


@pytest.mark.parametrize(("case", "text", "expected"), SHAPES, ids=[c[0] for c in SHAPES])
def test_token_shapes_are_redacted(case: str, text: str, expected: str) -> None:
    redacted, count = Redactor().redact(text)
    assert redacted == expected
    assert count >= 1


@pytest.mark.parametrize(("case", "text"), UNCHANGED, ids=[c[0] for c in UNCHANGED])
def test_ordinary_text_is_left_alone(case: str, text: str) -> None:
    env = {"AUTHOR": "Jane Doe Smith", "PWD": "/home/jane/project", "HOME": "/home/jane"}
    assert Redactor.from_environment(env).redact(text) == (text, 0)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("ANTHROPIC_API_KEY", True),
        ("GITHUB_TOKEN", True),
        ("GH_PAT", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("DB_PASSWORD", True),
        ("PGPASSWORD", True),
        ("SMTP_PASS", True),
        ("AUTH_HEADER", True),
        ("AUTHORIZATION", True),
        ("GOOGLE_APPLICATION_CREDENTIALS_JSON", True),
        ("github_token", True),
        ("AUTHOR", False),
        ("GIT_AUTHOR_NAME", False),
        ("PWD", False),
        ("OLDPWD", False),
        ("PATH", False),
        ("HOME", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("KEYBOARD_LAYOUT", False),
        ("SSH_AUTH_SOCK", False),
        ("PASSWORD_STORE_DIR", False),
        ("GOOGLE_APPLICATION_CREDENTIALS_FILE", False),
        ("SECRET_KEY_PATH", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_environment_values_are_labelled_with_their_name() -> None:
    env = {
        "MY_SERVICE_TOKEN": "plain-words-but-secret",
        "DB_PASSWORD": "correct horse battery",
        "PATH": "/usr/bin:/bin",
        "LANGUAGE_KEY": "short",
        "PIN_CODE_SECRET": "12345678",
    }
    redactor = Redactor.from_environment(env)
    text = "token plain-words-but-secret, pw correct horse battery, path /usr/bin:/bin short"
    assert redactor.redact(text) == (
        "token [REDACTED:MY_SERVICE_TOKEN], pw [REDACTED:DB_PASSWORD], path /usr/bin:/bin short",
        2,
    )
    # Too short, or only digits: such values are everywhere in ordinary text.
    assert redactor.redact("PIN 12345678") == ("PIN 12345678", 0)


def test_longer_secret_wins_where_one_contains_another() -> None:
    env = {"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-ijklmnop"}
    assert Redactor.from_environment(env).redact("x abcdefgh-ijklmnop y abcdefgh") == (
        "x [REDACTED:B_TOKEN] y [REDACTED:A_TOKEN]",
        2,
    )


def test_json_escaped_spelling_is_redacted_too() -> None:
    secret = 'pa"ss\\word-123'
    redactor = Redactor.from_environment({"APP_PASSWORD": secret})
    arguments = json.dumps({"cmd": f"login --password {secret}"})
    redacted, count = redactor.redact(arguments)
    assert count == 1
    assert json.loads(redacted) == {"cmd": "login --password [REDACTED:APP_PASSWORD]"}


def test_extra_values_are_redacted_without_a_label() -> None:
    redactor = Redactor.from_environment({}, extra_values=["q9w8e7", "abc"])
    assert redactor.redact("key q9w8e7, not abc") == ("key [REDACTED], not abc", 1)


def test_redact_value_walks_containers_and_keeps_keys() -> None:
    redactor = Redactor.from_environment({"X_API_KEY": "value-of-the-key"})
    value = {
        "X_API_KEY": "value-of-the-key",
        "args": ["a", ("value-of-the-key", 3)],
        "n": 5,
        "none": None,
    }
    assert redactor.redact_value(value) == (
        {
            "X_API_KEY": "[REDACTED:X_API_KEY]",
            "args": ["a", ("[REDACTED:X_API_KEY]", 3)],
            "n": 5,
            "none": None,
        },
        2,
    )


def test_redact_bytes_keeps_bytes_that_are_not_utf8() -> None:
    redactor = Redactor.from_environment({"SOME_TOKEN": "tok-tok-tok-1"})
    data = b"\xff\xfe binary tok-tok-tok-1 \x00\x80"
    assert redactor.redact_bytes(data) == (b"\xff\xfe binary [REDACTED:SOME_TOKEN] \x00\x80", 1)
    assert redactor.redact_bytes(b"\x00\x01 nothing") == (b"\x00\x01 nothing", 0)


SECRETS = {"SERVICE_API_KEY": "Zq7!x#Lm2$wP9", "OTHER_TOKEN": "token with spaces 42"}


@settings(max_examples=150, deadline=None)
@given(
    before=st.text(max_size=60),
    after=st.text(max_size=60),
    which=st.sampled_from(sorted(SECRETS)),
)
def test_an_environment_secret_never_survives(before: str, after: str, which: str) -> None:
    redactor = Redactor.from_environment(SECRETS)
    redacted, count = redactor.redact(before + SECRETS[which] + after)
    assert SECRETS[which] not in redacted
    assert count >= 1


TEXT_PIECES = st.sampled_from(
    [
        OPENAI,
        GITHUB_CLASSIC,
        JWT,
        PEM,
        AWS_ID,
        "Bearer ",
        "Authorization: ",
        "API_KEY=",
        "https://u:",
        "@h",
        "Zq7!x#Lm2$wP9",
        " ",
        "\n",
        "=",
        ":",
        '"',
        "abc123def456",
        "-----",
    ]
)


@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(st.one_of(TEXT_PIECES, st.text(max_size=8)), max_size=12))
def test_redacting_twice_changes_nothing_more(pieces: list[str]) -> None:
    redactor = Redactor.from_environment(SECRETS)
    once, _ = redactor.redact("".join(pieces))
    assert redactor.redact(once) == (once, 0)


ROOT = support.REPO
REAL_FILES = sorted(
    [*(ROOT / "promptflow_resume").rglob("*.py"), *(ROOT / "workflows").glob("*.prompt.md")]
)


@pytest.mark.parametrize("path", REAL_FILES, ids=[str(p.relative_to(ROOT)) for p in REAL_FILES])
def test_real_source_and_prompt_files_have_nothing_redacted(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    redacted, _ = Redactor().redact(text)
    changed = [
        (a, b) for a, b in zip(text.splitlines(), redacted.splitlines(), strict=True) if a != b
    ]
    assert changed == []


def test_with_values_adds_secrets_and_leaves_the_original_alone() -> None:
    base = Redactor({"alpha-secret-value": "ALPHA"})
    more = base.with_values(["beta-secret-value", "ab"])  # too short to be a secret
    text = "alpha-secret-value beta-secret-value ab"
    assert more.redact(text) == ("[REDACTED:ALPHA] [REDACTED] ab", 2)
    assert base.redact(text) == ("[REDACTED:ALPHA] beta-secret-value ab", 1)
