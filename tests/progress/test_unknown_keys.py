"""Keys a progress file holds that this flow does not know (docs/spec.md 2.5): read past, kept,
and written back in the same mapping, after the same key, in the same YAML style; a list item
keeps its own by its identifying fields."""

from __future__ import annotations

import pytest

from promptflow_resume.progress import parse, render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Approval, InFlight, Run
from promptflow_resume.progress.schema import load_schema
from promptflow_resume.progress.unknown import ITEM_KEYS


def _example() -> Run:
    run = example_run()
    for entry in run.transcript:
        entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    run.approvals = [Approval("call_9Kp", "create_file", "report", 8, "{}", "approve: edit")]
    return run


def _lists_of_records(node: object, place: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The places of the schema's lists whose items are records (``*``: any item)."""
    defs = load_schema("progress")["$defs"]
    while isinstance(node, dict) and "$ref" in node:
        node = defs[str(node["$ref"]).rpartition("/")[2]]
    if not isinstance(node, dict):
        return []
    found = []
    items = node.get("items")
    if isinstance(items, dict) and "properties" in items:
        found.append(place)
        found += _lists_of_records(items, (*place, "*"))
    for key, sub in (node.get("properties") or {}).items():
        found += _lists_of_records(sub, (*place, key))
    return found


def test_every_list_of_records_names_the_fields_that_identify_an_item() -> None:
    places = _lists_of_records(load_schema("progress"))
    assert sorted(places) == sorted(ITEM_KEYS), "add the list to unknown.ITEM_KEYS"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("min_flow: 0.2.0\n", "min_flow: 0.2.0\nreview: {by: alice}\n"),
        ("  name: release-notes\n", "  name: release-notes\n  owner: team-a\n"),
        ("  model: gpt-4o-mini\n", "  model: gpt-4o-mini\n  effort: high\n"),
        ("cursor: {step: report,", "cursor: {phase: 2, step: report,"),
        (
            "    finished: '2026-11-21T23:25:48Z'\n",
            "    finished: '2026-11-21T23:25:48Z'\n    tags: [slow, 'x: y']\n",
        ),
        ("turns: 2}\n  report:", "turns: 2, reasoning_tokens: 4}\n  report:"),
        ("idempotent: true}\n", "idempotent: true, sandbox: none}\n"),
        (
            "  status: interrupted\n  reason",
            "  machine: {os: linux, cpus: 2}\n  status: interrupted\n  reason",
        ),
        ("  step: report\nredactions", '  step: report\n  trace: "t-1"\nredactions'),
        ("  why: 'approve: edit'\n", "  why: 'approve: edit'\n  policy: strict\n"),
        ("  digest: sha256:", "  signed: false\n  digest: sha256:"),
    ],
)
def test_an_unknown_key_anywhere_is_written_back_byte_for_byte(old: str, new: str) -> None:
    text = render(_example())
    assert text.count(old) == 1, old
    changed = text.replace(old, new)
    run, report = parse(changed, path="progress.md")
    assert len(report.unknown) == 1 and report.warnings == []
    assert render(run) == changed


def test_a_list_item_keeps_its_unknown_keys_by_its_identity_not_its_place() -> None:
    run = _example()
    run.in_flight.append(
        InFlight("call_8Zz", "count_lines", "report", 9, "2026-11-21T23:26:01Z", True)
    )
    text = render(run).replace(
        "idempotent: true}\n- {call_id: call_8Zz",
        "idempotent: true}\n- {note: kept, call_id: call_8Zz",
    )
    loaded, _ = parse(text, path="progress.md")
    del loaded.in_flight[0]  # the first call's result came: flow removes it
    loaded.in_flight.append(InFlight("call_new", "x", "report", 10, "2026-11-21T23:26:02Z", True))
    written = render(loaded)
    assert "- {note: kept, call_id: call_8Zz" in written  # moved to the front, its key with it
    assert "call_id: call_new, tool: x" in written and written.count("note: kept") == 1
