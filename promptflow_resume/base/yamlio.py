"""The one place that knows how we read and write YAML.

Reading is always safe (no object construction) and uses libyaml's C loader when present,
which is about 7x faster than the pure-Python one. Writing keeps key order (``sort_keys=False``),
block style (except for ``OneLine``/``OneLineList`` values), unicode as is, and never wraps long
lines, so files diff cleanly::

    data = load(text, path="progress.md")
    text = dump({"flow_progress": 1, "status": "running"})

Documents that expand aliases into huge structures ("billion laughs") are refused: we count
alias uses while composing. So are values JSON has no room for (``.nan``, ``.inf``, integers
outside 64 bits: see ``jsonvalues``), each named by line, column and field path, and, with
``unique_keys=True`` (flow's own checkpoints), a key written twice in one mapping.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import InvalidFileError
from .jsonvalues import INT_MAX, INT_MIN, MAX_INT_CHARS, excerpt, field_path

try:  # libyaml is optional; the pure-Python classes behave the same, only slower.
    from yaml import CSafeDumper as _Dumper
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

#: Values a document may expand to once aliases are followed. flow writes no aliases, so only a
#: hand edit has any, and a few are fine; a small text that expands past this is an attack.
MAX_EXPANDED_NODES = 100_000
#: Collections nested deeper than this are refused before anything is built. No file flow reads
#: needs more than a few levels, and libyaml's composer recurses in C: a document nested some
#: 50,000 levels deep (100 KB of ``[``) would crash the process instead of raising an error.
MAX_DEPTH = 32


class YamlError(InvalidFileError):
    """A YAML document that cannot be read; carries the 1-based line and column."""


class _Refused(Exception):
    """A scalar or mapping the checked loader will not build (raised while constructing)."""

    def __init__(
        self,
        problem: str,
        node: yaml.Node,
        root: yaml.Node | None,
        hint: str,
        first: yaml.Node | None = None,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.node = node
        self.root = root
        self.hint = hint
        #: For a duplicate key: the key's first occurrence.
        self.first = first


class _CheckedLoader(_Loader):  # type: ignore[misc,valid-type]
    """The safe loader, refusing numbers JSON cannot hold (docs/spec.md 10.5).

    Only the float and int constructors and one length comparison per mapping are added, so
    loading costs what it did.
    """

    unique_keys = False
    _root: yaml.Node | None = None

    def construct_document(self, node: yaml.Node) -> Any:
        self._root = node
        return super().construct_document(node)

    def _refuse(
        self, problem: str, node: yaml.Node, hint: str, first: yaml.Node | None = None
    ) -> _Refused:
        return _Refused(problem, node, self._root, hint, first)

    def construct_checked_float(self, node: yaml.ScalarNode) -> float:
        value: float = self.construct_yaml_float(node)
        if value - value != 0.0:  # NaN or an infinity (.nan, .inf, -.inf, 1.0e+999)
            raise self._refuse(
                f"`{excerpt(str(node.value))}` is not allowed: a number must be a finite number "
                "(not NaN or an infinity)",
                node,
                "Write a finite number, or quote the value to keep it as text.",
            )
        return value

    def construct_checked_int(self, node: yaml.ScalarNode) -> int:
        text = str(node.value)
        value: int | None = None
        if len(text) <= MAX_INT_CHARS:
            try:
                value = self.construct_yaml_int(node)
            except ValueError:
                value = None
        if value is None or not INT_MIN <= value <= INT_MAX:
            raise self._refuse(
                f"the integer `{excerpt(text)}` is out of range: integers lie between -2^63 "
                "and 2^63-1",
                node,
                "Write a smaller number, or quote the value to keep it as text.",
            )
        return value

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        explicit = node.value  # flatten_mapping (merge keys) removes `<<` pairs from this list
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        if self.unique_keys and len(mapping) != len(node.value):
            seen: dict[Any, yaml.Node] = {}
            for key_node, _ in explicit:
                key = self.construct_object(key_node, deep=deep)
                first = seen.setdefault(key, key_node)
                if first is not key_node:
                    raise self._refuse(
                        f"the key `{excerpt(str(key))}` appears twice in one mapping",
                        key_node,
                        "Remove one of them (keep the value you mean); a checkpoint holds one "
                        "value per key.",
                        first,
                    )
        return mapping


class _UniqueKeysLoader(_CheckedLoader):
    """The checked loader that also refuses a key written twice in one mapping."""

    unique_keys = True


_CheckedLoader.add_constructor("tag:yaml.org,2002:float", _CheckedLoader.construct_checked_float)
_CheckedLoader.add_constructor("tag:yaml.org,2002:int", _CheckedLoader.construct_checked_int)


def _refused(err: _Refused, path: str | Path | None, line_offset: int) -> YamlError:
    """The positioned ``YamlError`` for a value the checked loader refused."""
    problem = err.problem
    if err.first is not None:
        first, second = err.first.start_mark.line, err.node.start_mark.line
        problem += f" (lines {first + 1 + line_offset} and {second + 1 + line_offset})"
    parts = _parts_to(err.root, err.node)
    return YamlError(
        problem + ".",
        path=path,
        line=err.node.start_mark.line + 1 + line_offset,
        column=err.node.start_mark.column + 1,
        field=field_path(parts) if parts is not None else None,
        hint=err.hint,
    )


def _parts_to(root: yaml.Node | None, target: yaml.Node) -> list[Any] | None:
    """The field path parts from ``root`` to ``target`` (a value or a mapping's key node)."""
    if root is None:
        return None
    stack: list[tuple[yaml.Node, list[Any]]] = [(root, [])]
    seen: set[int] = set()
    while stack:
        node, parts = stack.pop()
        if node is target:
            return parts
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node is target:
                    return [*parts, key_node.value]
                stack.append((value_node, [*parts, key_node.value]))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, [*parts, i]) for i, item in enumerate(node.value))
    return None


