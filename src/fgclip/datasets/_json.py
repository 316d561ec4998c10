"""Loading JSON annotation files with errors that name the file and the field.

The json module gives a line number only for syntax errors; structural problems are
reported by field path, e.g. ``annotations[3].bbox``.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ._files import require_file
from .errors import DatasetFormatError


def load_json_object(path: str | os.PathLike, what: str = "JSON file") -> dict[str, Any]:
    """Parse a JSON file whose top level is an object."""
    path = require_file(path, what)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DatasetFormatError(path, f"invalid JSON: {e.msg}", line=e.lineno) from e
    if not isinstance(data, dict):
        raise DatasetFormatError(path, "top level is not a JSON object")
    return data


def get_list(data: dict, key: str, path: Path) -> list[dict]:
    """``data[key]``, which must be a list of objects."""
    value = data.get(key)
    if not isinstance(value, list):
        raise DatasetFormatError(path, "missing or not a list", field=key)
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise DatasetFormatError(path, "not an object", field=f"{key}[{i}]")
    return value


def get_field(item: dict, key: str, kind: type | tuple[type, ...], path: Path,
              where: str) -> Any:
    """``item[key]``, required and of type ``kind`` (bool never passes for a number)."""
    if key not in item:
        raise DatasetFormatError(path, "missing field", field=f"{where}.{key}")
    value = item[key]
    is_number = kind in (int, float) or (isinstance(kind, tuple) and int in kind)
    if not isinstance(value, kind) or (is_number and isinstance(value, bool)):
        raise DatasetFormatError(path, f"expected {_kind_name(kind)}, got {value!r}",
                                 field=f"{where}.{key}")
    return value


def get_number(item: dict, key: str, path: Path, where: str) -> float:
    """A required finite number."""
    value = get_field(item, key, (int, float), path, where)
    if not math.isfinite(value):
        raise DatasetFormatError(path, f"not a finite number: {value!r}", field=f"{where}.{key}")
    return float(value)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
