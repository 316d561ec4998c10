"""Write toy scenes in the real datasets' own file formats.

Each exporter writes one split of one format under ``root``; images are PNG files written
with PIL, and every file is written atomically (temporary file in the same directory,
then ``os.replace``). The layouts, and the readers in :mod:`fgclip.datasets` that read
them back (and read the real datasets):

- COCO: ``annotations/instances_<split>.json``, ``annotations/captions_<split>.json``,
  images ``<split>/<id:012d>.png``; plus ``toyworld.json`` (seed, config, base/novel split,
  open vocabulary) which real COCO lacks and no reader requires.
- Flickr30K Entities: ``Sentences/<id>.txt``, ``Annotations/<id>.xml``,
  ``flickr30k-images/<id>.png``, ``<split>.txt``. Every entity has type ``shape``; entity
  ``k + 1`` is object ``k`` of its image.
- FOIL-COCO: ``foil_<split>.json``, images ``<split>/<id:012d>.png``.
- Pascal VOC: ``VOC2007/Annotations/<id>.xml``, ``VOC2007/JPEGImages/<id>.png``,
  ``VOC2007/ImageSets/Main/<split>.txt``.

Box conventions: toy boxes ``(x0, y0, x1, y1)`` are continuous pixel edges with integral
corners. COCO gets ``[x0, y0, x1 - x0, y1 - y0]``; VOC and Flickr30K Entities get 1-based
inclusive pixel indices ``xmin = x0 + 1, xmax = x1`` (see :mod:`fgclip.datasets.boxes`).
"""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..fileio import atomic_write_json, atomic_write_png, atomic_write_text
from .scene import Caption, Scene, ToyWorldConfig
from .shapes import SHAPES
from .world import CategorySplit, category_split, generate, open_vocabulary

FORMATS = ("coco", "flickr30k_entities", "foil", "voc")
COCO_CATEGORIES = tuple(SHAPES)  # category id = 1 + index, fixed for every config
VOC_YEAR = "VOC2007"


def _coco_file_name(scene: Scene) -> str:
    return f"{scene.image_id:012d}.png"


def _coco_image(scene: Scene) -> dict:
    h, w = scene.image.shape[:2]
    return {"id": scene.image_id, "file_name": _coco_file_name(scene), "width": w, "height": h}


def _write_images(scenes: Iterable[Scene], folder: Path, name: Callable[[Scene], str]) -> None:
    for scene in scenes:
        atomic_write_png(folder / name(scene), scene.image)


# ----------------------------------------------------------------------------- COCO
def _coco_annotations(scenes: Sequence[Scene]) -> list[dict]:
    anns = []
    for scene in scenes:
        for obj in scene.objects:
            x0, y0, x1, y1 = obj.box
            anns.append({
                "id": len(anns) + 1, "image_id": scene.image_id,
                "category_id": COCO_CATEGORIES.index(obj.category) + 1,
                "bbox": [x0, y0, x1 - x0, y1 - y0], "area": obj.area, "iscrowd": 0,
                "segmentation": [[x0, y0, x1, y0, x1, y1, x0, y1]],  # the box as a polygon
                "attributes": {"color": obj.color, "size": obj.size,
                               "visible_fraction": obj.visible_fraction},
            })
    return anns


def _coco_captions(scenes: Sequence[Scene]) -> list[dict]:
    anns = []
    for scene in scenes:
        for cap in scene.captions:
            anns.append({"id": len(anns) + 1, "image_id": scene.image_id, "caption": cap.text})
    return anns


def export_coco(scenes: Sequence[Scene], root: str | os.PathLike, split: str,
                cfg: ToyWorldConfig, seed: int) -> Path:
    """COCO instances + captions for one split, its images, and ``toyworld.json``."""
    root = Path(root)
    info = {"description": "fgclip toy world", "version": "1.0", "year": 2024}
    base = {"info": info, "licenses": [], "images": [_coco_image(s) for s in scenes]}
    cats = [{"id": i + 1, "name": n, "supercategory": "shape"}
            for i, n in enumerate(COCO_CATEGORIES)]
    atomic_write_json(root / "annotations" / f"instances_{split}.json",
                      {**base, "annotations": _coco_annotations(scenes), "categories": cats})
    atomic_write_json(root / "annotations" / f"captions_{split}.json",
                      {**base, "annotations": _coco_captions(scenes)})
    _write_images(scenes, root / split, _coco_file_name)
    write_toyworld_meta(root, cfg, seed)
    return root


def default_category_split(cfg: ToyWorldConfig) -> CategorySplit:
    """The base/novel split recorded with an export: 4 novel categories (fewer if few exist)."""
    return category_split(cfg.categories, n_novel=min(4, len(cfg.categories) - 1))


