"""Pascal VOC reader: ``<root>/<year>/Annotations/<id>.xml`` listed by ``ImageSets/Main``.

Point ``root`` at a real ``VOCdevkit`` folder or at a toy-world export. Class names are
read as they appear (the 20 VOC classes are not assumed). Boxes follow the convention in
:mod:`fgclip.datasets.boxes`: VOC's 1-based inclusive ``xmin..xmax`` becomes the
continuous ``(xmin - 1, ymin - 1, xmax, ymax)``.

Required fields: ``size/width``, ``size/height``, and per object ``name`` and
``bndbox/{xmin,ymin,xmax,ymax}``. Optional fields and their defaults when absent:
``filename`` (``<id>.jpg``, else ``<id>.png`` if that exists), ``pose`` ("Unspecified"),
``truncated``/``difficult`` (0) and ``occluded`` (None: not annotated, as in VOC2007).

Why not torchvision's ``VOCDetection``: it reads only ``<root>/VOCdevkit/VOC20xx`` (a toy
export is ``<root>/VOC2007``) and the splits train/trainval/val/test, opens each image, and
hands back the XML as nested strings without checking a field, so a bad annotation fails
later or not at all. Where the two meet they agree: tests/test_voc_reference.py reads the
sample VOC2007 layout with both.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ._files import find_image, read_id_list
from ._xml import image_size, int_of, parse_xml, text_of, voc_box
from .boxes import Box
from .errors import DatasetFormatError


@dataclass
class VocObject:
    name: str
    box: Box  # continuous (x0, y0, x1, y1)
    pose: str = "Unspecified"
    truncated: bool = False
    difficult: bool = False
    occluded: bool | None = None


@dataclass
class VocRecord:
    image_id: str
    image_path: Path
    width: int
    height: int
    depth: int = 3
    objects: list[VocObject] = field(default_factory=list)

    @property
    def labels(self) -> set[str]:
        """The multi-label target: every class name present (difficult ones included)."""
        return {o.name for o in self.objects}


def _flag(obj: ET.Element, tag: str, path: Path, where: str) -> bool:
    value = int_of(obj, tag, path, where, default=0)
    if value not in (0, 1):
        raise DatasetFormatError(path, f"expected 0 or 1, got {value}", field=f"{where}/{tag}")
    return bool(value)


def _object(obj: ET.Element, path: Path, where: str, width: int, height: int,
            tolerance: float) -> VocObject:
    occluded = _flag(obj, "occluded", path, where) if obj.find("occluded") is not None else None
    pose = obj.findtext("pose", default="").strip() or "Unspecified"
    return VocObject(text_of(obj, "name", path, where), voc_box(obj, path, where, width, height,
                     tolerance), pose, _flag(obj, "truncated", path, where),
                     _flag(obj, "difficult", path, where), occluded)


def read_voc_annotation(xml_path: str | os.PathLike, image_dir: str | os.PathLike, *,
                        check_images: bool = True, box_tolerance: float = 1.0) -> VocRecord:
    """One VOC annotation file; the image id is the file's stem."""
    path = Path(xml_path)
    root = parse_xml(path)
    width, height, depth = image_size(root, path)
    filename = (root.findtext("filename") or "").strip() or None
    objects = [_object(o, path, f"object[{i}]", width, height, box_tolerance)
               for i, o in enumerate(root.findall("object"))]
    image = find_image(Path(image_dir), path.stem, filename, check_images, path, "filename")
    return VocRecord(path.stem, image, width, height, depth, objects)


def read_voc(root: str | os.PathLike, split: str, year: str = "VOC2007", *,
             check_images: bool = True, box_tolerance: float = 1.0) -> list[VocRecord]:
    """Every image of ``<root>/<year>/ImageSets/Main/<split>.txt``, in list order."""
    base = Path(root) / year
    ids = read_id_list(base / "ImageSets" / "Main" / f"{split}.txt", "image set list")
    return [read_voc_annotation(base / "Annotations" / f"{i}.xml", base / "JPEGImages",
                                check_images=check_images, box_tolerance=box_tolerance)
            for i in ids]


# VOC's class names are single tokens; a prompt or a word vector wants the words
READABLE_NAMES = {"diningtable": "dining table", "pottedplant": "potted plant", "tvmonitor": "tv monitor"}


def readable_class_name(name: str) -> str:
    """'pottedplant' -> 'potted plant': the words a text encoder or GloVe knows."""
    return READABLE_NAMES.get(name, name)
