"""``model:`` as one name or an ordered list: mapping, provider, diagnostics, hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptflow_resume.base.errors import WorkflowError
from promptflow_resume.workflow import Workflow, check_workflow, parse_workflow

BODY = "Name a bee.\n"


def _wf(front: str) -> Workflow:
    return parse_workflow(f"---\n{front}---\n{BODY}", path="w.prompt.md")


def _diagnostics(tmp_path: Path, front: str) -> list[str]:
    path = tmp_path / "w.prompt.md"
    path.write_text(f"---\n{front}---\n{BODY}", encoding="utf-8")
    _, diagnostics = check_workflow(path)
    return [str(d).replace(str(path), "w.prompt.md") for d in diagnostics]


def test_a_single_name_is_a_list_of_one() -> None:
    wf = _wf("model: gpt-4o-mini\n")
    # An id of a family flow knows names its provider too.
    assert (wf.model, wf.models, wf.provider) == ("gpt-4o-mini", ("gpt-4o-mini",), "openai")
    assert _wf("").models == () and _wf("").model is None


def test_each_entry_is_mapped_and_the_first_that_names_a_provider_names_it() -> None:
    # VS Code's own example of a custom agent's model list.
    wf = _wf("model: ['GPT-5 (copilot)', 'Claude Sonnet 4.5 (copilot)']\n")
    assert wf.models == ("gpt-5", "claude-sonnet-4-5")
    assert wf.model == "gpt-5" and wf.provider == "openai"
    later = _wf("model: [my-local-model, 'Claude Sonnet 4 (copilot)']\n")
    assert later.provider == "anthropic" and later.model == "my-local-model"
    given = _wf("provider: openai\nmodel: ['Claude Sonnet 4 (copilot)']\n")
    assert given.provider == "openai" and given.models == ("claude-sonnet-4-0",)


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("model: []\n", "w.prompt.md:2:8: error: $.model: must not be empty."),
        ("model: ''\n", "w.prompt.md:2:8: error: $.model: must not be an empty string."),
        (
            "model: [gpt-4o, 3]\n",
            "w.prompt.md:2:17: error: $.model[1]: must be a string, not integer 3.",
        ),
        (
            "model:\n  - gpt-4o\n  - ''\n",
            "w.prompt.md:4:5: error: $.model[1]: must not be an empty string.",
        ),
        (
            "model: {name: gpt-4o}\n",
            'w.prompt.md:2:8: error: $.model: must be a string or a list, not mapping {"name": '
            '"gpt-4o"}.',
        ),
    ],
)
def test_bad_entries_are_positioned(tmp_path: Path, front: str, expected: str) -> None:
    assert _diagnostics(tmp_path, front) == [expected]
    with pytest.raises(WorkflowError):
        _wf(front)


def test_a_repeated_model_and_a_model_of_another_provider_are_warned_about(
    tmp_path: Path,
) -> None:
    found = _diagnostics(tmp_path, "model: [gpt-5, 'GPT-5 (copilot)', 'Claude Sonnet 4']\n")
    # Without `provider:` a list of several providers' models is tried by credentials.
    assert found == [
        "w.prompt.md:2:16: warning: $.model[1]: `GPT-5 (copilot)` is listed before (as model "
        "1, `gpt-5`); it is tried once.",
    ]
    named = _diagnostics(tmp_path, "provider: openai\nmodel: [gpt-5, 'Claude Sonnet 4']\n")
    assert named == [
        "w.prompt.md:3:16: warning: $.model[1]: `Claude Sonnet 4` is a model of the anthropic "
        "provider, but this workflow's models go to openai (`provider:`); it is not tried "
        "(leave `provider:` out to try the list in order with the first provider you have a "
        "key for).",
    ]
    assert _wf("model: [gpt-5, 'GPT-5 (copilot)']\n").models == ("gpt-5",)


def test_the_list_is_the_model_choice_in_the_hashes() -> None:
    single = _wf("model: gpt-4o\n")
    # A list of one is the same choice as the name alone: no hash changes.
    assert _wf("model: [gpt-4o]\n").hash == single.hash
    listed = _wf("model: [gpt-4o, gpt-4o-mini]\n")
    assert listed.hash != single.hash
    assert listed.steps[0].hash != single.steps[0].hash
    # The order is the choice too.
    assert _wf("model: [gpt-4o-mini, gpt-4o]\n").hash != listed.hash
    # How a name is written does not matter once it maps to the same id.
    assert (
        _wf("model: ['GPT-4o (copilot)', gpt-4o-mini]\n").hash
        == _wf("provider: openai\nmodel: [gpt-4o, gpt-4o-mini]\n").hash
    )
