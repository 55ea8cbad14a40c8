"""Small value parsers shared by the workflow loader: byte sizes, typed values.

Each parser raises ``ValueError`` with a message that completes the sentence "... must be";
callers attach the file position and field path::

    parse_size("64KiB")         # 65536
    coerce_value("3", "integer")  # 3
"""

from __future__ import annotations

import math
import re
from typing import Any

_SIZE = re.compile(r"^\s*(\d+)\s*(B|KB|KIB|MB|MIB|GB|GIB)?\s*$", re.IGNORECASE)
_SIZE_FACTOR = {
    "B": 1,
    "KB": 1000,
    "KIB": 1024,
    "MB": 1000**2,
    "MIB": 1024**2,
    "GB": 1000**3,
    "GIB": 1024**3,
}

SIZE_HINT = "a number of bytes or a size such as 64KiB or 1MB"

_TRUE = {"true", "yes", "y", "on", "1"}
_FALSE = {"false", "no", "n", "off", "0"}


def parse_size(value: Any) -> int:
    """Bytes from an integer or a string such as ``65536``, ``64KiB``, ``1MB``."""
    if isinstance(value, bool):
        raise ValueError(SIZE_HINT)
    if isinstance(value, int):
        size = value
    elif isinstance(value, str) and (match := _SIZE.match(value)):
        size = int(match.group(1)) * _SIZE_FACTOR[(match.group(2) or "B").upper()]
    else:
        raise ValueError(SIZE_HINT)
    if size <= 0:
        raise ValueError(f"{SIZE_HINT}, greater than zero")
    return size


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def type_name(value: Any) -> str:
    """The YAML-ish name of a Python value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def coerce_value(value: Any, type_: str) -> Any:
    """Convert ``value`` to ``type_`` (string, integer, number, boolean, list).

    Strings (from ``--input name=value`` or a terminal) are parsed; other values (from an
    inputs file or a default) must already have the type, except that an integer is a number.
    """
    if isinstance(value, str):
        return _parse_text(value, type_)
    if type_ == "string":
        raise ValueError(f"a string, not {type_name(value)} (quote it: '{value}')")
    if type_ == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"an integer, not {type_name(value)} {value!r}")
    if type_ == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"a finite number, not {value!r}")
            return value
        raise ValueError(f"a number, not {type_name(value)} {value!r}")
    if type_ == "boolean":
        if isinstance(value, bool):
            return value
        raise ValueError(f"true or false, not {type_name(value)} {value!r}")
    if type_ == "list":
        if isinstance(value, (list, tuple)):
            return list(value)
        raise ValueError(f"a list, not {type_name(value)} {value!r}")
    raise ValueError(f"of a known type, not {type_!r}")


def _parse_text(text: str, type_: str) -> Any:
    stripped = text.strip()
    if type_ == "string":
        return text
    if type_ == "integer":
        try:
            return int(stripped.replace("_", ""))
        except ValueError:
            raise ValueError(f"an integer, such as 3 (got {text!r})") from None
    if type_ == "number":
        try:
            number = float(stripped)
        except ValueError:
            raise ValueError(f"a number, such as 0.5 (got {text!r})") from None
        if not math.isfinite(number):
            raise ValueError(f"a finite number (got {text!r})")
        return int(number) if stripped.lstrip("+-").isdigit() else number
    if type_ == "boolean":
        lowered = stripped.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(f"true or false (also yes/no, on/off, 1/0), not {text!r}")
    if type_ == "list":
        # Comma-separated on the command line; a JSON-style [a, b] list is read as such.
        if stripped.startswith("[") and stripped.endswith("]"):
            stripped = stripped[1:-1]
        if not stripped:
            return []
        return [item.strip().strip("'\"") for item in stripped.split(",")]
    raise ValueError(f"of a known type, not {type_!r}")


def value_text(value: Any) -> str:
    """How a typed value is written into a prompt: lists joined by ", ", booleans lower-case."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(value_text(item) for item in value)
    return str(value)
