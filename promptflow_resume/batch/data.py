"""A batch's data set: rows of input values from a JSONL, CSV or YAML file.

Every row is checked against the workflow's inputs before anything runs; all the bad rows are
reported in one error that names each by its row number and line in the file::

    rows = load_rows(Path("cases.jsonl"))         # [DataRow(number=1, line=1, values={...})]
    typed = check_rows(workflow, rows, Path("cases.jsonl"))

Formats, by suffix: ``.jsonl``/``.ndjson`` (one JSON object per line; blank lines skipped),
``.csv`` (a header line of input names, then one line per row; every value is text, converted
to the input's type as ``--input`` would be), ``.yaml``/``.yml``/``.json`` (a list of mappings).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..base import yamlio
from ..base.errors import FileNotFoundFlowError, InputError
from ..base.jsonvalues import BadJson, field_path, loads_json
from ..workflow import resolve_inputs
from ..workflow.records import Workflow

#: How many bad rows one error lists before it says "and N more".
_LISTED = 10
_SUFFIXES = ".jsonl, .ndjson, .csv, .yaml, .yml or .json"


@dataclass(frozen=True)
class DataRow:
    """One row: its 1-based number, the line it starts on, and its raw values."""

    number: int
    line: int
    values: dict[str, Any]


def data_digest(path: Path) -> str:
    """``sha256:<hex>`` of the data file's bytes (a batch resumes only over the same data)."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _read(path: Path) -> str:
    if not path.is_file():
        raise FileNotFoundFlowError(
            f"the data file {path} does not exist.", path=path, hint="Check the path after --data."
        )
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(
            "the data file is not UTF-8 text.", path=path, hint="Save it as UTF-8."
        ) from None
    except OSError as exc:
        raise InputError(
            f"the data file cannot be read ({exc.strerror or exc}).", path=path
        ) from None


def _not_a_mapping(path: Path, number: int, line: int, value: Any) -> InputError:
    kind = type(value).__name__ if value is not None else "null"
    return InputError(
        f"row {number} is a {kind}, not a mapping of input names to values.",
        path=path,
        line=line,
        hint='Each row must be an object such as {"topic": "..."}.',
    )


def _jsonl(path: Path, text: str) -> list[DataRow]:
    rows: list[DataRow] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = loads_json(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"row {len(rows) + 1} is not valid JSON: {exc.msg}.",
                path=path,
                line=line_no,
                column=exc.colno,
                hint="Write one JSON object per line.",
            ) from None
        except BadJson as exc:
            raise InputError(
                f"row {len(rows) + 1} holds a value flow refuses: {exc.problem}.",
                path=path,
                line=line_no,
                column=exc.column,
                field=field_path(exc.parts) if exc.parts is not None else None,
                hint="Fix that row (nothing ran), then start the batch again.",
            ) from None
        if not isinstance(value, dict):
            raise _not_a_mapping(path, len(rows) + 1, line_no, value)
        rows.append(DataRow(len(rows) + 1, line_no, value))
    return rows


def _csv(path: Path, text: str) -> list[DataRow]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return []
    except csv.Error as exc:
        raise InputError(f"the CSV header cannot be read: {exc}.", path=path, line=1) from None
    names = [h.strip() for h in header]
    if not all(names) or len(set(names)) != len(names):
        raise InputError(
            "the CSV header must name each column once, with no empty name.",
            path=path,
            line=1,
            hint="The first line lists the input names, separated by commas.",
        )
    rows: list[DataRow] = []
    line = reader.line_num + 1
    try:
        for record in reader:
            if not any(cell.strip() for cell in record):
                line = reader.line_num + 1
                continue
            if len(record) != len(names):
                raise InputError(
                    f"row {len(rows) + 1} has {len(record)} values; the header names "
                    f"{len(names)} columns.",
                    path=path,
                    line=line,
                    hint="Quote values that contain commas with double quotes.",
                )
            rows.append(DataRow(len(rows) + 1, line, dict(zip(names, record, strict=True))))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(f"row {len(rows) + 1}: {exc}.", path=path, line=line) from None
    return rows


def _yaml(path: Path, text: str) -> list[DataRow]:
    data = yamlio.load(text, path=path) if text.strip() else []
    if data is None:
        data = []
    if not isinstance(data, list):
        raise InputError(
            "the data file must hold a list of rows (mappings of input names to values).",
            path=path,
            line=1,
            hint="Write each row as a `- name: value` item.",
        )
    node = yamlio.compose(text, path=path)
    lines = (
        [item.start_mark.line + 1 for item in node.value]
        if isinstance(node, yaml.SequenceNode)
        else [1] * len(data)
    )
    rows: list[DataRow] = []
    for number, (value, line) in enumerate(zip(data, lines, strict=False), start=1):
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _not_a_mapping(path, number, line, value)
        rows.append(DataRow(number, line, value))
    return rows


def load_rows(path: Path) -> list[DataRow]:
    """The rows of a data file, by its suffix; a malformed file is an ``InputError``."""
    suffix = path.suffix.lower()
    readers = {".jsonl": _jsonl, ".ndjson": _jsonl, ".csv": _csv}
    if suffix not in readers and suffix not in (".yaml", ".yml", ".json"):
        raise InputError(
            f"flow cannot tell the format of the data file {path.name}.",
            path=path,
            hint=f"Name it with one of the suffixes {_SUFFIXES}.",
        )
    text = _read(path)
    rows = readers.get(suffix, _yaml)(path, text)
    if not rows:
        raise InputError(
            "the data file has no rows.", path=path, hint="Add one row per run of the workflow."
        )
    return rows


def check_rows(workflow: Workflow, rows: list[DataRow], path: Path) -> list[dict[str, Any]]:
    """Each row's typed input values; one ``InputError`` lists every row that is wrong."""
    typed: list[dict[str, Any]] = []
    bad: list[tuple[DataRow, str]] = []
    for row in rows:
        given = {k: v for k, v in row.values.items() if not (isinstance(v, str) and v == "")}
        try:
            typed.append(resolve_inputs(workflow, given, ask=None))
        except InputError as exc:
            bad.append((row, exc.message))
    if bad:
        listed = "; ".join(
            f"row {r.number} (line {r.line}): {m.rstrip('.')}" for r, m in bad[:_LISTED]
        )
        more = f"; and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
        first = bad[0][0]
        raise InputError(
            f"{len(bad)} of {len(rows)} rows do not fit the inputs of {workflow.path.name}: "
            f"{listed}{more}",
            path=path,
            line=first.line,
            hint="Fix those rows (nothing ran), then start the batch again.",
        )
    return typed
