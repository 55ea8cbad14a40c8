"""``flow resume DIR/batch.md`` uses or refuses every option it is given (docs/spec.md 8.4):
what chooses for one run is refused with a message naming it, everything else reaches every
row in the same ``RunOptions`` record a single run takes."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from promptflow_resume.api import Limits, Permissions, RunOptions
from promptflow_resume.base.errors import EXIT_INPUT
from promptflow_resume.batch import load_batch
from promptflow_resume.batch.rowoptions import row_template
from promptflow_resume.batch.worker import RowTask
from promptflow_resume.front import ONE_RUN_OPTIONS
from promptflow_resume.workflow import load_workflow
from tests.support.batch_server import RowServer, write_case
from tests.support.flowproc import flow_env, flow_in_process

#: What applies to a batch's rows (spec 8.4); ``--plan`` shows the batch's status, ``--yes``
#: and ``--no-snapshots`` hold already (a batch asks nothing; rows never snapshot).
APPLIED = {
    "--agents", "--record", "--workflow", "--provider", "--model", "--base-url", "--max-cost",
    "--price", "--prices", "--max-tokens", "--max-turns", "--timeout", "--idle-timeout",
    "--request-timeout", "--no-stream", "--max-suspensions", "--file", "--selection",
    "--no-instructions", "--skills", "--no-skills", "--hooks", "--no-hooks",
    "--trust-workspace", "--no-snapshots", "--allow-commands", "--allow-fetch",
    "--accept-permissions", "--approve", "--no-approve", "--on-consent", "--yes",
    "--mcp-config", "--mcp-input", "--events", "--otel", "--json", "--plan",
    "--rerun-changed", "--keep-completed",
}  # fmt: skip
#: Refused on a batch since before: they choose for one run's state.
ONE_RUN_CHOICES = {"--decide", "--retry-step", "--skip-step"}


def _env() -> dict[str, str]:
    return flow_env(OPENAI_API_KEY="sk-test-batch")


@pytest.fixture(scope="module")
def failed_batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A batch of two rows, the second failed: resuming it would run that row."""
    folder = tmp_path_factory.mktemp("batch")
    write_case(folder, ["apples", "FAIL pears"])
    with RowServer() as server:
        ran = flow_in_process(
            "batch", "triage.prompt.md", "--data", "rows.jsonl", "--out", "out",
            "--workers", "1", "--base-url", server.url, cwd=folder, env=_env(),
        )  # fmt: skip
    assert ran.returncode == 1, ran.stderr
    return folder


def test_every_option_of_resume_is_applied_to_the_rows_or_refused() -> None:
    import typer.main

    from promptflow_resume.cli import commands_run  # noqa: F401 - registers the command
    from promptflow_resume.cli.app import app

    resume = typer.main.get_command(app).commands["resume"]  # type: ignore[attr-defined]
    names = {p.opts[0] for p in resume.params if p.opts and p.opts[0].startswith("-")}
    assert names - APPLIED - set(ONE_RUN_OPTIONS) - ONE_RUN_CHOICES == set()


@pytest.mark.parametrize(
    "given",
    [
        ["--set", "topic=figs"],
        ["--rerun-unsafe"],
        ["--trust-calls"],
        ["--deny-calls"],
        ["--wait"],
        ["--verbose"],
        ["-v"],
    ],
)
def test_an_option_for_one_run_is_refused_on_a_batch(failed_batch: Path, given: list[str]) -> None:
    batch = failed_batch / "out" / "batch.md"
    before = batch.read_bytes()
    result = flow_in_process("resume", "out/batch.md", *given, cwd=failed_batch, env=_env())
    assert result.returncode == EXIT_INPUT, result.stderr
    name = "--verbose" if given == ["-v"] else given[0]
    assert f"out/batch.md is a batch: {name} {ONE_RUN_OPTIONS[name]}." in result.stderr
    assert "Traceback" not in result.stderr and batch.read_bytes() == before
    assert not (failed_batch / "out" / "rows" / "0002" / "session.recording.jsonl").exists()


