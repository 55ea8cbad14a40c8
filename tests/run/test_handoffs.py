"""Handoff chains (docs/spec.md 4.13): ``flow run AGENT --handoff LABEL`` / ``--handoffs auto``
runs the agent and the agents its handoffs name as the parts of one run.

Real agent files in a temp folder; the model is the local OpenAI-protocol server (which
records every request: its system prompt, model and tools) or the scripted provider. The
crash test kills a real ``flow`` process with SIGKILL inside each of the three parts in turn
and resumes it: the transcript equals an uninterrupted run's, and no part is done twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.api import Choices, ResumeRequest, RunOptions, resume_run, run_status
from promptflow_resume.base.errors import (
    FileNotFoundFlowError,
    InputError,
    WorkflowChangedError,
    WorkflowError,
)
from promptflow_resume.chat import Message
from promptflow_resume.front import RunCommand, handoffs_to_follow, run_workflow
from promptflow_resume.progress import load_progress
from promptflow_resume.progress.frontmatter import from_front_matter, to_front_matter
from promptflow_resume.run.handoffs import Follow, latest_system
from tests.support.flowproc import flow, provider_env, transcript
from tests.support.providers_server import (
    Canned,
    ModelServer,
    openai_completion,
    openai_tool_call,
    openai_usage,
)

PLANNER = """\
---
name: planner
description: Plans a change
model: gpt-4o
tools: [look]
commands:
  look:
    description: Look at the project
    argv: ["echo", "looked"]
    idempotent: true
handoffs:
  - label: Start coding
    agent: coder
    prompt: "Implement this plan: ${step:task}"
    send: true
---
You are the planner. Write a short plan.
"""

CODER = """\
---
name: coder
model: gpt-4o-mini
tools: [build]
commands:
  build:
    description: Build the project
    argv: ["echo", "built"]
    idempotent: true
handoffs:
  - label: Review
    agent: reviewer
    prompt: Review the change above.
    send: true
    model: gpt-4.1-nano
---
You are the coder. Implement the plan you are given.
"""

REVIEWER = """\
---
name: reviewer
model: gpt-4.1
tools: [check]
commands:
  check:
    description: Check the change
    argv: ["echo", "checked"]
    idempotent: true
handoffs:
  - label: Fix
    agent: coder
    prompt: Fix what the review found.
    send: true
---
You are the reviewer. Be strict.
"""

#: Per part: (step id, agent's instructions, model of its requests, its one tool).
PARTS = (
    ("task", "You are the planner.", "gpt-4o", "look"),
    ("handoff-1-start-coding", "You are the coder.", "gpt-4o-mini", "build"),
    ("handoff-2-review", "You are the reviewer.", "gpt-4.1-nano", "check"),
)
LABELS = ("--handoff", "start coding", "--handoff", "Review")


def _project(where: Path) -> Path:
    agents = where / "agents"
    agents.mkdir(parents=True)
    for name, text in (("planner", PLANNER), ("coder", CODER), ("reviewer", REVIEWER)):
        (agents / f"{name}.agent.md").write_text(text, encoding="utf-8")
    return where


def _replies(server: ModelServer) -> None:
    """Two calls per part: a tool call, then the part's answer."""
    for n, (_step, _system, _model, tool) in enumerate(PARTS):
        call = openai_tool_call(f"call-{tool}", tool, "{}")
        server.push(
            Canned(body=openai_completion(f"Using {tool}.", [call], usage=openai_usage(100, 5))),
            Canned(body=openai_completion(f"Answer {n + 1}.", usage=openai_usage(120, 6))),
        )


def _run_args(server: ModelServer) -> tuple[str, ...]:
    return (
        "run",
        "agents/planner.agent.md",
        "--task",
        "add a button",
        *LABELS,
        "--agents",
        "agents",
        "--provider",
        "openai",
        "--base-url",
        server.url + "/v1",
        "--progress",
        "run/progress.md",
        "--new",
    )


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def _check_requests(server: ModelServer) -> None:
    """Each part's two requests: one system prompt (its agent's), its model, its tool."""
    assert len(server.requests) == 2 * len(PARTS)
    for n, (_step, system, model, tool) in enumerate(PARTS):
        for request in server.requests[2 * n : 2 * n + 2]:
            body = request.body
            roles = [m["role"] for m in body["messages"]]
            assert roles.count("system") == 1 and roles[0] == "system", roles
            assert body["messages"][0]["content"].startswith(system)
            assert body["model"] == model
            assert [t["function"]["name"] for t in body["tools"]] == [tool]
    # The previous agent's answer is in the conversation the next part's model reads, and
    # ${step:task} put the plan into the handoff's prompt.
    second = server.requests[2].body["messages"]
    assert {"role": "assistant", "content": "Answer 1."}.items() <= second[-2].items()
    assert second[-1] == {"role": "user", "content": "Implement this plan: Answer 1."}