class _Str(str):
    """Marker type for strings that must be written as a literal block (``|``)."""


def _represent_str(dumper: Any, data: str) -> yaml.ScalarNode:
    block = "\n" in data and not any(c in data for c in "\r\t") and data[-1:] != " "
    style = "|" if block else None
    node: yaml.ScalarNode = dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)
    return node


class OneLine(dict):  # type: ignore[type-arg]
    """A mapping ``dump`` writes on one line (``{a: 1, b: 2}``), for short records."""


class OneLineList(list):  # type: ignore[type-arg]
    """A sequence ``dump`` writes on one line (``[a, b]``), for lists of words."""


class Quoted(str):
    """A string ``dump`` writes in the quotes it was read in (``'`` or ``"``): a value kept
    from a file flow does not otherwise write keeps its bytes."""

    __slots__ = ("style",)
    style: str

    def __new__(cls, value: str, style: str) -> Quoted:
        made = super().__new__(cls, value)
        made.style = style
        return made


def _represent_quoted(dumper: Any, data: Quoted) -> yaml.ScalarNode:
    node: yaml.ScalarNode = dumper.represent_scalar(
        "tag:yaml.org,2002:str", str(data), style=data.style
    )
    return node


def _represent_one_line(dumper: Any, data: dict[Any, Any]) -> yaml.MappingNode:
    node: yaml.MappingNode = dumper.represent_mapping(
        "tag:yaml.org,2002:map", data.items(), flow_style=True
    )
    return node


def _represent_one_line_list(dumper: Any, data: list[Any]) -> yaml.SequenceNode:
    node: yaml.SequenceNode = dumper.represent_sequence(
        "tag:yaml.org,2002:seq", data, flow_style=True
    )
    return node


class _FlowDumper(_Dumper):  # type: ignore[misc,valid-type]
    """Safe dumper with our string style and one-line records."""


_FlowDumper.add_representer(str, _represent_str)
_FlowDumper.add_representer(OneLine, _represent_one_line)
_FlowDumper.add_representer(OneLineList, _represent_one_line_list)
_FlowDumper.add_representer(Quoted, _represent_quoted)


