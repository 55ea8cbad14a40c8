"""What flow prints for people carries no terminal control and no secret (spec 10.6), and
``flow show`` renders a bounded part of each entry (spec 2.6).

Text from a progress file or a workflow someone else wrote (a run's reason, its last error,
attempt notes, the workflow's name, step titles, tool names, input values, messages) is
printed by many commands. Each hostile string below is planted in every one of those fields,
each field tagged with its own word; every command is run as a real ``flow`` process, and
its stdout and stderr must hold no byte a terminal would act on (ESC, BEL, other C0 and C1
controls, bidirectional overrides), while each field the command shows is still there to read.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_PROVIDER
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Entry, Run
from promptflow_resume.progress.render import render
from promptflow_resume.show.excerpt import ENTRY_LIMIT
from tests.support.flowproc import FLOW, REPO, flow, flow_env, flow_in_process
from tests.support.providers_server import Canned, ModelServer, error_body
from tests.support.slow import sweep

HOSTILE = {
    "osc-title": "\x1b]0;pwned-title\x07",
    "clear-screen": "\x1b[2J\x1b[Hcleared",
    "osc52-clipboard": "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07",
    "c1-csi": "\x9b31mred\x9c",
    "bidi-override": "\u202etxet-desrever\u202c\u2066isolate\u2069",
    "c0-controls": "\x08\x7f\x0bbell\x07\x0c\x01",
    "carriage-return": "shown\roverwritten",
}

# What a terminal acts on: C0 controls but newline and tab, DEL and C1, bidi formatting.
_RAW = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)

#: Each field's tag: the word that shows where its text landed.
FIELDS = {
    "reason": "REASONTAG",
    "last_error.message": "LASTERRTAG",
    "attempt notes": "NOTETAG",
    "attempt reason": "WHYTAG",
    "workflow.name": "NAMETAG",
    "step titles": "TITLETAG",
    "tool names (run)": "TOOLTAG",
    "tool names (workflow)": "WFTOOLTAG",
    "inputs": "INPUTTAG",
    "messages": "MESSAGETAG",
    "unknown key (notice)": "KEYTAG",
}

PROGRESS = ".flow/runs/r1/progress.md"

#: Each command, and the fields it prints.
COMMANDS: dict[str, tuple[list[str], list[str]]] = {
    "status": (["status", PROGRESS], ["reason", "last_error.message"]),
    "resume --plan": (["resume", "--plan", PROGRESS], ["reason", "last_error.message"]),
    "log": (["log", PROGRESS], ["reason", "attempt notes", "attempt reason"]),
    "list": (["list", "--all"], ["workflow.name", "reason"]),
    "show": (["show", PROGRESS], ["workflow.name", "tool names (run)", "messages"]),
    "check": (
        ["check", "notes.prompt.md"],
        ["workflow.name", "step titles", "tool names (workflow)"],
    ),
    "run (echo)": (
        ["run", "notes.prompt.md", "--provider", "echo", "--new", "--progress", "echo/p.md"],
        ["step titles", "tool names (workflow)", "inputs"],
    ),
    "validate (notice)": (["validate", "bad.md"], ["unknown key (notice)"]),
}


def tagged(field: str, hostile: str) -> str:
    return f"{FIELDS[field]}{hostile}END"


def _yaml(text: str) -> str:
    # A JSON string is a YAML double-quoted scalar: the controls go in as escapes.
    return json.dumps(text)


def plant(where: Path, hostile: str) -> None:
    """A workflow and a progress file with ``hostile`` in every field, and an invalid copy."""
    t = lambda field: tagged(field, hostile)  # noqa: E731
    (where / "notes.prompt.md").write_text(
        f"---\nname: {_yaml(t('workflow.name'))}\ndescription: release notes\n"
        f"tools: [{_yaml(t('tool names (workflow)'))}]\n"
        f"inputs:\n  audience:\n    default: {_yaml(t('inputs'))}\n---\nContext.\n\n"
        f"## Step 1: {t('step titles')}\nInspect.\n\n## Step 2: Report\n"
        "Report for ${input:audience}.\n",
        encoding="utf-8",
        newline="",
    )
    run = example_run()
    sidecar = run.transcript[4]
    sidecar.sidecar = sidecar.sidecar_sha256 = sidecar.sidecar_bytes = None
    run.workflow.path = "../../../notes.prompt.md"
    run.workflow.name = t("workflow.name")
    run.status = "failed"
    run.reason = t("reason")
    assert run.last_error is not None
    run.last_error.message = t("last_error.message")
    run.attempts[0].notes = [t("attempt notes")]
    run.attempts[0].reason = t("attempt reason")
    run.inputs["audience"] = t("inputs")
    run.transcript[2].tool = run.transcript[3].tool = t("tool names (run)")
    run.transcript[5].content = t("messages")
    progress = where / PROGRESS
    progress.parent.mkdir(parents=True)
    text = render(run)
    progress.write_text(text, encoding="utf-8", newline="")
    key = f"\n{_yaml(t('unknown key (notice)'))}: 1\n"
    (where / "bad.md").write_text(text.replace("\nstatus: failed\n", f"\nstatus: failed{key}", 1))


def run_bytes(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``flow ARGS`` (in this process) with its output decoded as it is: text mode would turn a
    raw CR into a line end and hide it."""
    return flow_in_process(*args, cwd=cwd, errors="surrogateescape")


