"""COCO reader: ``instances_<split>.json`` (+ ``captions_<split>.json``) via pycocotools.

The JSON is validated first (every error names the file and the field, such as
``annotations[3].category_id``), then indexed with :class:`pycocotools.coco.COCO`.
COCO boxes ``[x, y, w, h]`` are continuous pixel coordinates and become
``(x, y, x + w, y + h)``; see :mod:`fgclip.datasets.boxes` for the tolerance rule.
``segmentation`` is not read. Images keep the order of the instances file.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from pycocotools.coco import COCO

from ._files import find_image
from ._json import get_field, get_list, get_number, load_json_object
from .boxes import Box, check_box
from .errors import DatasetFormatError


@dataclass
class CocoObject:
    annotation_id: int
    category_id: int
    category: str
    box: Box  # continuous (x0, y0, x1, y1)
    area: float
    iscrowd: bool = False


@dataclass
class CocoRecord:
    image_id: int
    file_name: str
    image_path: Path
    width: int
    height: int
    objects: list[CocoObject] = field(default_factory=list)
    captions: list[str] = field(default_factory=list)

    @property
    def boxes(self) -> list[Box]:
        return [o.box for o in self.objects]

    @property
    def category_names(self) -> list[str]:
        return [o.category for o in self.objects]

    @property
    def labels(self) -> set[str]:
        return {o.category for o in self.objects}


def _index(data: dict) -> COCO:
    """A pycocotools COCO object over an already-loaded dict (its prints silenced)."""
    coco = COCO()
    coco.dataset = data
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def _check_images(data: dict, path: Path) -> None:
    seen: set[int] = set()
    for i, img in enumerate(get_list(data, "images", path)):
        where = f"images[{i}]"
        image_id = get_field(img, "id", int, path, where)
        get_field(img, "file_name", str, path, where)
        if min(get_number(img, "width", path, where), get_number(img, "height", path, where)) <= 0:
            raise DatasetFormatError(path, "non-positive image size", field=where)
        if image_id in seen:
            raise DatasetFormatError(path, f"duplicate image id {image_id}", field=f"{where}.id")
        seen.add(image_id)


def _check_instances(data: dict, path: Path, tolerance: float) -> dict[int, Box]:
    """Validate categories and annotations; return the checked box of every annotation id."""
    _check_images(data, path)
    sizes = {img["id"]: (img["width"], img["height"]) for img in data["images"]}
    cat_ids = set()
    for i, cat in enumerate(get_list(data, "categories", path)):
        cat_ids.add(get_field(cat, "id", int, path, f"categories[{i}]"))
        get_field(cat, "name", str, path, f"categories[{i}]")
    boxes: dict[int, Box] = {}
    for i, ann in enumerate(get_list(data, "annotations", path)):
        where = f"annotations[{i}]"
        ann_id = get_field(ann, "id", int, path, where)
        if ann_id in boxes:
            raise DatasetFormatError(path, f"duplicate annotation id {ann_id}", field=f"{where}.id")
        image_id = get_field(ann, "image_id", int, path, where)
        if image_id not in sizes:
            raise DatasetFormatError(path, f"image id {image_id} not in images",
                                     field=f"{where}.image_id")
        cat_id = get_field(ann, "category_id", int, path, where)
        if cat_id not in cat_ids:
            raise DatasetFormatError(path, f"category id {cat_id} not in categories",
                                     field=f"{where}.category_id")
        boxes[ann_id] = _bbox(ann, path, where, sizes[image_id], tolerance)
    return boxes


def _bbox(ann: dict, path: Path, where: str, size: tuple[float, float], tolerance: float) -> Box:
    bbox = get_field(ann, "bbox", list, path, where)
    if len(bbox) != 4:
        raise DatasetFormatError(path, f"expected 4 numbers, got {bbox!r}", field=f"{where}.bbox")
    for k, v in enumerate(bbox):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise DatasetFormatError(path, f"not a number: {v!r}", field=f"{where}.bbox[{k}]")
    x, y, w, h = (float(v) for v in bbox)
    return check_box((x, y, x + w, y + h), *size, path, f"{where}.bbox", tolerance)


def _object(ann: dict, box: Box, category: str) -> CocoObject:
    """A validated annotation; ``area`` falls back to the box area when absent."""
    area = ann.get("area", (box[2] - box[0]) * (box[3] - box[1]))
    return CocoObject(ann["id"], ann["category_id"], category, box, float(area),
                      bool(ann.get("iscrowd", 0)))


def _captions(captions_json: Path, image_ids: set[int]) -> dict[int, list[str]]:
    """Captions per image id, in file order; every caption's image must be known."""
    data = load_json_object(captions_json, "COCO captions file")
    out: dict[int, list[str]] = {}
    for i, ann in enumerate(get_list(data, "annotations", captions_json)):
        where = f"annotations[{i}]"
        get_field(ann, "id", int, captions_json, where)
        image_id = get_field(ann, "image_id", int, captions_json, where)
        if image_id not in image_ids:
            raise DatasetFormatError(captions_json, f"image id {image_id} not in the instances "
                                     "file's images", field=f"{where}.image_id")
        out.setdefault(image_id, []).append(get_field(ann, "caption", str, captions_json, where))
    return out


def read_coco(instances_json: str | os.PathLike, image_dir: str | os.PathLike,
              captions_json: str | os.PathLike | None = None, *, check_images: bool = True,
              box_tolerance: float = 1.0) -> list[CocoRecord]:
    """One record per image of ``instances_json``; captions joined from ``captions_json``."""
    path = Path(instances_json)
    data = load_json_object(path, "COCO instances file")
    boxes = _check_instances(data, path, box_tolerance)
    coco = _index(data)
    caps = _captions(Path(captions_json), set(coco.imgs)) if captions_json is not None else {}
    records = []
    for k, img in enumerate(data["images"]):
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[img["id"]], iscrowd=None))
        objects = [_object(a, boxes[a["id"]], coco.cats[a["category_id"]]["name"]) for a in anns]
        image = find_image(Path(image_dir), str(img["id"]), img["file_name"], check_images, path,
                           f"images[{k}].file_name")
        records.append(CocoRecord(img["id"], img["file_name"], image, int(img["width"]),
                                  int(img["height"]), objects, caps.get(img["id"], [])))
    return records


def read_coco_split(root: str | os.PathLike, split: str, *, captions: bool = True,
                    check_images: bool = True, box_tolerance: float = 1.0) -> list[CocoRecord]:
    """The standard layout: ``<root>/annotations/{instances,captions}_<split>.json`` and
    images under ``<root>/<split>/`` (e.g. ``split="val2017"`` on real COCO)."""
    root = Path(root)
    ann = root / "annotations"
    return read_coco(ann / f"instances_{split}.json", root / split,
                     ann / f"captions_{split}.json" if captions else None,
                     check_images=check_images, box_tolerance=box_tolerance)