def write_toyworld_meta(root: str | os.PathLike, cfg: ToyWorldConfig, seed: int) -> Path:
    """Write ``<root>/toyworld.json``; refuse to mix two toy worlds in one folder."""
    path = Path(root) / "toyworld.json"
    split = default_category_split(cfg)
    meta = {"seed": seed, "config": json.loads(json.dumps(cfg.to_dict())),
            "categories": list(COCO_CATEGORIES),
            "category_split": {"base": list(split.base), "novel": list(split.novel)},
            "open_vocabulary": open_vocabulary(cfg.categories)}
    old = load_toyworld_meta(root)
    if old is not None and (old.get("seed"), old.get("config")) != (seed, meta["config"]):
        raise ValueError(f"{path} describes another toy world (seed {old.get('seed')}, other "
                         "config); export to an empty folder")
    return atomic_write_json(path, meta, indent=1)


def load_toyworld_meta(root: str | os.PathLike) -> dict | None:
    """The contents of ``<root>/toyworld.json``, or None when absent (real data)."""
    path = Path(root) / "toyworld.json"
    return json.loads(path.read_text()) if path.is_file() else None


def config_from_dict(d: dict) -> ToyWorldConfig:
    """Rebuild a ToyWorldConfig from its JSON form (lists back to tuples)."""
    return ToyWorldConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


# ----------------------------------------------------------------- Flickr30K Entities
def _entity_ids(scene: Scene) -> dict[tuple[int, ...], int]:
    """Entity id per set of object ids: ``k + 1`` for object k, then one per group phrase."""
    ids = {(o.object_id,): o.object_id + 1 for o in scene.objects}
    for cap in scene.captions:
        for ph in cap.phrases:
            key = tuple(sorted(ph.object_ids))
            ids.setdefault(key, len(ids) + 1)
    return ids


def flickr_sentence(caption: Caption, entity_ids: dict[tuple[int, ...], int]) -> str:
    """A caption with ``[/EN#<id>/shape ...]`` markup around each phrase."""
    words = caption.text.split()
    for ph in sorted(caption.phrases, key=lambda p: -p.first_word):  # right to left
        eid = entity_ids[tuple(sorted(ph.object_ids))]
        words[ph.last_word] += "]"
        words[ph.first_word] = f"[/EN#{eid}/shape {words[ph.first_word]}"
    return " ".join(words)


def _xml_text(parent: ET.Element, tag: str, text: object) -> ET.Element:
    el = ET.SubElement(parent, tag)
    el.text = str(text)
    return el


def _xml_header(scene: Scene, folder: str, file_name: str) -> ET.Element:
    root = ET.Element("annotation")
    _xml_text(root, "folder", folder)
    _xml_text(root, "filename", file_name)
    size = ET.SubElement(root, "size")
    h, w, d = scene.image.shape
    for tag, v in (("width", w), ("height", h), ("depth", d)):
        _xml_text(size, tag, v)
    return root


def _xml_bndbox(parent: ET.Element, box: tuple[float, float, float, float]) -> None:
    bb = ET.SubElement(parent, "bndbox")
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    for tag, v in (("xmin", x0 + 1), ("ymin", y0 + 1), ("xmax", x1), ("ymax", y1)):
        _xml_text(bb, tag, v)


def _xml_string(root: ET.Element) -> str:
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def flickr_annotation_xml(scene: Scene, entity_ids: dict[tuple[int, ...], int]) -> str:
    """One ``<object>`` per toy object, named by every entity that includes it."""
    root = _xml_header(scene, "flickr30k-images", f"{scene.image_id}.png")
    for obj in scene.objects:
        obj_el = ET.SubElement(root, "object")
        for key, eid in sorted(entity_ids.items(), key=lambda kv: kv[1]):
            if obj.object_id in key:
                _xml_text(obj_el, "name", eid)
        _xml_bndbox(obj_el, obj.box)
    return _xml_string(root)


def export_flickr30k_entities(scenes: Sequence[Scene], root: str | os.PathLike,
                              split: str) -> Path:
    """Sentences, Annotations, images and the split list for one split."""
    root = Path(root)
    for scene in scenes:
        ids = _entity_ids(scene)
        lines = [flickr_sentence(c, ids) for c in scene.captions]
        atomic_write_text(root / "Sentences" / f"{scene.image_id}.txt", "\n".join(lines) + "\n")
        atomic_write_text(root / "Annotations" / f"{scene.image_id}.xml",
                          flickr_annotation_xml(scene, ids))
    _write_images(scenes, root / "flickr30k-images", lambda s: f"{s.image_id}.png")
    atomic_write_text(root / f"{split}.txt", "".join(f"{s.image_id}\n" for s in scenes))
    return root