def _error(err: yaml.YAMLError, text: str, path: str | Path | None, line_offset: int) -> YamlError:
    """One positioned, one-line ``YamlError`` for any error PyYAML raises on ``text``."""
    hint = "Fix the YAML syntax at that position (check indentation and quoting)."
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        return YamlError(
            f"invalid YAML: {err.problem or err.context or 'syntax error'}.",
            path=path,
            line=mark.line + 1 + line_offset if mark else None,
            column=mark.column + 1 if mark else None,
            hint=hint,
        )
    if isinstance(err, yaml.reader.ReaderError):
        # A character YAML does not allow (a control character). libyaml reports a byte
        # offset, the Python reader a character offset; the reader stops at the first such
        # character, so its first occurrence is the place either way.
        code = err.character if isinstance(err.character, int) else ord(str(err.character)[:1])
        at = max(text.find(chr(code)), 0)
        before = text[:at]
        return YamlError(
            f"invalid YAML: the character U+{code:04X} is not allowed in YAML.",
            path=path,
            line=before.count("\n") + 1 + line_offset,
            column=at - (before.rfind("\n") + 1) + 1,
            hint="Remove that character, or write it as an escape inside double quotes.",
        )
    return YamlError(f"invalid YAML: {' '.join(str(err).split())}.", path=path, hint=hint)


#: What PyYAML's constructors raise for a scalar that does not fit its type (``2026-13-45``,
#: ``!!int foo``, ``!!bool maybe``): not YAMLError, so it would escape as a crash.
_CONSTRUCT_ERRORS = (ValueError, TypeError, KeyError, AttributeError, OverflowError)


def _bad_value(err: Exception, text: str, path: str | Path | None, line_offset: int) -> YamlError:
    """A ``YamlError`` at the first scalar whose typed value cannot be built."""
    bad: yaml.ScalarNode | None = None
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        root = None
    loader = _Loader("")
    try:
        stack: list[yaml.Node] = [root] if root is not None else []
        seen: set[int] = set()
        while stack and bad is None:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.ScalarNode):
                try:
                    loader.construct_object(node, deep=True)
                except Exception:  # any failure marks the value we look for
                    bad = node
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(reversed(node.value))
            elif isinstance(node, yaml.MappingNode):
                for key, value in reversed(node.value):
                    stack.extend((value, key))
    finally:
        loader.dispose()
    detail = f" ({err})" if isinstance(err, (ValueError, OverflowError)) else ""
    if bad is None:
        return YamlError(f"invalid YAML: a value cannot be read as its type{detail}.", path=path)
    kind = str(bad.tag).rpartition(":")[2]
    return YamlError(
        f"invalid YAML: `{excerpt(str(bad.value))}` is not a valid {kind}{detail}.",
        path=path,
        line=bad.start_mark.line + 1 + line_offset,
        column=bad.start_mark.column + 1,
        hint="Correct the value, or quote it to keep it as text.",
    )