class Outputs:
    """Each (hostile string, command)'s stdout + stderr, run once and kept."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.seen: dict[tuple[str, str], str] = {}

    def __call__(self, hostile: str, command: str) -> str:
        if (hostile, command) not in self.seen:
            where = self.base / hostile
            if not where.exists():
                where.mkdir()
                plant(where, HOSTILE[hostile])
            result = run_bytes(COMMANDS[command][0], where)
            assert result.returncode in (0, 1, 2, 4, 9), result.stderr
            self.seen[hostile, command] = result.stdout + result.stderr
        return self.seen[hostile, command]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    return Outputs(tmp_path_factory.mktemp("hostile"))


def _raw(text: str) -> list[str]:
    return sorted({f"U+{ord(c):04X}" for c in _RAW.findall(text)})


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("hostile", sweep(HOSTILE, keep={"osc-title", "c1-csi", "bidi-override"}))
def test_no_terminal_control_reaches_the_output(
    outputs: Outputs, hostile: str, command: str
) -> None:
    assert _raw(outputs(hostile, command)) == []


@pytest.mark.parametrize(
    ("command", "field"), [(c, f) for c, (_, fields) in COMMANDS.items() for f in fields]
)
@pytest.mark.parametrize("hostile", list(HOSTILE))
def test_the_field_is_still_there_to_read(
    outputs: Outputs, hostile: str, command: str, field: str
) -> None:
    text = outputs(hostile, command)
    assert FIELDS[field] in text, text


def test_controls_are_shown_as_visible_stand_ins(outputs: Outputs) -> None:
    # What a reader sees instead: ESC and BEL as control pictures, C1 and bidi as code points.
    assert "REASONTAG␛]0;pwned-title␇END" in outputs("osc-title", "status")
    assert "NOTETAG<U+009B>31mred<U+009C>END" in outputs("c1-csi", "log")
    assert "<U+202E>txet-desrever<U+202C>" in outputs("bidi-override", "status")
    assert "shown␍overwritten" in outputs("carriage-return", "status")


@pytest.mark.parametrize("hostile", list(HOSTILE))
def test_json_output_stays_exact(outputs: Outputs, hostile: str) -> None:
    where = outputs.base / hostile
    outputs(hostile, "status")  # plants the files
    result = run_bytes(["status", PROGRESS, "--json"], where)
    assert _raw(result.stdout) == []
    status = json.loads(result.stdout)
    assert status["reason"] == tagged("reason", HOSTILE[hostile])


@pytest.mark.parametrize("hostile", ["osc-title", "clear-screen", "c1-csi", "bidi-override"])
def test_the_live_display_on_a_terminal_shows_hostile_text_visibly(
    tmp_path: Path, hostile: str
) -> None:
    # On a terminal rich draws the live line with its own escape sequences (colours, cursor
    # moves), so ESC itself is expected; what the file planted must not be among them.
    plant(tmp_path, HOSTILE[hostile])
    args = ["run", "notes.prompt.md", "--provider", "echo", "--new", "--progress", "p/p.md"]
    code, stdout, stderr = _run_on_pty(args, tmp_path, flow_env())
    assert code == 0, stderr
    for planted in ("\x1b]", "\x1b[2J", "\x1b[H", "\x9b", "\x9c", "\u202e", "\u2066", "\x07"):
        assert planted not in stderr, planted
        assert planted not in stdout, planted
    assert "▶ step 1/2 TITLETAG" in stderr


# --- a provider error that echoes the key --------------------------------------------------

KEYS = {
    # The shape of a project key, and a gateway token no shape matches (only its name does).
    "openai-shaped": "sk-proj-Zq4Lm8Rt2Vx6Bn0Cw5Yh9Kd3Fs7Gj1Pa8Ue4Ti6Oo2",
    "shapeless": "gw.Kp7Qz2Xr9Lm4Vt8Bn3Hc6Jw1Ds5Fy0Ge",
}

WORKFLOW = """\
---
description: Summarise the notes
provider: openai
model: gpt-4o
retry:
  max_attempts: 3
  initial_delay: 0.01
  max_delay: 1