def _roles(path: Path) -> dict[str | None, list[str]]:
    run, _ = load_progress(path)
    roles: dict[str | None, list[str]] = {}
    for entry in run.transcript:
        if entry.role != "note":
            roles.setdefault(entry.step, []).append(entry.role)
    return roles


def test_a_chain_of_three_agents_runs_as_three_parts(tmp_path: Path, server: ModelServer) -> None:
    where = _project(tmp_path / "p")
    _replies(server)
    result = flow(*_run_args(server), cwd=where, env=provider_env())
    assert result.returncode == 0, result.stderr
    _check_requests(server)
    progress = where / "run" / "progress.md"
    roles = _roles(progress)
    assert roles[None] == ["system"]
    assert roles["task"] == ["user", "assistant", "tool_call", "tool_result", "assistant"]
    for step, *_ in PARTS[1:]:
        assert roles[step] == [
            "system",
            "user",
            "assistant",
            "tool_call",
            "tool_result",
            "assistant",
        ]
    run, _ = load_progress(progress)
    chain = run.workflow.handoffs
    assert chain is not None and chain.follow == "labels"
    assert [(p.label, p.agent, p.path) for p in chain.parts] == [
        ("Start coding", "coder", "../agents/coder.agent.md"),
        ("Review", "reviewer", "../agents/reviewer.agent.md"),
    ]
    status = flow("status", "run/progress.md", cwd=where, env=provider_env())
    assert (
        "handoffs planner (completed) → [Start coding] coder (completed) → [Review] reviewer "
        "(completed)" in status.stdout
    )
    shown = json.loads(
        flow("show", "run/progress.md", "--json", cwd=where, env=provider_env()).stdout
    )
    assert [(p["step"], p["agent"], p["status"]) for p in shown["handoffs"]] == [
        ("task", "planner", "completed"),
        ("handoff-1-start-coding", "coder", "completed"),
        ("handoff-2-review", "reviewer", "completed"),
    ]


def test_sigkill_in_each_part_then_resume_redoes_no_part(
    tmp_path: Path, server: ModelServer
) -> None:
    reference = _project(tmp_path / "reference")
    _replies(server)
    assert flow(*_run_args(server), cwd=reference, env=provider_env()).returncode == 0
    expected = transcript(reference / "run" / "progress.md")
    server.requests.clear()

    where = _project(tmp_path / "p")
    progress = where / "run" / "progress.md"
    _replies(server)
    # Each process dies at the first tool result it records: in part 1, then (resumed) in
    # part 2, then in part 3, after the result and before the model reads it.
    crash = provider_env(FLOW_CRASH_AT="engine.tool_result_recorded:1")
    first = flow(*_run_args(server), cwd=where, env=crash)
    assert first.returncode == -9, first.stderr
    for step, *_ in PARTS:
        run, _ = load_progress(progress)
        assert run.cursor.step == step
        assert run.transcript[-1].role == "tool_result" and run.transcript[-1].step == step
        if step != PARTS[-1][0]:
            again = flow("resume", "run/progress.md", cwd=where, env=crash)
            assert again.returncode == -9, again.stderr
    done = flow("resume", "run/progress.md", cwd=where, env=provider_env())
    assert done.returncode == 0, done.stderr

    assert transcript(progress) == expected
    # Every model call was made once: none was redone after a kill.
    _check_requests(server)
    run, _ = load_progress(progress)
    assert [run.steps[s].attempts for s, *_ in PARTS] == [1, 1, 1]
    assert len(run.attempts) == 4


# --- in-process runs with the scripted provider ------------------------------------------


SCRIPT = """\
replies:
  - "Plan: add the button."
  - "Added the button."
  - "Looks good."
  - "Fixed."
  - "Still good."
  - "Fixed again."
  - "Approved."
"""


