"""Command tools against real subprocesses: argv, environment, cwd, timeout, output limits."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.base.errors import WorkflowError
from promptflow_resume.tools import declared
from promptflow_resume.tools.declared import CommandTool, command_tool
from promptflow_resume.tools.tool import ToolContext
from promptflow_resume.workflow.records import CommandDecl

PY = sys.executable
# Prints its arguments as one JSON list, so a test sees exactly what argv the program got.
PRINT_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"


def params(**types: str) -> dict[str, Any]:
    """The JSON Schema the workflow loader builds for ``parameters:`` (all required)."""
    return {
        "type": "object",
        "properties": {name: {"type": t} for name, t in types.items()},
        "required": list(types),
        "additionalProperties": False,
    }


def make(ws: Path, argv: list[str], **fields: Any) -> CommandTool:
    return command_tool(CommandDecl(name="cmd", argv=tuple(argv), **fields), ws)


def run(tool: CommandTool, ws: Path, env: dict[str, str] | None = None, **arguments: Any) -> Any:
    return tool.run(arguments, ToolContext(workspace=ws, env=env or {}))


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int) -> bool:
    for _ in range(100):
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(
    "value",
    [
        "two words",
        "  padded  ",
        "$(touch pwned)",
        "`touch pwned`",
        "; touch pwned",
        "a && touch pwned | cat > out",
        "'quoted' \"double\" \\back",
        "*",
        "--flag=value",
        "line one\nline two",
        "",
        "ünïcödé ✓",
    ],
)
def test_a_placeholder_fills_exactly_one_argv_item_and_is_never_interpreted(
    tmp_path: Path, value: str
) -> None:
    tool = make(
        tmp_path,
        [PY, "-c", PRINT_ARGV, "before", "{msg}", "x={msg}!"],
        parameters=params(msg="string"),
    )
    result = run(tool, tmp_path, msg=value)
    assert not result.is_error, result.content
    assert result.exit_code == 0
    stdout = result.content.split("--- stdout ---\n", 1)[1]
    assert json.loads(stdout) == ["before", value, f"x={value}!"]
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "out").exists()


def test_typed_arguments_are_written_as_text(tmp_path: Path) -> None:
    tool = make(
        tmp_path,
        [PY, "-c", PRINT_ARGV, "{n}", "{flag}", "{ratio}"],
        parameters=params(n="integer", flag="boolean", ratio="number"),
    )
    result = run(tool, tmp_path, n=3, flag=True, ratio=0.5)
    assert result.content == 'exit code: 0\n--- stdout ---\n["3", "true", "0.5"]\n'


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "needs the argument `msg`"),
        ({"msg": "a", "extra": 1}, "takes no argument `extra`"),
        ({"msg": 5}, "argument `msg` must be a string"),
    ],
)
def test_bad_arguments_are_error_results(
    tmp_path: Path, arguments: dict[str, Any], expected: str
) -> None:
    marker = tmp_path / "ran"
    tool = make(
        tmp_path,
        [PY, "-c", f"open({str(marker)!r}, 'w')", "{msg}"],
        parameters=params(msg="string"),
    )
    result = tool.run(arguments, ToolContext(workspace=tmp_path))
    assert result.is_error
    assert expected in result.content
    assert "Expected: cmd(msg)." in result.content
    assert not marker.exists()


def test_schema_constraints_beyond_types_are_checked(tmp_path: Path) -> None:
    schema = params(branch="string")
    schema["properties"]["branch"]["pattern"] = "^[a-z0-9/_-]+$"
    tool = make(tmp_path, [PY, "-c", PRINT_ARGV, "{branch}"], parameters=schema)
    assert not run(tool, tmp_path, branch="feature/x").is_error
    result = run(tool, tmp_path, branch="--upload-pack=evil")
    assert result.is_error
    assert "does not match" in result.content


def test_the_environment_holds_only_path_and_declared_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOW_TEST_PROCESS_SECRET", "from-the-process")
    monkeypatch.setenv("FLOW_TEST_FALLBACK", "from-os-environ")
    ctx_env = {
        "PATH": os.environ["PATH"],
        "FLOW_TEST_DECLARED": "from-ctx",
        "FLOW_TEST_UNDECLARED": "must-not-leak",
        "OPENAI_API_KEY": "sk-must-not-leak",
    }
    tool = make(
        tmp_path, ["env"], env=("FLOW_TEST_DECLARED", "FLOW_TEST_FALLBACK", "NOT_SET_ANYWHERE")
    )
    result = run(tool, tmp_path, env=ctx_env)
    lines = result.content.split("--- stdout ---\n", 1)[1].splitlines()
    assert dict(line.split("=", 1) for line in lines) == {
        "PATH": os.environ["PATH"],
        "FLOW_TEST_DECLARED": "from-ctx",
        "FLOW_TEST_FALLBACK": "from-os-environ",
    }


def test_stdin_is_closed(tmp_path: Path) -> None:
    tool = make(tmp_path, [PY, "-c", "import sys; print(repr(sys.stdin.read()))"])
    assert run(tool, tmp_path).content == "exit code: 0\n--- stdout ---\n''\n"


def test_non_zero_exit_is_an_error_result_with_both_streams(tmp_path: Path) -> None:
    code = "import sys; print('out'); print('bad thing', file=sys.stderr); sys.exit(3)"
    result = run(make(tmp_path, [PY, "-c", code]), tmp_path)
    assert result.is_error
    assert result.exit_code == 3
    assert result.data is None
    assert result.content == "exit code: 3\n--- stdout ---\nout\n--- stderr ---\nbad thing\n"


def test_no_output(tmp_path: Path) -> None:
    result = run(make(tmp_path, ["true"]), tmp_path)
    assert (result.is_error, result.content) == (False, "exit code: 0\n(no output)\n")


def test_a_signal_is_named(tmp_path: Path) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    result = run(make(tmp_path, [PY, "-c", code]), tmp_path)
    assert result.is_error
    assert result.content.startswith("exit code: -9 (killed by SIGKILL)")


def test_a_missing_program_is_an_error_result(tmp_path: Path) -> None:
    result = run(make(tmp_path, ["no-such-program-flow-test"]), tmp_path)
    assert result.is_error
    assert "could not start `no-such-program-flow-test`" in result.content
    assert "on PATH" in result.content


def test_timeout_stops_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # The command starts a grandchild that would outlive it, then sleeps past the timeout.
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    tool = make(tmp_path, [PY, "-c", code], timeout=1.0)
    result = run(tool, tmp_path)
    assert result.is_error
    lines = result.content.splitlines()
    assert lines[0] == (
        "timed out after 1 s; the command and every process it started were stopped"
    )
    assert lines[1] == "exit code: -15 (killed by SIGTERM)"
    assert "started" in lines
    assert wait_gone(int(pid_file.read_text()))


def test_leftover_processes_holding_the_output_are_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(declared, "DRAIN_GRACE", 0.3)
    pid_file = tmp_path / "bg.pid"
    tool = make(tmp_path, ["sh", "-c", f"sleep 60 & echo $! > {pid_file}; echo done"])
    result = run(tool, tmp_path)
    assert result.content.splitlines()[:2] == [
        "exit code: 0",
        "(processes it left running kept the output open and were stopped)",
    ]
    assert "done" in result.content
    assert wait_gone(int(pid_file.read_text()))


def test_ctrl_c_while_waiting_stops_the_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "cmd.pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    tool = make(tmp_path, [PY, "-c", code], timeout=30.0)

    def interrupt() -> None:
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    # A shell starts background jobs with SIGINT ignored, and Python keeps it so: install
    # Python's own handler, so this test does not depend on how pytest was started.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run(tool, tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert wait_gone(int(pid_file.read_text()))


def test_large_output_keeps_head_and_tail_and_the_full_bytes_in_data(tmp_path: Path) -> None:
    code = "for i in range(20000): print(f'line {i:05d}')"
    result = run(make(tmp_path, [PY, "-c", code], max_output=2000), tmp_path)
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[:3] == ["exit code: 0", "--- stdout ---", "line 00000"]
    assert lines[-1] == "line 19999"
    notes = [line for line in lines if line.startswith("[... ")]
    assert len(notes) == 1
    assert notes[0].endswith(" of 220000 bytes not shown ...]")
    assert len(result.content) < 2300
    full = "".join(f"line {i:05d}\n" for i in range(20000))
    assert result.data == f"exit code: 0\n--- stdout ---\n{full}".encode()


def test_a_short_stream_keeps_all_of_it_when_the_other_is_long(tmp_path: Path) -> None:
    code = "import sys; print('x' * 5000); print('the error', file=sys.stderr)"
    result = run(make(tmp_path, [PY, "-c", code], max_output=1000), tmp_path)
    assert result.content.endswith("--- stderr ---\nthe error\n")
    assert result.data is not None and result.data.endswith(b"--- stderr ---\nthe error\n")


def test_binary_output_is_not_put_into_the_text(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.buffer.write(bytes(range(256)))"
    result = run(make(tmp_path, [PY, "-c", code]), tmp_path)
    assert "\x00" not in result.content
    assert "[binary output, 256 bytes; not shown as text]" in result.content
    assert result.data == b"exit code: 0\n--- stdout ---\n" + bytes(range(256)) + b"\n"


def test_cwd_is_relative_to_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "sub" / "dir").mkdir(parents=True)
    tool = make(tmp_path, [PY, "-c", "import os; print(os.getcwd())"], cwd="sub/dir")
    stdout = run(tool, tmp_path).content.split("--- stdout ---\n", 1)[1].strip()
    assert Path(stdout) == (tmp_path / "sub" / "dir").resolve()


def test_a_missing_cwd_is_an_error_result(tmp_path: Path) -> None:
    result = run(make(tmp_path, ["true"], cwd="nope"), tmp_path)
    assert result.is_error
    assert "its folder 'nope' does not exist" in result.content


def test_a_cwd_that_links_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "out").symlink_to(tmp_path)
    marker = tmp_path / "ran"
    result = run(make(ws, [PY, "-c", f"open({str(marker)!r}, 'w')"], cwd="out"), ws)
    assert result.is_error
    assert "symbolic link" in result.content
    assert not marker.exists()


@pytest.mark.parametrize("cwd", ["..", "../x", "/tmp", "a/../../b"])
def test_a_cwd_outside_the_workspace_is_a_workflow_error(tmp_path: Path, cwd: str) -> None:
    with pytest.raises(WorkflowError) as info:
        make(tmp_path, ["true"], cwd=cwd)
    assert info.value.field == "$.commands.cmd.cwd"
    assert "not a folder inside the workspace" in str(info.value)


def test_spec_and_idempotency_come_from_the_declaration(tmp_path: Path) -> None:
    decl = CommandDecl(
        name="grep",
        argv=("grep", "-rn", "--", "{pattern}", "."),
        idempotent=True,
        parameters=params(pattern="string"),
    )
    tool = command_tool(decl, tmp_path)
    assert tool.idempotent is True
    assert tool.spec.name == "grep"
    assert tool.spec.description == "Run the command: grep -rn -- '{pattern}' ."
    assert tool.spec.parameters == params(pattern="string")
    assert (
        command_tool(
            CommandDecl(name="x", argv=("true",), description="Do x"), tmp_path
        ).spec.description
        == "Do x"
    )
    assert command_tool(CommandDecl(name="x", argv=("true",)), tmp_path).idempotent is False


def test_list_parameters_are_arrays_for_the_model_and_one_argv_item(tmp_path: Path) -> None:
    tool = make(tmp_path, [PY, "-c", PRINT_ARGV, "{files}"], parameters=params(files="list"))
    assert tool.spec.parameters["properties"]["files"] == {
        "type": "array",
        "items": {"type": "string"},
    }
    result = run(tool, tmp_path, files=["a b.txt", "c.txt"])
    assert result.content == 'exit code: 0\n--- stdout ---\n["a b.txt, c.txt"]\n'


def test_a_command_without_parameters_takes_no_arguments(tmp_path: Path) -> None:
    tool = make(tmp_path, [PY, "-c", PRINT_ARGV, "{not_a_param}"])
    assert tool.spec.parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert run(tool, tmp_path).content == 'exit code: 0\n--- stdout ---\n["{not_a_param}"]\n'
    assert run(tool, tmp_path, x=1).is_error
