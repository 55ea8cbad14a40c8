"""Model names as the public agents write them (issue 43, item 1): a table of display names
with prices, families by pattern, the person's own ``models:``, a list tried in the author's
order from the first model the person has credentials for, and an unknown name reported at
``flow check`` and at the start of a run with the line that fixes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptflow_resume.base.errors import InvalidFileError
from promptflow_resume.base.packagedata import read_text
from promptflow_resume.base.userconfig import config_path
from promptflow_resume.providers.models import choose_models, resolve_model
from promptflow_resume.providers.pricing import price_for
from promptflow_resume.run.attempt import model_choice
from promptflow_resume.workflow import check_workflow, parse_workflow
from tests.support.flowproc import flow, flow_env

OPENAI = {"OPENAI_API_KEY": "sk-test"}
ANTHROPIC = {"ANTHROPIC_API_KEY": "sk-ant-test"}


@pytest.mark.parametrize(
    ("written", "provider", "model", "source"),
    [
        # Names the public agents write (github/awesome-copilot), as VS Code's picker shows them.
        ("Claude Sonnet 4.6", "anthropic", "claude-sonnet-4-6", "table"),
        ("Claude Sonnet 4.6 (copilot)", "anthropic", "claude-sonnet-4-6", "table"),
        ("GPT-5.4", "openai", "gpt-5.4", "table"),
        ("GPT-5.3-Codex", "openai", "gpt-5.3-codex", "table"),
        ("claude-opus-4.7", "anthropic", "claude-opus-4-7", "id"),  # a known id written its way
        # Names the table does not hold, by family.
        ("Claude Sonnet 4.7", "anthropic", "claude-sonnet-4-7", "family"),
        ("GPT-5.9-Codex-Max", "openai", "gpt-5.9-codex-max", "family"),
        ("o4", "openai", "o4", "family"),
        ("gpt-4o-mini", "openai", "gpt-4o-mini", "id"),
        ("Gemini 2.5 Pro", "google", "gemini-2.5-pro", "family"),
        ("Raptor mini", None, "Raptor mini", "unknown"),
    ],
)
def test_names_resolve_to_a_provider_and_an_api_id(
    written: str, provider: str | None, model: str, source: str
) -> None:
    ref = resolve_model(written)
    assert (ref.provider, ref.model, ref.source) == (provider, model, source)
    assert ref.runnable == (provider in ("openai", "anthropic"))


def test_every_model_of_the_table_has_a_price() -> None:
    table = json.loads(read_text("data/models.json"))["models"]
    unpriced = [name for name, (_, model) in table.items() if price_for(model) is None]
    assert unpriced == []


def test_the_persons_own_names_come_first() -> None:
    config_path().parent.mkdir(parents=True, exist_ok=True)
    config_path().write_text(
        "models:\n  Raptor mini: {provider: openai, model: gpt-5-mini}\n"
        "  Claude Sonnet 4.6: claude-sonnet-4-5\n",
        encoding="utf-8",
    )
    assert resolve_model("Raptor mini").model == "gpt-5-mini"
    mine = resolve_model("Claude Sonnet 4.6 (copilot)")
    assert (mine.provider, mine.model, mine.source) == ("anthropic", "claude-sonnet-4-5", "config")
    config_path().write_text("models:\n  x: [1]\n  y: z\n", encoding="utf-8")
    with pytest.raises(InvalidFileError) as bad:
        resolve_model("x")
    assert bad.value.field == "$.models.x"


def test_a_list_is_tried_in_the_authors_order_from_the_first_with_credentials() -> None:
    # The list: it went to Anthropic (the first entry flow recognised) and would have
    # ended on Haiku.
    refs = [resolve_model(n) for n in ("GPT-5.3-Codex", "GPT-5.4", "Claude Haiku 4.5")]
    both = choose_models(refs, env={**OPENAI, **ANTHROPIC})
    assert (both.provider, both.models, both.notes) == ("openai", ("gpt-5.3-codex", "gpt-5.4"), ())
    claude = choose_models(refs, env=ANTHROPIC)
    assert (claude.provider, claude.models) == ("anthropic", ("claude-haiku-4-5",))
    assert claude.notes == (
        "`GPT-5.3-Codex`, `GPT-5.4` left out: no credentials for their provider; the run uses "
        "`Claude Haiku 4.5` (anthropic).",
    )
    neither = choose_models(refs, env={})
    assert neither.provider == "openai"
    assert neither.notes == (
        "no provider of the model list has credentials (set one of ANTHROPIC_API_KEY, "
        "OPENAI_API_KEY).",
    )
    # A provider the person names keeps its own models and leaves the others out.
    named = choose_models(refs, provider="anthropic", env={})
    assert named.models == ("claude-haiku-4-5",)


def test_an_unknown_name_is_reported_with_the_line_that_fixes_it(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.md"
    path.write_text("---\nname: a\nmodel: Raptor mini\n---\nBody.\n", encoding="utf-8")
    _, diagnostics = check_workflow(path)
    (warning,) = [d for d in diagnostics if d.code == "model-unknown"]
    assert (warning.line, warning.field) == (3, "$.model")
    assert warning.message.startswith("`Raptor mini` is not a model name flow knows")
    assert "--model" in warning.message and "config.yaml" in warning.message
    gemini = parse_workflow("---\nmodel: Gemini 2.5 Pro\n---\nx\n", path="g.prompt.md")
    (unsupported,) = [d for d in gemini.diagnostics if d.code == "model-unknown"]
    assert "a model of Google, which flow has no provider for" in unsupported.message
    # A file that names its provider knows its models (a local server's): nothing to say.
    local = parse_workflow("---\nprovider: openai\nmodel: llama3\n---\nx\n", path="l.prompt.md")
    assert [d for d in local.diagnostics if d.code == "model-unknown"] == []


def test_a_new_run_uses_the_first_model_the_person_has_a_key_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wf = parse_workflow("---\nmodel: [GPT-5.4, Claude Sonnet 4.6]\n---\nx\n", path="w.prompt.md")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    choice = model_choice(wf)
    assert (choice.provider, choice.models) == ("anthropic", ("claude-sonnet-4-6",))
    # --model names one model; its provider comes with it.
    flag = model_choice(wf, model="Claude Opus 4.7")
    assert (flag.provider, flag.models) == ("anthropic", ("claude-opus-4-7",))
    assert model_choice(wf, provider="echo").provider == "echo"


def test_the_start_of_a_run_says_what_it_cannot_send(tmp_path: Path) -> None:
    (tmp_path / "w.prompt.md").write_text(
        "---\nmodel: [Raptor mini, GPT-5.4]\n---\nName a bee.\n", encoding="utf-8"
    )
    env = flow_env(OPENAI_API_KEY="")
    done = flow(
        "run", "w.prompt.md", "--provider", "echo", "--new", "--progress", "r/progress.md",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "`Raptor mini` is not a model name flow knows" not in done.stderr  # --provider named
    done = flow("run", "w.prompt.md", "--new", "--progress", "s/progress.md", cwd=tmp_path, env=env)
    assert "`Raptor mini` is not a model name flow knows" in done.stderr
    assert "give the model to use with --model" in done.stderr