def test_a_missing_mcp_config_is_refused_on_a_batch_as_on_a_run(failed_batch: Path) -> None:
    batch = failed_batch / "out" / "batch.md"
    before = batch.read_bytes()
    row = failed_batch / "out" / "rows" / "0002" / "progress.md"
    # The endpoint the batch recorded, confirmed: the file's own would be refused first.
    url = ["--base-url", str(load_batch(batch).base_url)]
    on_batch = flow_in_process(
        "resume", "out/batch.md", "--mcp-config", "nowhere.json", *url, cwd=failed_batch,
        env=_env(),
    )  # fmt: skip
    on_run = flow_in_process(
        "resume", str(row), "--mcp-config", "nowhere.json", *url, cwd=failed_batch, env=_env()
    )
    assert on_run.returncode == 4, on_run.stderr
    assert on_batch.returncode == on_run.returncode, on_batch.stderr
    assert "the MCP configuration nowhere.json does not exist" in on_batch.stderr
    assert batch.read_bytes() == before


def test_a_resumed_row_runs_with_the_options_given(tmp_path: Path) -> None:
    write_case(tmp_path, ["apples", "FAIL pears"])
    with RowServer() as server:
        first = flow_in_process(
            "batch", "triage.prompt.md", "--data", "rows.jsonl", "--out", "out",
            "--workers", "1", "--base-url", server.url, cwd=tmp_path, env=_env(),
        )  # fmt: skip
        assert first.returncode == 1, first.stderr
        server.failing = False
        resumed = flow_in_process(
            "resume", "out/batch.md", "--base-url", server.url + "/v1", "--record",
            cwd=tmp_path, env=_env(),
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert load_batch(tmp_path / "out" / "batch.md").status == "completed"
    # --record reached the row that ran, and only that row.
    assert (tmp_path / "out" / "rows" / "0002" / "session.recording.jsonl").is_file()
    assert not (tmp_path / "out" / "rows" / "0001" / "session.recording.jsonl").exists()


def test_a_row_runs_with_the_record_a_single_run_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_case(tmp_path, ["apples"])
    given = RunOptions(
        provider="openai",
        model="gpt-4o",
        base_url="http://localhost:1/v1",
        record=True,
        stream=False,
        idle_timeout=7.0,
        request_timeout=9.0,
        limits=Limits(max_cost=2.0, max_tokens=10, max_turns=3, timeout=60.0, max_suspensions=1),
        file=str(tmp_path / "a.txt"),
        selection="the selection",
        instructions=False,
        skills=False,
        skill_dirs=(str(tmp_path / "skills"),),
        hooks=False,
        hook_files=(str(tmp_path / "hooks.json"),),
        permissions=Permissions(commands=("git *",), hosts=("example.org",), accept=True),
        mcp_config=str(tmp_path / "mcp.json"),
        mcp_inputs={"token": "t0"},
        agent_dirs=(tmp_path / "agents",),
        approve=("edit",),
        approval=False,
        consent_stop=True,
    )
    from promptflow_resume.batch.checkpoint import Batch

    prices = {"gpt-4o": {"input": 1.0, "output": 2.0}}
    batch = Batch("b", "running", "triage.prompt.md", "", "rows.jsonl", "", "", "", prices=prices)
    template = row_template(
        load_workflow(tmp_path / "triage.prompt.md"), given, batch, events=False, shipped=False
    )
    # The task crosses to the worker process as JSON.
    task = RowTask(**json.loads(json.dumps(asdict(template))))
    row = task.run_options()
    batch_own = {"limits", "snapshots", "workspace", "trust", "shared_budget", "reporter"}
    for each in fields(RunOptions):
        if each.name not in batch_own:
            assert getattr(row, each.name) == getattr(given, each.name), each.name
    # The batch's own: one budget over the rows (a ledger), its prices, no snapshots.
    assert row.limits == Limits(None, 10, 3, 60.0, max_suspensions=1, prices=batch.prices)
    assert row.snapshots is False and row.workspace == str(tmp_path)
