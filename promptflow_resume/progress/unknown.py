"""Keys of a front matter this flow does not know: kept as read, written back where they were.

A later flow may add optional keys anywhere in the front matter without a new format number
(docs/spec.md 2.5). Reading splits them off before the schema check (``split``), so the run is
read as this flow knows it, and keeps them on the run (``Run.kept``); writing puts them back
(``merge``) into the same mapping, after the same key, in the YAML style they were read in (a
one-line record stays on one line), so every part of a newer flow's file that this flow did not
change keeps its bytes. A list item is the same item while its identifying fields are the same
(an attempt's ``n``, a call's ``call_id``: ``ITEM_KEYS``); an item flow removed takes its
unknown keys with it, and a new item has none::

    known, kept = split(data, source=front_matter_text)   # kept is None: nothing unknown
    out = merge(front_matter_dict, kept)
"""

from __future__ import annotations

from typing import Any

import yaml

from ..base import yamlio
from ..base.jsonvalues import field_path
from ..base.yamlio import OneLine, OneLineList, Quoted
from .model import Kept, Location, Unknown
from .schema import load_schema
from .versions import FORMAT_MINOR, MIN_FLOW, version_tuple

#: The fields that identify an item of each list of records, by the list's place (``*``: any
#: item of the list above). A list of records missing here is matched by position.
ITEM_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("in_flight",): ("call_id",),
    ("hooks", "open"): ("event", "key"),
    ("hooks", "open", "*", "ran"): ("hook",),
    ("attempts",): ("n",),
    ("attempts", "*", "refused"): ("model",),
    ("snapshots", "calls"): ("entry", "call"),
    ("approvals",): ("call_id",),
    ("workflow", "handoffs", "parts"): ("step",),
}


def _resolve(node: Any) -> dict[str, Any]:
    """``node`` with its ``$ref`` (into ``$defs``) followed."""
    while isinstance(node, dict) and "$ref" in node:
        name = str(node["$ref"]).rpartition("/")[2]
        node = load_schema("progress")["$defs"][name]
    return node if isinstance(node, dict) else {}


def _pattern(location: Location) -> tuple[str, ...]:
    return tuple("*" if isinstance(part, tuple) else str(part) for part in location)


def _identity(location: Location, items: list[Any], index: int) -> tuple[Any, ...]:
    """The location part of ``items[index]``: its identifying values and which of the items
    with those values it is (0 for the first)."""
    keys = ITEM_KEYS.get(_pattern(location))
    if keys is None:
        return ("#", index, 0)

    def ident(item: Any) -> tuple[Any, ...]:
        if not isinstance(item, dict):
            return ()
        return tuple(_hashable(item.get(k)) for k in keys)

    mine = ident(items[index])
    nth = sum(1 for other in items[:index] if ident(other) == mine)
    return ("#", mine, nth)