def _check_depth(text: str, path: str | Path | None, line_offset: int) -> None:
    """Refuse nesting deeper than ``MAX_DEPTH``, found by streaming parser events (no stack)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            kind = type(event)
            if kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(path, event.start_mark, line_offset)
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                depth -= 1
    except yaml.MarkedYAMLError as err:
        # libyaml 0.2.6 has a nesting limit of its own (1,000), met while it scans ahead in a
        # flow collection, before the parser hands over the events counted here.
        if "nesting depth" in str(err.problem):
            raise _too_deep(path, err.problem_mark, line_offset) from None
        return  # a syntax error: the load that follows reports it with its position
    except yaml.YAMLError:
        return


def _too_deep(path: str | Path | None, mark: Any, line_offset: int) -> YamlError:
    return YamlError(
        f"the YAML nests collections more than {MAX_DEPTH} levels deep; "
        "this is refused rather than read.",
        path=path,
        line=mark.line + 1 + line_offset if mark else None,
        column=mark.column + 1 if mark else None,
        hint="Flatten the structure; flow's own files nest a few levels at most.",
    )


def compose(text: str, *, path: str | Path | None = None, line_offset: int = 0) -> yaml.Node | None:
    """Compose ``text`` into a node graph (with marks), refusing alias bombs and deep nesting."""
    _check_depth(text, path, line_offset)
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as err:
        raise _error(err, text, path, line_offset) from None
    if node is not None:
        _check_graph(node, path, line_offset)
    return node


def _check_graph(root: yaml.Node, path: str | Path | None, line_offset: int) -> None:
    """Refuse aliases that expand to a huge value, nest too deeply, or refer to themselves.

    Text nesting is checked before composing; aliases can still stack shallow pieces into a
    deep or huge value (an alias bomb), and a value that contains itself can never be written
    as JSON or walked. One post-order walk measures each node once, however often aliased.
    """
    depth: dict[int, int] = {}
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if done:
            on_path.discard(id(node))
            depth[id(node)] = 1 + max((depth.get(id(c), 0) for c in children), default=0)
            size[id(node)] = 1 + sum(size.get(id(c), 1) for c in children)
            if size[id(node)] > MAX_EXPANDED_NODES:
                raise YamlError(
                    "the YAML uses aliases that expand to more than "
                    f"{MAX_EXPANDED_NODES:,} values; this looks like an alias bomb and is refused.",
                    path=path,
                    line=node.start_mark.line + 1 + line_offset,
                    column=node.start_mark.column + 1,
                    hint="Write the values out instead of using anchors (&) and aliases (*).",
                )
            if depth[id(node)] > MAX_DEPTH:
                raise YamlError(
                    f"the YAML's aliases build a value nested more than {MAX_DEPTH} levels "
                    "deep; this is refused rather than read.",
                    path=path,
                    line=node.start_mark.line + 1 + line_offset,
                    column=node.start_mark.column + 1,
                    hint="Write the values out instead of using anchors (&) and aliases (*).",
                )
            continue
        if id(node) in depth or not children:
            continue
        on_path.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise YamlError(
                    "the YAML has a value that refers to itself (an alias inside its own "
                    "anchor); it cannot be read.",
                    path=path,
                    line=child.start_mark.line + 1 + line_offset,
                    column=child.start_mark.column + 1,
                    hint="Remove the alias, or write the values out.",
                )
            if id(child) not in depth:
                stack.append((child, False))


def load(
    text: str,
    *,
    path: str | Path | None = None,
    line_offset: int = 0,
    unique_keys: bool = False,
) -> Any:
    """Parse one YAML document safely; errors carry ``path:line:col`` (1-based).

    Non-finite numbers and integers outside 64 bits are refused; with ``unique_keys``, so is a
    key written twice in one mapping (flow's checkpoints; elsewhere the last one wins, or the
    caller reports it with its own wording).
    """
    loader_class = _UniqueKeysLoader if unique_keys else _CheckedLoader
    if "&" in text or "*" in text:
        # Anchors are rare in our files; only then pay for the alias check on a node graph.
        node = compose(text, path=path, line_offset=line_offset)
        if node is None:
            return None
        loader = loader_class("")
        try:
            return loader.construct_document(node)
        except yaml.YAMLError as err:
            raise _error(err, text, path, line_offset) from None
        except _Refused as err:
            raise _refused(err, path, line_offset) from None
        except _CONSTRUCT_ERRORS as err:
            raise _bad_value(err, text, path, line_offset) from None
        finally:
            loader.dispose()
    _check_depth(text, path, line_offset)
    try:
        return yaml.load(text, Loader=loader_class)
    except yaml.YAMLError as err:
        raise _error(err, text, path, line_offset) from None
    except _Refused as err:
        raise _refused(err, path, line_offset) from None
    except _CONSTRUCT_ERRORS as err:
        raise _bad_value(err, text, path, line_offset) from None


def dump(data: Any) -> str:
    """Serialise ``data`` as block-style YAML with keys in the given order."""
    return yaml.dump(  # type: ignore[no-any-return]
        data,
        Dumper=_FlowDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=1_000_000,
    )
