"""The compiled schema check agrees with jsonschema: it is trusted only to say "valid"."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from promptflow_resume.base import yamlio
from promptflow_resume.base.schemacheck import compile_schema
from promptflow_resume.progress.digest import transcript_digest
from promptflow_resume.progress.examples import example_run, synthetic_run
from promptflow_resume.progress.frontmatter import front_matter
from promptflow_resume.progress.schema import SCHEMA_NAMES, load_schema
from tests import support

CHECK = compile_schema(load_schema("progress"))
VALIDATOR = Draft202012Validator(load_schema("progress"))
ROOT = support.REPO


def _front_matters() -> list[dict[str, Any]]:
    out = []
    for run in (example_run(), synthetic_run(30)):
        out.append(
            front_matter(run, entries=len(run.transcript), digest=transcript_digest(run.transcript))
        )
    return out


def _valid(document: Any) -> bool:
    return not list(VALIDATOR.iter_errors(document))


def test_the_progress_schema_compiles_and_front_matters_flow_writes_pass() -> None:
    assert CHECK is not None
    for document in _front_matters():
        assert _valid(document)
        assert CHECK(document)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_schema_either_compiles_or_is_left_to_jsonschema(name: str) -> None:
    check = compile_schema(load_schema(name))
    assert check is None or callable(check)


def test_a_keyword_it_does_not_know_leaves_the_schema_to_jsonschema() -> None:
    assert compile_schema({"type": "object", "properties": {"a": {"oneOf": [{}]}}}) is None
    assert compile_schema({"$ref": "https://example.com/other.json"}) is None
    assert compile_schema({"type": "string", "format": "date-time"}) is None


VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 10**12)
    | st.sampled_from([0.5, -1.25, 1e300])
    | st.sampled_from(
        ["", "x", "running", "completed", "sha256:" + "a" * 64, "2026-01-01T00:00:00Z"]
    )
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*at, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(_paths(item, (*at, index)))
    return out


def _edited(base: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    """A copy of ``base`` with one to three values replaced, deleted or added."""
    document = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(document)))
        if not path:
            continue
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        how = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if how == "replace":
            parent[path[-1]] = data.draw(VALUES)
        elif how == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[data.draw(st.text(max_size=8))] = data.draw(VALUES)
        else:
            parent.append(data.draw(VALUES))
    return document


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_front_matters()), st.data())
def test_it_agrees_with_jsonschema_on_edited_front_matters(
    base: dict[str, Any], data: st.DataObject
) -> None:
    document = _edited(base, data)
    assert CHECK is not None
    _agree(CHECK(document), _valid(document), document)


def _workflow_front_matters() -> list[dict[str, Any]]:
    out = []
    files = [*ROOT.glob("workflows/**/*.prompt.md"), *ROOT.glob("tests/fixtures/workflows/**/*.md")]
    for file in sorted(files):
        text = file.read_text(encoding="utf-8", errors="replace")
        if text.startswith("---\n") and "\n---\n" in text[3:]:
            try:
                data = yamlio.load(text[4 : text.index("\n---\n", 3) + 1])
            except Exception:  # a fixture that is broken on purpose
                continue
            if isinstance(data, dict):
                out.append(data)
    return out


WORKFLOW_CHECK = compile_schema(load_schema("workflow"))
WORKFLOW_VALIDATOR = Draft202012Validator(load_schema("workflow"))
WORKFLOWS = _workflow_front_matters()


def test_workflow_front_matters_compile_and_agree() -> None:
    assert WORKFLOW_CHECK is not None
    assert len(WORKFLOWS) >= 5
    valid = [d for d in WORKFLOWS if not list(WORKFLOW_VALIDATOR.iter_errors(d))]
    assert len(valid) >= 5
    for document in WORKFLOWS:
        assert WORKFLOW_CHECK(document) == (document in valid)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(WORKFLOWS), st.data())
def test_it_agrees_with_jsonschema_on_edited_workflow_front_matters(
    base: dict[str, Any], data: st.DataObject
) -> None:
    document = _edited(base, data)
    assert WORKFLOW_CHECK is not None
    valid = not list(WORKFLOW_VALIDATOR.iter_errors(document))
    _agree(WORKFLOW_CHECK(document), valid, document)


def _agree(quick: bool, valid: bool, document: Any) -> None:
    """The quick check never passes an invalid document, and rejects a valid one only where
    it is stricter by design: a float with an integer value (JSON Schema's "integer")."""
    if quick:
        assert valid
    elif valid:
        assert any(isinstance(v, float) and v.is_integer() for v in _leaves(document))


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]
