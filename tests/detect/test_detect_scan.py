"""The fast front matter scanner reads what the YAML loader reads, or says it cannot."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptflow_resume.base import yamlio
from promptflow_resume.detect.scan import Unsupported, scalar, scan
from promptflow_resume.detect.summary import WANTED
from tests.support.detect import front_matter


def kept(data: Any, spec: Any) -> Any:
    """``data`` restricted to what ``spec`` keeps (as the scanner should return it)."""
    if spec is True or not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        rule = spec.get(key, spec.get("*", False))
        if rule:
            out[key] = kept(value, rule)
    return out


def agrees(text: str, spec: Any = WANTED) -> bool:
    """True if scan(text) equals the YAML loader's result; False if it declined."""
    try:
        fast = scan(text, spec)
    except Unsupported:
        return False
    slow = yamlio.load(text)
    assert fast == kept(slow, spec), text
    return True


def test_reads_a_front_matter_as_the_progress_store_writes_it() -> None:
    data = front_matter(
        "20261121-232529-api-a1b2",
        inputs={"framework": "fastapi", "retries": 3, "ratio": 0.5, "debug": False},
        reason="interrupted by Ctrl-C: step 2",
    )
    text = yamlio.dump(data)
    assert agrees(text)
    fast = scan(text, WANTED)
    assert fast["inputs"] == {"framework": "fastapi", "retries": 3, "ratio": 0.5, "debug": False}
    assert "attempts" not in fast and "config" not in fast
    assert fast["steps"]["s1"] == {"status": "completed"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("completed", "completed"),
        ("'2026-11-21T23:25:29Z'", "2026-11-21T23:25:29Z"),
        ("'it''s'", "it's"),
        ("''", ""),
        ('"plain double"', "plain double"),
        ("20261121-232529-api-a1b2", "20261121-232529-api-a1b2"),
        ("sha256:v1:abcd", "sha256:v1:abcd"),
        ("12", 12),
        ("-3", -3),
        ("0.25", 0.25),
        ("true", True),
        ("No", False),
        ("~", None),
        ("null", None),
        ("[]", []),
        ("{}", {}),
        ("a [b] {c}", "a [b] {c}"),
        ("value # a comment", "value"),
        ("x#y", "x#y"),
    ],
)
def test_scalar(value: str, expected: Any) -> None:
    assert scalar(value) == expected
    assert yamlio.load(f"k: {value}\n")["k"] == expected


@pytest.mark.parametrize(
    "value",
    [
        "'unclosed",
        "'a'' b",
        '"esc\\"aped"',
        '"tab\\t"',
        "2026-11-21",  # a timestamp: YAML makes it a date
        "0x1f",
        "012",
        "1_000",
        ".inf",
        "&anchor x",
        "*alias",
        "!!str 3",
        "|",
        ">-",
        "[a, b]",
        "{a: 1}",
        "a: b",
        "ends:",
        "- item",
        "@reserved",
    ],
)
def test_scalar_declines_what_it_does_not_read(value: str) -> None:
    with pytest.raises(Unsupported):
        scalar(value)


@pytest.mark.parametrize(
    "text",
    [
        # skipped blocks may hold anything
        "status: failed\nattempts:\n- n: 1\n  notes: |\n    multi\n    line\n  x: [1, 2]\n",
        "status: failed\nconfig: {provider: x, model: y}\n",
        'status: failed\nlast_error:\n  message: "a\\tb"\n',
        # comments and blank lines
        "# leading comment\n\nstatus: failed   # trailing\n\nkeywords:\n  # note\n  - api\n",
        # sequences flush with their key, and indented
        "keywords:\n- api\n- db\nstatus: failed\n",
        "keywords:\n    - api\nstatus: failed\n",
        # empty values and empty collections
        "reason:\nstatus: failed\ninputs: {}\nkeywords: []\n",
        # deeper indentation than two
        "workflow:\n    name: x\n    hash: h\nstatus: paused\n",
        # CRLF line ends
        "status: failed\r\nreason: because\r\n",
        # quoted keys
        "'status': failed\ninputs:\n  \"my key\": 1\n",
        # one-line flow collections of plain scalars (how usage, cursor and keywords are written)
        "status: failed\ninputs: {a: 1}\n",
        "keywords: [api, db, x-y]\ncursor: {step: a, index: 1, total: 2}\n",
        "usage: {input_tokens: 3, cost_usd: 0.5, turns: 3}\nsteps:\n  a:\n    status: done\n"
        "    usage: {turns: 1}\n",
    ],
)
def test_agrees_with_yaml(text: str) -> None:
    assert agrees(text)


