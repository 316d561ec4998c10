"""FOIL-COCO reader: pairs each foil caption with its original by the caption ``id``.

A FOIL v1.0 file is COCO-caption-like JSON: ``images`` (``id``, ``file_name``) and
``annotations`` with ``id``, ``image_id``, ``caption``, ``foil`` (bool), ``target_word``,
``foil_word`` and ``foil_id``; originals carry ``foil: false`` and the words ``"ORIG"``.
An original and its foiled versions share the same ``id`` (the COCO caption id), while
``foil_id`` is unique per entry: that is how the public FOIL loaders group them. The
optional ``foil_type`` (toy-world exports) is passed through when present.

The foil's position is not stored in FOIL, so it is derived by comparing the foiled
caption word by word (whitespace tokens) with its original: the common prefix and suffix
are stripped and what remains is the replaced span (one word, or several for a
multi-word category such as "teddy bear"). Errors: a foil whose ``id`` has no original,
originals of one ``id`` that disagree, a foil on a different image than its original, a
foil caption equal to its original, or a ``foil_id`` used twice. An original whose ``id``
has no foil yields no pair and is listed in ``FoilSplit.originals_without_foil``.

Real FOIL prints some words with their punctuation ('handbag.' at the end of a caption), so
``target_word``, ``foil_word`` and the two spans are kept with the punctuation around each
word stripped (:func:`strip_punctuation`); the captions themselves are kept as written.
"""
from __future__ import annotations

import os
import string
from dataclasses import dataclass, field
from pathlib import Path

from ._files import find_image
from ._json import get_field, get_list, load_json_object
from .errors import DatasetFormatError


@dataclass
class FoilPair:
    foil_id: int  # the foil entry's own foil_id (unique per entry)
    image_id: int
    image_path: Path
    original: str
    foiled: str
    target_word: str
    foil_word: str
    word_index: int  # first replaced word, an index into foiled.split() (and original.split())
    foil_span: str  # the replaced words of the foiled caption (punctuation around them stripped)
    target_span: str  # the words they replaced in the original (likewise)
    original_annotation_id: int  # the caption id the original and its foils share
    foil_annotation_id: int  # the foil entry's foil_id
    foil_type: str | None = None


@dataclass
class FoilSplit:
    pairs: list[FoilPair] = field(default_factory=list)
    originals_without_foil: list[int] = field(default_factory=list)  # annotation ids


def strip_punctuation(words: str) -> str:
    """Each whitespace word with the punctuation around it removed ('a handbag.' -> 'a handbag');
    words that are punctuation only are dropped."""
    return " ".join(w for w in (x.strip(string.punctuation) for x in words.split()) if w)


def foil_position(original: str, foiled: str) -> tuple[int, int, int]:
    """``(start, end_original, end_foiled)``: the word spans that differ.

    ``original.split()[start:end_original]`` was replaced by
    ``foiled.split()[start:end_foiled]``. Raises ValueError when the captions are equal.
    """
    a, b = original.split(), foiled.split()
    if a == b:
        raise ValueError("the foil caption equals its original")
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    tail = 0
    while tail < min(len(a), len(b)) - start and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return start, len(a) - tail, len(b) - tail


def _annotations(data: dict, path: Path) -> list[dict]:
    """Validated annotations, each with its position ``_where`` for error messages."""
    anns = []
    for i, ann in enumerate(get_list(data, "annotations", path)):
        where = f"annotations[{i}]"
        for key, kind in (("id", int), ("image_id", int), ("caption", str), ("foil", bool),
                          ("target_word", str), ("foil_word", str), ("foil_id", int)):
            get_field(ann, key, kind, path, where)
        anns.append({**ann, "_where": where})
    return anns


def _original_of(group: list[dict], foil: dict, path: Path) -> dict:
    """The one original of a foil's group; its originals must agree on image and caption."""
    if not group:
        raise DatasetFormatError(path, f"foil (foil_id {foil['foil_id']}) has no original caption "
                                 f"(foil: false) with its id {foil['id']}", field=f"{foil['_where']}.id")
    first = group[0]
    for other in group[1:]:
        if (other["image_id"], other["caption"]) != (first["image_id"], first["caption"]):
            raise DatasetFormatError(path, f"originals with caption id {foil['id']} disagree",
                                     field=f"{other['_where']}.caption")
    if first["image_id"] != foil["image_id"]:
        raise DatasetFormatError(path, f"foil is on image {foil['image_id']} but its original "
                                 f"on {first['image_id']}", field=f"{foil['_where']}.image_id")
    return first


