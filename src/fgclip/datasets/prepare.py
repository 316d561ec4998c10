"""Check an official download and lay it out the way the chapters read it.

Each ``check_*`` function lists what a dataset's standard layout needs and reports, path by
path, what is there and what is missing (nothing is assumed, nothing skipped); each
``prepare_*`` function builds a chapter's layout from the files as they come from their
publishers, with symbolic links for the large image folders. The ``data_scripts/prepare_*.py``
scripts are thin command lines over these.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..fileio import atomic_write_json, atomic_write_text
from ._files import read_id_list
from ._json import load_json_object

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


@dataclass
class LayoutReport:
    """What a dataset root holds against what its layout needs."""

    dataset: str
    root: Path
    found: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing

    def need(self, path: Path, what: str, present: bool | None = None) -> bool:
        present = path.exists() if present is None else present
        (self.found if present else self.missing).append(f"{what}: {path}")
        return present

    def text(self) -> str:
        head = f"{self.dataset} at {self.root}: " + ("complete" if self.ok else f"{len(self.missing)} missing")
        return "\n".join([head] + [f"  ok       {f}" for f in self.found]
                         + [f"  MISSING  {m}" for m in self.missing])

    def raise_if_missing(self) -> "LayoutReport":
        if not self.ok:
            raise FileNotFoundError(self.text())
        return self


def _count_images(folder: Path) -> int:
    return sum(1 for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES) if folder.is_dir() else 0


def _present(folder: Path, name: str) -> bool:
    """``folder/name`` exists; an image named ``<id>.jpg`` may also be a .jpeg or .png."""
    path = folder / name
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return any(path.with_suffix(s).is_file() for s in IMAGE_SUFFIXES)
    return path.is_file()


def _listed_files_present(report: LayoutReport, folder: Path, names: list[str], what: str) -> None:
    absent = [n for n in names if not _present(folder, n)]
    report.need(folder, f"{what} ({len(names) - len(absent)} of {len(names)} present"
                + (f", first missing {absent[0]}" if absent else "") + ")", present=not absent)


def check_coco(root: str | os.PathLike, splits: list[str], captions: bool = True) -> LayoutReport:
    """COCO 2014/2017: ``annotations/instances_<split>.json`` (and ``captions_<split>.json``),
    images under ``<split>/``, every image the instances file lists present."""
    root = Path(root)
    report = LayoutReport("COCO", root)
    for split in splits:
        inst = root / "annotations" / f"instances_{split}.json"
        if captions:
            report.need(root / "annotations" / f"captions_{split}.json", f"captions of {split}")
        if report.need(inst, f"instances of {split}"):
            names = [im["file_name"] for im in load_json_object(inst, "COCO instances").get("images", [])]
            _listed_files_present(report, root / split, names, f"images of {split}")
        else:
            report.need(root / split, f"image folder of {split} ({_count_images(root / split)} images)")
    return report


def check_voc(root: str | os.PathLike, splits: list[str], year: str = "VOC2007") -> LayoutReport:
    """Pascal VOC inside a ``VOCdevkit`` folder: ``<year>/ImageSets/Main/<split>.txt``, one
    ``Annotations/<id>.xml`` and one ``JPEGImages/<id>.jpg`` per listed id."""
    root = Path(root)
    report = LayoutReport(f"Pascal {year}", root)
    base = root / year
    for split in splits:
        listing = base / "ImageSets" / "Main" / f"{split}.txt"
        if report.need(listing, f"image list of {split}"):
            ids = read_id_list(listing)
            _listed_files_present(report, base / "Annotations", [f"{i}.xml" for i in ids], f"annotations of {split}")
            _listed_files_present(report, base / "JPEGImages", [f"{i}.jpg" for i in ids], f"images of {split}")
    return report


def check_flickr30k_entities(root: str | os.PathLike, splits: list[str]) -> LayoutReport:
    """Flickr30K Entities: ``<split>.txt``, ``Annotations/<id>.xml``, ``Sentences/<id>.txt``
    and the Flickr30K photos in ``flickr30k-images/<id>.jpg``."""
    root = Path(root)
    report = LayoutReport("Flickr30K Entities", root)
    for split in splits:
        listing = root / f"{split}.txt"
        if report.need(listing, f"image list of {split}"):
            ids = read_id_list(listing)
            _listed_files_present(report, root / "Annotations", [f"{i}.xml" for i in ids], f"box annotations of {split}")
            _listed_files_present(report, root / "Sentences", [f"{i}.txt" for i in ids], f"sentences of {split}")
            _listed_files_present(report, root / "flickr30k-images", [f"{i}.jpg" for i in ids], f"photos of {split}")
    return report


def link(target: Path, link_path: Path) -> None:
    """A symbolic link ``link_path -> target``; an existing link to the same target is kept."""
    target = Path(target).resolve()
    if link_path.is_symlink() and link_path.resolve() == target:
        return
    if link_path.exists() or link_path.is_symlink():
        raise FileExistsError(f"{link_path} exists and is not a link to {target}")
    link_path.parent.mkdir(parents=True, exist_ok=True)
    link_path.symlink_to(target, target_is_directory=target.is_dir())


def prepare_flickr30k_entities(annotations: str | os.PathLike, images: str | os.PathLike,
                               out: str | os.PathLike, splits: list[str]) -> LayoutReport:
    """Link the unzipped ``annotations.zip`` of Flickr30K Entities (Annotations/, Sentences/,
    train/val/test.txt) and the Flickr30K photo folder into ``out``, then check it."""
    annotations, out = Path(annotations), Path(out)
    for name in ("Annotations", "Sentences", *(f"{s}.txt" for s in splits)):
        if (annotations / name).exists():
            link(annotations / name, out / name)
    if Path(images).is_dir():
        link(Path(images), out / "flickr30k-images")
    return check_flickr30k_entities(out, splits)


def _foil_groups(data: dict) -> dict[int, list[dict]]:
    """FOIL annotations grouped by image id (an original and its foils share one image)."""
    groups: dict[int, list[dict]] = {}
    for ann in data["annotations"]:
        groups.setdefault(int(ann["image_id"]), []).append(ann)
    return groups


def prepare_foil(foil_json: str | os.PathLike, coco_images: str | os.PathLike, out: str | os.PathLike,
                 split: str, val_fraction: float = 0.0, val_split: str = "val",
                 seed: int = 0) -> dict[str, int]:
    """Lay out one official FOIL file (``foilv1.0_{train,test}_2017.json``) as the chapter
    reads it: ``out/foil_<split>.json`` with ``out/<split>`` linked to its COCO image folder
    (train2014 for FOIL's train file, val2014 for its test file).

    ``val_fraction > 0`` moves a seeded share of the images (with all their captions) to
    ``out/foil_<val_split>.json``, linked to the same image folder: a validation split
    carved from training data for choosing thresholds. Returns the images per split.
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    data = load_json_object(foil_json, "FOIL file")
    for key in ("images", "annotations"):
        if not isinstance(data.get(key), list):
            raise ValueError(f"{foil_json}: field {key!r} must be a list")
    out = Path(out)
    groups = _foil_groups(data)
    ids = sorted(groups)
    n_val = int(round(val_fraction * len(ids)))
    val_ids = set(np.random.default_rng(seed).permutation(ids)[:n_val].tolist())
    parts = {split: [i for i in ids if i not in val_ids]}
    if n_val:
        parts[val_split] = sorted(val_ids)
    counts = {}
    for name, keep in parts.items():
        keep_set = set(keep)
        subset = {**{k: v for k, v in data.items() if k not in ("images", "annotations")},
                  "images": [im for im in data["images"] if int(im["id"]) in keep_set],
                  "annotations": [a for g in keep for a in groups[g]]}
        atomic_write_json(out / f"foil_{name}.json", subset)
        link(Path(coco_images), out / name)
        counts[name] = len(keep)
    return counts


def prepare_class_names(lemmas_file: str | os.PathLike, out_file: str | os.PathLike) -> list[str]:
    """One class name per line from a list of synonym sets (ImageNet-21K's
    ``imagenet21k_wordnet_lemmas.txt``: 'dog, domestic dog, Canis familiaris' per line):
    the first lemma of each line, underscores as spaces, duplicates dropped in order.

    Nothing is added: evaluation category names are never appended to the vocabulary.
    """
    names, seen = [], set()
    for number, line in enumerate(Path(lemmas_file).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        name = line.split(",")[0].strip().replace("_", " ")
        if not name:
            raise ValueError(f"{lemmas_file}:{number}: empty first lemma in {line!r}")
        if name.lower() not in seen:
            seen.add(name.lower())
            names.append(name)
    if not names:
        raise ValueError(f"{lemmas_file}: no class names")
    atomic_write_text(out_file, "\n".join(names) + "\n")
    return names


def vocabulary_overlap(names: list[str], categories: list[str]) -> list[str]:
    """The evaluation categories a vocabulary already holds (case-insensitive)."""
    have = {n.lower() for n in names}
    return [c for c in categories if c.lower() in have]