@pytest.mark.parametrize(
    "text",
    [
        # kept keys in a style the scanner does not read: the caller falls back to YAML
        "status: failed\nreason: |\n  line one\n  line two\n",
        "status: failed\nreason: &r text\n",
        # flow collections beyond one line of plain scalars
        "keywords: [a, [b]]\n",
        "inputs: {a: 'x'}\n",
        "keywords: [a,\n  b]\n",
        "inputs: {a: 1, a: 2}\n",
        "cursor: {step: a:b, index: 1}\n",
        "keywords: [a, ]\n",
        "status: failed\nreason: 'spans\n  lines'\n",
        "status: failed\nkeywords:\n- - nested\n",
        "status: failed\ninputs:\n  when: 2026-11-21\n",
        "  status: failed\n",
        "- not a mapping\n",
        "status: failed\n\tindented: tab\n",
        "yes: 1\n",
        # a skipped key whose quoted value spans lines, even back at column 0
        "attempts: 'x''\nstatus: completed'\nstatus: failed\n",
        'notes: "one\nstatus: completed"\n',
    ],
)
def test_declines_other_yaml(text: str) -> None:
    assert not agrees(text)


# --- property: on any front matter flow could write, the scanner agrees with YAML ---------

_keys = st.sampled_from(["framework", "count", "tags", "ratio", "note", "on", "x y", "1"])
_scalars = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.none(),
    st.sampled_from(["yes", "No", "null", "~", "2026-11-21", "12:30", "0x1f", "a: b", "#x", "'q'"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inputs=st.dictionaries(_keys, _values, max_size=4),
    reason=st.one_of(st.none(), st.text(max_size=30)),
    description=st.one_of(st.none(), st.text(max_size=30)),
    keywords=st.lists(st.text(max_size=12), max_size=5),
    status=st.sampled_from(["running", "failed", "completed"]),
)
def test_scanner_agrees_with_yaml_on_generated_front_matter(
    inputs: dict[str, Any],
    reason: str | None,
    description: str | None,
    keywords: list[str],
    status: str,
) -> None:
    data = front_matter(
        "r1",
        status=status,
        inputs=inputs,
        reason=reason,
        description=description,
        keywords=keywords,
    )
    text = yamlio.dump(data)
    agrees(text)  # asserts equality whenever the scanner answers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keywords=st.lists(st.one_of(st.text(max_size=12), _scalars), max_size=6),
    inputs=st.dictionaries(_keys, _scalars, max_size=4),
)
def test_scanner_agrees_with_yaml_on_flow_collections(
    keywords: list[Any], inputs: dict[str, Any]
) -> None:
    def one_line(value: Any) -> str:
        return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()

    text = f"status: failed\nkeywords: {one_line(keywords)}\ncursor: {one_line(inputs)}\n"
    text += f"usage: {one_line({'cost_usd': 0.5, **inputs})}\n"
    agrees(text)  # asserts equality whenever the scanner answers


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_scanner_never_disagrees_on_edited_text(data: st.DataObject) -> None:
    """Random line edits (hand edits, truncation): the scanner agrees with YAML or declines."""
    lines = yamlio.dump(front_matter("r1", inputs={"a": "b"}, reason="x")).split("\n")
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        index = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
        edit = data.draw(
            st.sampled_from(["drop", "indent", "dedent", "quote", "colon", "dash", "dup"])
        )
        line = lines[index]
        if edit == "drop":
            del lines[index]
        elif edit == "indent":
            lines[index] = "  " + line
        elif edit == "dedent":
            lines[index] = line[2:] if line.startswith("  ") else line
        elif edit == "quote":
            lines[index] = line.replace(": ", ": '", 1)
        elif edit == "colon":
            lines[index] = line + ": x"
        elif edit == "dash":
            lines[index] = "- " + line.lstrip(" ")
        else:
            lines.insert(index, line)
        if not lines:
            lines = [""]
    text = "\n".join(lines)
    try:
        slow = yamlio.load(text)
    except Exception:
        slow = None
    try:
        fast = scan(text, WANTED)
    except Unsupported:
        return
    if isinstance(slow, dict):
        # Where YAML reads the text, the scanner gives the same kept keys.
        assert fast == kept(slow, WANTED), text