def _start(where: Path, follow: Follow, **options: Any) -> Path:
    (where / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    command = RunCommand(
        where / "agents" / "planner.agent.md",
        task="add a button",
        handoffs=follow,
        progress=where / "run" / "progress.md",
        recording=where / "script.yaml",
        new=True,
    )
    settings = {"provider": "scripted", "workspace": where, "agent_dirs": (where / "agents",)}
    settings.update(options)
    outcome = run_workflow(command, RunOptions(**settings))
    return outcome.path


def test_auto_follows_send_true_handoffs_up_to_the_limit(tmp_path: Path) -> None:
    where = _project(tmp_path / "p")
    # planner → coder → reviewer → coder (Fix) → reviewer …: a cycle, cut at --max-handoffs.
    path = _start(where, Follow(auto=True, max=4))
    run, _ = load_progress(path)
    assert run.status == "completed"
    assert list(run.steps) == [
        "task",
        "handoff-1-start-coding",
        "handoff-2-review",
        "handoff-3-fix",
        "handoff-4-review",
    ]
    chain = run.workflow.handoffs
    assert chain is not None and (chain.follow, chain.max) == ("auto", 4)
    assert [p.agent for p in chain.parts] == ["coder", "reviewer", "coder", "reviewer"]
    systems = [e.content for e in run.transcript if e.role == "system"]
    assert [s.split(".")[0] for s in systems] == [
        "You are the planner",
        "You are the coder",
        "You are the reviewer",
        "You are the coder",
        "You are the reviewer",
    ]


def test_auto_stops_at_an_agent_that_sends_nothing_on(tmp_path: Path) -> None:
    where = _project(tmp_path / "p")
    reviewer = where / "agents" / "reviewer.agent.md"
    reviewer.write_text(REVIEWER.replace("send: true", "send: false"), encoding="utf-8")
    run, _ = load_progress(_start(where, Follow(auto=True)))
    assert list(run.steps) == ["task", "handoff-1-start-coding", "handoff-2-review"]


def test_model_given_to_the_run_wins_over_every_part(tmp_path: Path) -> None:
    where = _project(tmp_path / "p")
    path = _start(
        where, Follow(labels=("Start coding", "Review"), model="local-model"), model="local-model"
    )
    run, _ = load_progress(path)
    assert run.config.model == "local-model"
    assert run.workflow.handoffs is not None and run.workflow.handoffs.model == "local-model"


def test_a_changed_agent_is_a_changed_step_on_resume(tmp_path: Path) -> None:
    where = _project(tmp_path / "p")
    (where / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    script = SCRIPT + "failures:\n  2: {transient: false, message: down}\n"
    # The third call (the reviewer's) fails: the coder's part is completed, the review not.
    command = RunCommand(
        where / "agents" / "planner.agent.md",
        task="add a button",
        handoffs=Follow(labels=("Start coding", "Review")),
        progress=where / "run" / "progress.md",
        recording=where / "failing.yaml",
        new=True,
    )
    (where / "failing.yaml").write_text(script, encoding="utf-8")
    options = RunOptions(provider="scripted", workspace=where, agent_dirs=(where / "agents",))
    outcome = run_workflow(command, options)
    assert outcome.run.status == "failed"
    assert outcome.run.steps["handoff-1-start-coding"].status == "completed"

    coder = where / "agents" / "coder.agent.md"
    coder.write_text(CODER.replace("Implement the plan", "Rewrite everything"), encoding="utf-8")
    report = run_status(outcome.path, options)
    data = report.to_dict()
    assert data["workflow_changed"]
    assert data["changed_steps"] == [
        {"step": "handoff-1-start-coding", "kind": "changed", "started": True}
    ]
    with pytest.raises(WorkflowChangedError) as changed:
        resume_run(outcome.path, options)
    assert "handoff-1-start-coding" in changed.value.message
    # Kept as recorded: the review goes on with the coder's recorded answer.
    (where / "failing.yaml").write_text(SCRIPT, encoding="utf-8")
    done = resume_run(outcome.path, options, ResumeRequest(choices=Choices(keep_completed=True)))
    assert done.run.status == "completed"
    assert done.run.steps["handoff-1-start-coding"].attempts == 1


def test_an_unknown_label_names_the_labels_the_agent_has(tmp_path: Path) -> None:
    where = _project(tmp_path / "p")
    with pytest.raises(InputError) as error:
        _start(where, Follow(labels=("Start coding", "Deploy")))
    assert "the agent coder" in error.value.message
    assert "its handoffs: `Review`" in error.value.message
    assert not (where / "run" / "progress.md").exists()


def test_an_agent_not_found_names_the_folders_searched(tmp_path: Path) -> None:
    where = _project(tmp_path / "p")
    (where / "agents" / "reviewer.agent.md").unlink()
    with pytest.raises(FileNotFoundFlowError) as error:
        _start(where, Follow(labels=("Start coding", "Review")))
    assert "no agent is called `reviewer`" in error.value.message
    assert str(where / "agents") in error.value.message


def test_cli_errors_have_their_exit_codes(tmp_path: Path) -> None:
    where = _project(tmp_path / "p")
    base = (
        "run",
        "agents/planner.agent.md",
        "--task",
        "x",
        "--agents",
        "agents",
        "--provider",
        "echo",
        "--new",
    )
    unknown = flow(*base, "--handoff", "Deploy", cwd=where, env=provider_env())
    assert unknown.returncode == 9, unknown.stderr
    assert "its handoffs: `Start coding`" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    both = flow(*base, "--handoff", "Review", "--handoffs", "auto", cwd=where, env=provider_env())
    assert both.returncode == 9 and "exclude each other" in both.stderr
    wrong = flow(*base, "--handoffs", "all", cwd=where, env=provider_env())
    assert wrong.returncode == 9 and "the only value is `auto`" in wrong.stderr
    (where / "p.prompt.md").write_text("Say hi.\n", encoding="utf-8")
    prompt = flow(
        "run",
        "p.prompt.md",
        "--handoffs",
        "auto",
        "--provider",
        "echo",
        "--new",
        cwd=where,
        env=provider_env(),
    )
    assert prompt.returncode == 9 and "is a prompt file" in prompt.stderr


def test_handoff_options_combine_into_one_follow() -> None:
    assert handoffs_to_follow(["A", "B"], None, None) == Follow(labels=("A", "B"))
    assert handoffs_to_follow([], "auto", 2) == Follow(auto=True, max=2)
    assert handoffs_to_follow([], "AUTO", None) == Follow(auto=True, max=5)
    with pytest.raises(InputError, match="--max-handoffs limits"):
        handoffs_to_follow(["A"], None, 3)


def test_requests_carry_only_the_latest_system_prompt_first() -> None:
    system_a, system_b = Message("system", "A"), Message("system", "B")
    user, answer = Message("user", "task"), Message("assistant", "done")
    plain = (system_a, user, answer)
    assert latest_system(plain) is plain
    assert latest_system((system_a, user, answer, system_b, user)) == (
        system_b,
        user,
        answer,
        user,
    )


def test_the_chain_record_round_trips(tmp_path: Path) -> None:
    where = _project(tmp_path / "p")
    run, _ = load_progress(_start(where, Follow(auto=True, max=2)))
    again = from_front_matter(json.loads(json.dumps(to_front_matter(run))), path="x.md")
    assert again.workflow.handoffs == run.workflow.handoffs


def test_anthropic_gets_one_system_prompt_per_request(tmp_path: Path, server: ModelServer) -> None:
    from tests.support.providers_server import anthropic_message

    where = _project(tmp_path / "p")
    for n, (_step, _system, _model, tool) in enumerate(PARTS):
        server.push(
            Canned(body=anthropic_message(f"Using {tool}.", [(f"toolu_{tool}", tool, {})])),
            Canned(body=anthropic_message(f"Answer {n + 1}.")),
        )
    args = list(_run_args(server))
    args[args.index("openai")] = "anthropic"
    args[args.index(server.url + "/v1")] = server.url
    env = provider_env(ANTHROPIC_API_KEY="sk-ant-test-not-a-key")
    env.pop("ANTHROPIC_BASE_URL", None)
    result = flow(*args, cwd=where, env=env)
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 6
    for n, (_step, system, model, tool) in enumerate(PARTS):
        for request in server.requests[2 * n : 2 * n + 2]:
            body = request.body
            assert isinstance(body["system"], str) and body["system"].startswith(system), body
            assert system not in json.dumps(body["messages"])
            assert body["model"] == model
            assert [t["name"] for t in body["tools"]] == [tool]


def test_a_fork_elsewhere_resumes_the_chain_from_a_part(tmp_path: Path) -> None:
    from promptflow_resume.sharing import fork

    where = _project(tmp_path / "p")
    path = _start(where, Follow(labels=("Start coding", "Review")))
    copy = where / "elsewhere" / "deeper" / "progress.md"
    fork(path, "handoff-2-review", copy)
    forked, _ = load_progress(copy)
    assert forked.workflow.handoffs is not None
    assert [p.path for p in forked.workflow.handoffs.parts] == [
        "../../agents/coder.agent.md",
        "../../agents/reviewer.agent.md",
    ]
    options = RunOptions(provider="scripted", workspace=where)
    done = resume_run(copy, options)
    assert done.run.status == "completed"
    systems = [e for e in done.run.transcript if e.role == "system"]
    assert [e.step for e in systems] == [None, "handoff-1-start-coding", "handoff-2-review"]
    assert systems[-1].content.startswith("You are the reviewer.")


def test_a_handoff_prompt_naming_a_later_part_is_refused_before_the_run(tmp_path: Path) -> None:
    where = _project(tmp_path / "p")
    coder = where / "agents" / "coder.agent.md"
    coder.write_text(CODER.replace("Review the change above.", "Review ${step:deploy}."))
    with pytest.raises(WorkflowError) as error:
        _start(where, Follow(labels=("Start coding", "Review")))
    assert "uses ${step:deploy}" in error.value.message
    assert error.value.path == str(coder) and error.value.line is not None
    assert not (where / "run").exists()


def test_the_page_lists_the_chain(tmp_path: Path) -> None:
    from promptflow_resume.show import write_html

    where = _project(tmp_path / "p")
    path = _start(where, Follow(labels=("Start coding",)))
    page = where / "run.html"
    write_html(path, page)
    text = page.read_text(encoding="utf-8")
    assert (
        '<p class="facts" id="handoffs">handoffs: planner (completed) → [Start coding] coder '
        "(completed)</p>" in text
    )


def test_a_compaction_in_a_later_part_sends_one_system_prompt_in_every_request(
    tmp_path: Path, server: ModelServer
) -> None:
    """The summariser's request and the part's requests after it each carry exactly one
    system prompt (Anthropic's ``system`` field): the summariser's instructions, then the
    current agent's; no earlier agent's instructions travel in the messages."""
    from promptflow_resume.run.compaction import INSTRUCTIONS
    from tests.support.providers_server import anthropic_message

    where = tmp_path / "p"
    (where / "agents").mkdir(parents=True)
    first = "---\nname: a\nmodel: claude-sonnet-4-5\ntools: []\ncontext_window: 1500\n"
    first += "handoffs:\n  - label: Next\n    agent: b\n    prompt: Go on.\n---\nYou are A.\n"
    (where / "agents" / "a.agent.md").write_text(first, encoding="utf-8")
    (where / "agents" / "b.agent.md").write_text("---\nname: b\ntools: []\n---\nYou are B.\n")
    # A's long answer pushes B's first request over 80% of the 1,500-token window.
    server.push(
        Canned(body=anthropic_message("word " * 1500)),
        Canned(body=anthropic_message("A wrote many words.")),
        Canned(body=anthropic_message("B is done.")),
    )
    env = provider_env(ANTHROPIC_API_KEY="sk-ant-test-not-a-key")
    env.pop("ANTHROPIC_BASE_URL", None)
    result = flow(
        "run", "agents/a.agent.md", "--task", "write", "--handoff", "Next", "--agents", "agents",
        "--provider", "anthropic", "--base-url", server.url, "--progress", "run/progress.md",
        "--new", cwd=where, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "compacting entries" in result.stderr
    assert [r.body["system"] for r in server.requests] == ["You are A.", INSTRUCTIONS, "You are B."]
    for request in server.requests:
        assert all(m["role"] in ("user", "assistant") for m in request.body["messages"])
    summary, after = server.requests[1].body, server.requests[2].body
    assert "You are A." not in json.dumps(summary) and "You are B." not in json.dumps(summary)
    assert "You are A." not in json.dumps(after["messages"])
    assert "A wrote many words." in json.dumps(after["messages"])