def _hashable(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return repr(value)
    return value


class _Splitter:
    """One walk of a front matter beside the schema, collecting unknown keys."""

    def __init__(self) -> None:
        self.found: list[tuple[Location, list[Any], Unknown]] = []

    def walk(self, value: Any, node: Any, location: Location, parts: list[Any]) -> Any:
        node = _resolve(node)
        if isinstance(value, dict):
            props = node.get("properties")
            more = node.get("additionalProperties", True)
            if isinstance(props, dict) and more is False:
                extra = [k for k in value if k not in props]
                if extra:
                    self.found.append(
                        (
                            location,
                            parts,
                            Unknown(tuple((k, value[k]) for k in extra), tuple(value)),
                        )
                    )
                out = {}
                for key, item in value.items():
                    if key in props:
                        out[key] = self.walk(item, props[key], (*location, key), [*parts, key])
                return out
            if isinstance(more, dict):
                props = props if isinstance(props, dict) else {}
                return {
                    key: self.walk(item, props.get(key, more), (*location, key), [*parts, key])
                    for key, item in value.items()
                }
            return value
        if isinstance(value, list) and isinstance(node.get("items"), dict):
            return [
                self.walk(
                    item,
                    node["items"],
                    (*location, _identity(location, value, i)),
                    [*parts, i],
                )
                for i, item in enumerate(value)
            ]
        return value


def _styled(value: Any, node: yaml.Node | None) -> Any:
    """``value`` with each collection the YAML ``node`` wrote on one line as ``OneLine``/
    ``OneLineList``, so it is written back as it was read."""
    if isinstance(value, dict) and isinstance(node, yaml.MappingNode):
        by_key = {str(k.value): v for k, v in node.value}
        items = {k: _styled(v, by_key.get(str(k))) for k, v in value.items()}
        return OneLine(items) if node.flow_style else items
    if isinstance(value, list) and isinstance(node, yaml.SequenceNode):
        styled = [_styled(v, n) for v, n in zip(value, node.value, strict=False)]
        return OneLineList(styled) if node.flow_style else styled
    if isinstance(value, str) and isinstance(node, yaml.ScalarNode) and node.style in ("'", '"'):
        return Quoted(value, node.style)
    return value


def _node(root: yaml.Node | None, parts: list[Any]) -> yaml.Node | None:
    node = root
    for part in parts:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if str(k.value) == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            node = node.value[part] if part < len(node.value) else None
        else:
            return None
    return node


def split(data: dict[str, Any], *, source: str | None = None) -> tuple[dict[str, Any], Kept | None]:
    """``data`` without the keys this flow does not know, and what to keep of it (None when
    the file holds nothing beyond what this flow writes). ``source``, the YAML text of
    ``data``, gives the unknown values their YAML style back."""
    walker = _Splitter()
    known = walker.walk(data, load_schema("progress"), (), [])
    if not walker.found:
        return known, newer_only(data)
    root: yaml.Node | None = None
    if source is not None:
        try:
            root = yamlio.compose(source)
        except Exception:  # styles are a courtesy: the values stand without them
            root = None
    mappings: list[tuple[Location, Unknown]] = []
    paths: list[str] = []
    for location, parts, unknown in walker.found:
        values = unknown.values
        if root is not None:
            mapping = _node(root, parts)
            values = tuple((k, _styled(v, _node(mapping, [k]))) for k, v in values)
        mappings.append((location, Unknown(values, unknown.order)))
        paths.extend(field_path([*parts, k]) for k, _ in values)
    newer = newer_only(data) or Kept()
    return known, Kept(newer.minor, newer.min_flow, tuple(mappings), tuple(paths))


def newer_only(data: dict[str, Any]) -> Kept | None:
    """What to keep of a front matter with no unknown keys: its minor and ``min_flow`` where
    they are newer than this flow's (None when neither is)."""
    minor = data.get("flow_progress_minor")
    min_flow = data.get("min_flow")
    newer_minor = isinstance(minor, int) and not isinstance(minor, bool) and minor > FORMAT_MINOR
    newer_min = isinstance(min_flow, str) and _newer(min_flow, MIN_FLOW)
    if not newer_minor and not newer_min:
        return None
    return Kept(
        minor=minor if newer_minor else FORMAT_MINOR,  # type: ignore[arg-type]
        min_flow=min_flow if newer_min else MIN_FLOW,  # type: ignore[arg-type]
    )


def _newer(version: str, than: str) -> bool:
    try:
        return version_tuple(version) > version_tuple(than)
    except ValueError:
        return False


def _with_unknown(target: dict[str, Any], unknown: Unknown) -> dict[str, Any]:
    """``target`` with the unknown keys inserted where they were read."""
    values = dict(unknown.values)
    keys = [k for k in target if k not in values]
    for position, key in enumerate(unknown.order):
        if key not in values:
            continue
        before = [k for k in unknown.order[:position] if k in keys]
        at = keys.index(before[-1]) + 1 if before else 0
        keys.insert(at, key)
    merged = {k: values[k] if k in values else target[k] for k in keys}
    return OneLine(merged) if isinstance(target, OneLine) else merged


def merge(out: dict[str, Any], kept: Kept | None) -> dict[str, Any]:
    """``out`` (a front matter this flow built) with ``kept``'s unknown keys put back where
    they were; mappings that are gone take theirs with them."""
    if kept is None or not kept.mappings:
        return out
    for location, unknown in kept.mappings:
        if not location:
            out = _with_unknown(out, unknown)
            continue
        parent: Any = out
        place: Location = ()
        found: tuple[Any, Any] | None = None
        for part in location:
            if found is not None:
                parent = found[1]
            found = _find_item(parent, part, place)
            if found is None:
                break
            place = (*place, part)
        if found is None or not isinstance(found[1], dict):
            continue
        parent[found[0]] = _with_unknown(found[1], unknown)
    return out


def _find_item(container: Any, part: Any, location: Location) -> tuple[Any, Any] | None:
    """The key or index of ``part`` (a key, or a list item's identity) in ``container`` at
    ``location``, and the value there; None when it is not there."""
    if isinstance(part, tuple):
        if not isinstance(container, list):
            return None
        for index in range(len(container)):
            if _identity(location, container, index) == part:
                return index, container[index]
        return None
    if isinstance(container, dict) and part in container:
        return part, container[part]
    return None
