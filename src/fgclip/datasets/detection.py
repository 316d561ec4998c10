"""One view of a detection split, whichever format it was exported in (COCO or VOC)."""
from __future__ import annotations

import os
from pathlib import Path

from .boxes import Box
from .coco import read_coco_split
from .voc import read_voc

FORMATS = ("coco", "voc")


def read_detection_split(root: str | os.PathLike, split: str, fmt: str, year: str = "VOC2007",
                         ) -> tuple[list[Path], list[list[tuple[str, Box]]], list[tuple[int, int]]]:
    """(image paths, [(category, box)] per image, (height, width) per image) of ``split``.

    ``fmt='coco'`` reads ``<root>/annotations/instances_<split>.json`` with pycocotools;
    ``fmt='voc'`` reads ``<root>/<year>/ImageSets/Main/<split>.txt`` (VOC2007 or VOC2012)
    and its XML files.
    """
    if fmt == "coco":
        records = read_coco_split(root, split, captions=False)
        objects = [[(o.category, o.box) for o in r.objects] for r in records]
    elif fmt == "voc":
        records = read_voc(root, split, year)
        objects = [[(o.name, o.box) for o in r.objects] for r in records]
    else:
        raise ValueError(f"data_format must be one of {FORMATS}, got {fmt!r}")
    return [r.image_path for r in records], objects, [(r.height, r.width) for r in records]
