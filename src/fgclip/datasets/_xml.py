"""Small helpers for the PASCAL-style XML files of VOC and Flickr30K Entities.

xml.etree keeps no line numbers for elements, so errors name the *field* as a path such
as ``object[2]/bndbox/xmin`` (objects counted from 0 in file order); a file that is not
well-formed XML gets the parser's line number.
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from .boxes import Box, check_box, voc_to_xyxy
from ._files import require_file
from .errors import DatasetFormatError


def parse_xml(path: str | os.PathLike, root_tag: str = "annotation") -> ET.Element:
    """Parse an XML file whose root element is ``root_tag``."""
    path = require_file(path, "annotation XML file")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise DatasetFormatError(path, f"not well-formed XML: {e}", line=e.position[0]) from e
    if root.tag != root_tag:
        raise DatasetFormatError(path, f"root element is <{root.tag}>, expected <{root_tag}>")
    return root


def text_of(elem: ET.Element, tag: str, path: Path, where: str) -> str:
    """The stripped text of the required child ``tag`` of ``elem``."""
    child = elem.find(tag)
    field = f"{where}/{tag}" if where else tag
    if child is None or child.text is None or not child.text.strip():
        raise DatasetFormatError(path, "missing or empty field", field=field)
    return child.text.strip()


def number_of(elem: ET.Element, tag: str, path: Path, where: str) -> float:
    """The required child ``tag`` of ``elem`` as a float."""
    text = text_of(elem, tag, path, where)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        field = f"{where}/{tag}" if where else tag
        raise DatasetFormatError(path, f"not a number: {text!r}", field=field)
    return value


def int_of(elem: ET.Element, tag: str, path: Path, where: str,
           default: int | None = None) -> int:
    """The child ``tag`` as an int; ``default`` when the child is absent (None: required)."""
    if default is not None and elem.find(tag) is None:
        return default
    value = number_of(elem, tag, path, where)
    if value != int(value):
        raise DatasetFormatError(path, f"not an integer: {value}", field=f"{where}/{tag}")
    return int(value)


def image_size(root: ET.Element, path: Path) -> tuple[int, int, int]:
    """(width, height, depth) from ``<size>``; depth defaults to 3 when absent."""
    size = root.find("size")
    if size is None:
        raise DatasetFormatError(path, "missing field", field="size")
    width, height = int_of(size, "width", path, "size"), int_of(size, "height", path, "size")
    if width <= 0 or height <= 0:
        raise DatasetFormatError(path, f"non-positive image size {width}x{height}", field="size")
    return width, height, int_of(size, "depth", path, "size", default=3)


def voc_box(obj: ET.Element, path: Path, where: str, width: int, height: int,
            tolerance: float) -> Box:
    """The ``<bndbox>`` of ``obj`` (1-based inclusive) as a checked continuous box."""
    bb = obj.find("bndbox")
    if bb is None:
        raise DatasetFormatError(path, "missing field", field=f"{where}/bndbox")
    w = f"{where}/bndbox"
    coords = [number_of(bb, tag, path, w) for tag in ("xmin", "ymin", "xmax", "ymax")]
    return check_box(voc_to_xyxy(*coords), width, height, path, w, tolerance)