def _pair(orig: dict, foil: dict, image_path: Path, path: Path) -> FoilPair:
    try:
        start, end_a, end_b = foil_position(orig["caption"], foil["caption"])
    except ValueError as e:
        raise DatasetFormatError(path, str(e), field=f"{foil['_where']}.caption") from None
    a, b = orig["caption"].split(), foil["caption"].split()
    clean = strip_punctuation
    return FoilPair(foil["foil_id"], foil["image_id"], image_path, orig["caption"],
                    foil["caption"], clean(foil["target_word"]), clean(foil["foil_word"]), start,
                    clean(" ".join(b[start:end_b])), clean(" ".join(a[start:end_a])), orig["id"],
                    foil["foil_id"], foil.get("foil_type"))


def _image_paths(data: dict, path: Path, image_dir: Path, check: bool) -> dict[int, Path]:
    paths = {}
    for i, img in enumerate(get_list(data, "images", path)):
        image_id = get_field(img, "id", int, path, f"images[{i}]")
        name = get_field(img, "file_name", str, path, f"images[{i}]")
        paths[image_id] = find_image(image_dir, str(image_id), name, check, path,
                                     f"images[{i}].file_name")
    return paths


def read_foil(json_path: str | os.PathLike, image_dir: str | os.PathLike, *,
              check_images: bool = True) -> FoilSplit:
    """All (original, foil) pairs of a FOIL JSON file, in the foils' file order."""
    path = Path(json_path)
    data = load_json_object(path, "FOIL file")
    images = _image_paths(data, path, Path(image_dir), check_images)
    anns = _annotations(data, path)
    for ann in anns:
        if ann["image_id"] not in images:
            raise DatasetFormatError(path, f"image id {ann['image_id']} not in images",
                                     field=f"{ann['_where']}.image_id")
    seen_foil_ids: dict[int, str] = {}
    for ann in anns:
        if ann["foil_id"] in seen_foil_ids:
            raise DatasetFormatError(path, f"foil_id {ann['foil_id']} is used twice (first at "
                                     f"{seen_foil_ids[ann['foil_id']]})", field=f"{ann['_where']}.foil_id")
        seen_foil_ids[ann["foil_id"]] = ann["_where"]
    originals: dict[int, list[dict]] = {}
    for ann in anns:
        if not ann["foil"]:
            originals.setdefault(ann["id"], []).append(ann)
    foils = [a for a in anns if a["foil"]]
    pairs = [_pair(_original_of(originals.get(f["id"], []), f, path), f,
                   images[f["image_id"]], path) for f in foils]
    foiled_ids = {f["id"] for f in foils}
    lonely = sorted({a["id"] for g in originals.values() for a in g if a["id"] not in foiled_ids})
    return FoilSplit(pairs, lonely)


def read_foil_split(root: str | os.PathLike, split: str, *,
                    check_images: bool = True) -> FoilSplit:
    """The chapter layout: ``<root>/foil_<split>.json`` with images under ``<root>/<split>/``.

    ``data_scripts/prepare_foil.py`` lays out an official FOIL file this way (its
    ``<split>/`` a link to COCO's own image folder); :func:`read_foil` reads any file
    with any image folder.
    """
    root = Path(root)
    return read_foil(root / f"foil_{split}.json", root / split, check_images=check_images)


def foil_caption_rows(split: FoilSplit, max_pairs: int = 0) -> list[dict]:
    """One row per caption to score: every foiled caption, then each original once.

    A foil row has its replaced word's index as ``target``; an original row has
    ``target=None`` and ``foil_type='original'``. ``max_pairs > 0`` keeps the first pairs.
    """
    if max_pairs < 0:
        raise ValueError(f"max_pairs must be >= 0, got {max_pairs}")
    pairs = split.pairs[:max_pairs] if max_pairs > 0 else split.pairs
    rows = [dict(caption=p.foiled, image=str(p.image_path), target=p.word_index,
                 foil_type=p.foil_type or "foil", foil_word=p.foil_span) for p in pairs]
    seen: set[int] = set()
    for p in pairs:
        if p.original_annotation_id not in seen:
            seen.add(p.original_annotation_id)
            rows.append(dict(caption=p.original, image=str(p.image_path), target=None,
                             foil_type="original", foil_word=""))
    return rows