---
Summarise the notes in one line.
"""


def _echoing_server(key: str) -> ModelServer:
    server = ModelServer()
    body = error_body(f"upstream rejected the request; it carried Authorization: {key} ({key})")
    server.push(*[Canned(status=500, body=body) for _ in range(3)])
    return server


def _run_on_pty(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """``flow ARGS`` with stderr on a pseudo-terminal (the live display); stdout piped."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*FLOW, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the process closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    stdout, _ = proc.communicate(timeout=120)
    reader.join(timeout=10)
    os.close(master)
    return proc.returncode, stdout.decode(), b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "notes.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    yield tmp_path


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
@pytest.mark.parametrize("key", list(KEYS))
def test_a_provider_error_echoing_the_key_prints_no_key(
    workdir: Path, key: str, terminal: bool
) -> None:
    secret = KEYS[key]
    env = flow_env(OPENAI_API_KEY=secret)
    for name in ("OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(name, None)
    with _echoing_server(secret) as server:
        args = ["run", "notes.prompt.md", "--base-url", server.url + "/v1"]
        args += ["--new", "--progress", "run/progress.md"]
        if terminal:
            code, stdout, stderr = _run_on_pty(args, workdir, env)
        else:
            result = flow(*args, cwd=workdir, env=env)
            code, stdout, stderr = result.returncode, result.stdout, result.stderr
        # The server did see the key: it was sent where the user pointed it, and only there.
        assert server.requests[0].headers["authorization"] == f"Bearer {secret}"
    assert code == EXIT_PROVIDER, stderr
    # The retries and the cause were printed, redacted ...
    assert "retry 1" in stderr and "retry 2" in stderr
    assert "upstream rejected the request" in stderr
    assert "[REDACTED" in stderr
    # ... and the key is nowhere: not whole, not its tail.
    files = {p.name: p.read_bytes() for p in (workdir / "run").rglob("*") if p.is_file()}
    assert "progress.md" in files
    for needle in (secret, secret[-12:]):
        assert needle not in stdout
        assert needle not in stderr
        for name, data in files.items():
            assert needle.encode() not in data, name


# --- flow show renders a bounded part of each entry ----------------------------------------


def _big_run(size: int) -> Run:
    run = example_run()
    sidecar = run.transcript[4]
    sidecar.sidecar = sidecar.sidecar_sha256 = sidecar.sidecar_bytes = None
    line = "The reviewer read every line of the change and wrote down what it does.\n"
    body = "FIRST-LINE\n" + line * (size // len(line)) + "LAST-LINE\n"
    run.transcript.append(Entry(9, "assistant", body, step="report"))
    run.transcript.append(
        Entry(10, "tool_result", "OUTPUT-START\n" + line * (size // len(line)), step="report")
    )
    run.transcript[-1].tool = "read_file"
    run.transcript[-1].call_id = "call_7Qx"
    return run


def test_show_renders_the_first_part_of_a_large_entry_and_says_what_is_left(
    tmp_path: Path,
) -> None:
    run = _big_run(4 * ENTRY_LIMIT)
    progress = tmp_path / "progress.md"
    progress.write_text(render(run), encoding="utf-8", newline="")
    message = run.transcript[8].content
    left = len(message) - message.rindex("\n", 0, ENTRY_LIMIT) - 1

    shown = flow("show", "progress.md", "--width", "200", cwd=tmp_path, env=flow_env())
    assert shown.returncode == 0, shown.stderr
    assert "FIRST-LINE" in shown.stdout and "LAST-LINE" not in shown.stdout
    assert f"… {left:,} more characters" in shown.stdout
    assert "entry 9 is whole in progress.md" in shown.stdout
    assert "OUTPUT-START" in shown.stdout  # a tool output: its first lines, as before

    page = tmp_path / "page.html"
    made = flow("show", str(progress), "--html", str(page), cwd=tmp_path, env=flow_env())
    assert made.returncode == 0, made.stderr
    html = page.read_text(encoding="utf-8")
    assert "FIRST-LINE" in html and "LAST-LINE" not in html
    assert f"… {left:,} more characters" in html
    assert "entry 9 is whole in progress.md" in html
    # The tool output's page block is cut the same way, and says so.
    assert "entry 10 is whole in progress.md" in html


def test_every_rich_console_is_made_by_the_one_printer() -> None:
    # A console made elsewhere would print around the filter (or have its colours escaped).
    package = REPO / "promptflow_resume"
    makers = [
        str(path.relative_to(REPO))
        for path in package.rglob("*.py")
        if path.name != "printing.py"
        and re.search(r"\bConsole\(", path.read_text(encoding="utf-8"))
    ]
    assert makers == []