# ------------------------------------------------------------------------- FOIL-COCO
def _foil_annotations(scenes: Sequence[Scene]) -> list[dict]:
    """FOIL v1.0 entries: each foiled caption's original once (words "ORIG"), then its
    foils; an original and its foils share the caption ``id``, ``foil_id`` is unique."""
    anns: list[dict] = []
    caption_ids: dict[tuple[int, int], int] = {}
    for scene in scenes:
        for foil in scene.foils:
            key = (scene.image_id, foil.caption_index)
            if key not in caption_ids:
                caption_ids[key] = len(caption_ids) + 1
                anns.append({"id": caption_ids[key], "image_id": scene.image_id,
                             "caption": scene.captions[foil.caption_index].text, "foil": False,
                             "target_word": "ORIG", "foil_word": "ORIG", "foil_id": len(anns) + 1,
                             "foil_type": foil.foil_type})
            anns.append({"id": caption_ids[key], "image_id": scene.image_id, "caption": foil.text,
                         "foil": True, "target_word": foil.target_word, "foil_word": foil.foil_word,
                         "foil_id": len(anns) + 1, "foil_type": foil.foil_type})
    return anns


def export_foil(scenes: Sequence[Scene], root: str | os.PathLike, split: str) -> Path:
    """``foil_<split>.json`` and the split's images."""
    root = Path(root)
    data = {"info": {"description": "fgclip toy world FOIL"},
            "images": [_coco_image(s) for s in scenes], "annotations": _foil_annotations(scenes)}
    atomic_write_json(root / f"foil_{split}.json", data)
    _write_images(scenes, root / split, _coco_file_name)
    return root


# ------------------------------------------------------------------------ Pascal VOC
def voc_image_id(scene: Scene) -> str:
    return f"{scene.image_id:06d}"


def voc_annotation_xml(scene: Scene) -> str:
    """VOC XML; toy objects never cross the border (truncated 0) but may be occluded."""
    root = _xml_header(scene, VOC_YEAR, f"{voc_image_id(scene)}.png")
    _xml_text(root, "segmented", 0)
    for obj in scene.objects:
        el = ET.SubElement(root, "object")
        for tag, v in (("name", obj.category), ("pose", "Unspecified"), ("truncated", 0),
                       ("occluded", int(obj.visible_fraction < 1.0)), ("difficult", 0)):
            _xml_text(el, tag, v)
        _xml_bndbox(el, obj.box)
    return _xml_string(root)


def export_voc(scenes: Sequence[Scene], root: str | os.PathLike, split: str) -> Path:
    """Annotations, images and ``ImageSets/Main/<split>.txt`` under ``<root>/VOC2007``."""
    base = Path(root) / VOC_YEAR
    for scene in scenes:
        atomic_write_text(base / "Annotations" / f"{voc_image_id(scene)}.xml",
                          voc_annotation_xml(scene))
    _write_images(scenes, base / "JPEGImages", lambda s: f"{voc_image_id(s)}.png")
    atomic_write_text(base / "ImageSets" / "Main" / f"{split}.txt",
                      "".join(f"{voc_image_id(s)}\n" for s in scenes))
    return Path(root)


# ------------------------------------------------------------------------------- all
def export_all(cfg: ToyWorldConfig, root: str | os.PathLike, seed: int,
               n_per_split: dict[str, int], formats: Sequence[str] = FORMATS) -> dict[str, Path]:
    """Generate each split once and write it in every format, each under ``root/<format>``.

    Returns the folder of each format. Every format folder gets ``toyworld.json`` (not just
    COCO's), and the VOC export also gets ``trainval.txt`` when train and val are exported.
    """
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown formats {sorted(unknown)}; choose from {FORMATS}")
    root = Path(root)
    out = {f: root / f for f in formats}
    for split, n in n_per_split.items():
        scenes = generate(cfg, n, seed=seed, split=split)
        if "coco" in out:
            export_coco(scenes, out["coco"], split, cfg, seed)
        if "flickr30k_entities" in out:
            export_flickr30k_entities(scenes, out["flickr30k_entities"], split)
        if "foil" in out:
            export_foil(scenes, out["foil"], split)
        if "voc" in out:
            export_voc(scenes, out["voc"], split)
    for folder in out.values():
        write_toyworld_meta(folder, cfg, seed)
    if "voc" in out and {"train", "val"} <= set(n_per_split):
        sets = out["voc"] / VOC_YEAR / "ImageSets" / "Main"
        atomic_write_text(sets / "trainval.txt",
                          (sets / "train.txt").read_text() + (sets / "val.txt").read_text())
    return out
