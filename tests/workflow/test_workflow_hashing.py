"""Hashes: what changes them and what does not (examples plus property tests)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from promptflow_resume.base.textnorm import normalize_text
from promptflow_resume.workflow import Workflow, parse_workflow, short_hash

HASH = re.compile(r"^sha256:v1:[0-9a-f]{64}$")

BASE = """---
description: Summarize the build
name: summary
argument-hint: none
mode: agent
model: gpt-4o-mini
provider: openai
temperature: 0.2
commands:
  bump:
    description: Append one line to the counter
    argv: [sh, -c, "echo bumped >> counter.txt"]
    idempotent: false
tools: [bump, edit/editFiles]
inputs:
  audience: {type: string, description: Who reads it, default: the team}
budget:
  max_turns: 40
retry:
  max_attempts: 3
---
You are a careful release assistant.

## Step 1: Inspect
Look at the repository and call the bump tool as needed.

## Step 2: Report
> tools: none

Write a short report for ${input:audience}.
"""


def load(text: str) -> Workflow:
    return parse_workflow(text, path="w.prompt.md")


def hashes(wf: Workflow) -> tuple[str, list[str]]:
    return wf.hash, [s.hash for s in wf.steps]


def test_hash_format() -> None:
    wf = load(BASE)
    assert HASH.match(wf.hash)
    assert all(HASH.match(s.hash) for s in wf.steps)
    assert short_hash(wf.hash) == wf.hash[len("sha256:v1:") :][:12]


def test_cosmetic_edits_change_no_hash() -> None:
    base = hashes(load(BASE))
    edits = [
        BASE.replace("description: Summarize the build", "description: Something else"),
        BASE.replace("name: summary", "name: other"),
        BASE.replace("argument-hint: none", "argument-hint: a file"),
        BASE.replace("mode: agent", "agent: agent"),
        BASE.replace("description: Who reads it", "description: The readers"),
        BASE.replace("max_turns: 40", "max_turns: 400"),
        BASE.replace("max_attempts: 3", "max_attempts: 9"),
        BASE.replace("model: gpt-4o-mini", "model: gpt-4o-mini\napplyTo: '**'"),
        BASE.replace("[bump, edit/editFiles]", "[bump, editFiles]"),
        BASE.replace("\n", "\r\n"),
        "\ufeff" + BASE,
        BASE.replace("assistant.\n", "assistant.   \n\n\n\n"),
        BASE.replace("provider: openai\ntemperature: 0.2", "temperature: 0.2\nprovider: openai"),
        BASE.replace("\n---\nYou are", "\n---\n\n\nYou are"),
    ]
    for edited in edits:
        assert hashes(load(edited)) == base, edited


def test_ask_mode_changes_the_tools_and_so_the_hash() -> None:
    ask = load(BASE.replace("mode: agent", "agent: ask"))
    assert ask.tools == ("bump", "read_file")  # no edits; the declared command stays
    assert ask.hash != load(BASE).hash


def test_a_changed_step_word_changes_that_step_and_the_workflow() -> None:
    before = load(BASE)
    after = load(BASE.replace("short report", "long report"))
    assert after.steps[0].hash == before.steps[0].hash
    assert after.steps[1].hash != before.steps[1].hash
    assert after.hash != before.hash


def test_shared_context_model_and_params_change_every_prompt_step() -> None:
    before = hashes(load(BASE))
    for old, new in [
        ("careful release", "careless release"),
        ("model: gpt-4o-mini", "model: gpt-4o"),
        ("provider: openai", "provider: anthropic"),
        ("temperature: 0.2", "temperature: 0.3"),
    ]:
        after = hashes(load(BASE.replace(old, new)))
        assert after[0] != before[0]
        assert after[1][0] != before[1][0] and after[1][1] != before[1][1], new


def test_a_tool_definition_changes_only_the_steps_that_may_use_it() -> None:
    before = load(BASE)
    for old, new in [
        ("Append one line", "Append two lines"),
        ("idempotent: false", "idempotent: true"),
        ('"echo bumped >> counter.txt"', '"echo bumped >> other.txt"'),
        ("[bump, edit/editFiles]", "[bump]"),
    ]:
        after = load(BASE.replace(old, new))
        assert after.steps[0].hash != before.steps[0].hash, new
        assert after.steps[1].hash == before.steps[1].hash, new  # `tools: none`
        assert after.hash != before.hash


def test_input_semantics_change_the_workflow_hash() -> None:
    before = load(BASE)
    for old, new in [
        ("default: the team", "default: the board"),
        ("type: string, description", "type: list, description"),
    ]:
        assert load(BASE.replace(old, new)).hash != before.hash


def test_step_title_is_part_of_the_step_hash_but_its_number_is_not() -> None:
    before = load(BASE)
    renamed = load(BASE.replace("Step 2: Report", "Step 2: Summary"))
    assert renamed.steps[1].hash != before.steps[1].hash
    renumbered = load(BASE.replace("Step 2: Report", "Step 7: Report"))
    assert renumbered.steps[1].hash == before.steps[1].hash


def test_normalize_text() -> None:
    assert normalize_text("\ufeff\r\n\r\na  \r\nb\t\rc\n\n\n\nd\n\n") == "a\nb\nc\n\nd"
    assert normalize_text("e\u0301") == "\u00e9"  # NFC


# --- properties -------------------------------------------------------------------------------

WORDS = st.sampled_from(
    ["alpha", "beta", "gamma", "delta", "omega", "read", "write", "check", "count", "report"]
)
SENTENCE = st.lists(WORDS, min_size=1, max_size=6).map(lambda ws: " ".join(ws) + ".")
STEP = st.tuples(WORDS, st.lists(SENTENCE, min_size=1, max_size=3))


@st.composite
def workflows(draw: st.DrawFn) -> tuple[list[str], list[tuple[str, list[str]]], str]:
    """(front-matter lines, steps as (title, sentences), context sentence)."""
    front = [
        f"model: {draw(WORDS)}",
        f"temperature: {draw(st.integers(0, 20)) / 10}",
        f"description: {draw(SENTENCE)}",
        "inputs:\n  topic: {type: string, default: x}",
    ]
    steps = draw(st.lists(STEP, min_size=1, max_size=4))
    return front, steps, draw(SENTENCE)


def render(
    front: list[str],
    steps: list[tuple[str, list[str]]],
    context: str,
) -> list[str]:
    lines = ["---", *"\n".join(front).split("\n"), "---", context + " ${input:topic}", ""]
    for n, (title, sentences) in enumerate(steps, start=1):
        lines += [f"## Step {n}: {title}", *sentences, ""]
    return lines


@given(
    workflows(),
    st.data(),
)
@settings(max_examples=60, deadline=None)
def test_hashes_ignore_line_endings_whitespace_bom_and_key_order(
    wf: tuple[list[str], list[tuple[str, list[str]]], str], data: st.DataObject
) -> None:
    front, steps, context = wf
    plain = "\n".join(render(front, steps, context)) + "\n"
    shuffled = data.draw(st.permutations(front))
    messy_lines = render(shuffled, steps, context)
    endings = data.draw(
        st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=len(messy_lines),
                 max_size=len(messy_lines))
    )  # fmt: skip
    trailing = data.draw(
        st.lists(st.sampled_from(["", " ", "  ", "\t", " \t "]), min_size=len(messy_lines),
                 max_size=len(messy_lines))
    )  # fmt: skip
    bom = data.draw(st.sampled_from(["", "\ufeff"]))
    messy = bom + "".join(
        line + pad + end for line, pad, end in zip(messy_lines, trailing, endings, strict=True)
    )
    assert hashes(load(messy)) == hashes(load(plain))


@given(workflows(), st.data())
@settings(max_examples=60, deadline=None)
def test_any_changed_prompt_word_changes_its_step_hash(
    wf: tuple[list[str], list[tuple[str, list[str]]], str], data: st.DataObject
) -> None:
    front, steps, context = wf
    before = load("\n".join(render(front, steps, context)) + "\n")
    at = data.draw(st.integers(0, len(steps) - 1))
    title, sentences = steps[at]
    line_at = data.draw(st.integers(0, len(sentences) - 1))
    words = sentences[line_at].rstrip(".").split(" ")
    word_at = data.draw(st.integers(0, len(words) - 1))
    replacement = data.draw(WORDS.filter(lambda w: w != words[word_at]))
    words[word_at] = replacement
    changed = list(sentences)
    changed[line_at] = " ".join(words) + "."
    new_steps = [*steps[:at], (title, changed), *steps[at + 1 :]]
    after = load("\n".join(render(front, new_steps, context)) + "\n")
    assert after.hash != before.hash
    for i, (old, new) in enumerate(zip(before.steps, after.steps, strict=True)):
        assert (old.hash != new.hash) == (i == at)
