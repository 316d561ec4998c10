"""Chapter 4's data: a real root read as it is, or the toy world exported into a keyed cache
folder (COCO JSON and VOC XML), its labels, the validation split and the partial-label draws."""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...datasets import read_detection_split
from ...datasets.voc import read_voc
from ...partial_labels import UNKNOWN, known_masks, partial_targets, save_masks
from ...toyworld import ToyWorldConfig, generate
from ...toyworld.cache import toy_export
from ...toyworld.export import export_coco, export_voc, write_toyworld_meta

DIFFICULT = ("ignore", "positive")


class SplitData(NamedTuple):
    """One split as read: image files, their objects and sizes."""

    paths: list  # image files
    objects: list  # [(category, box (x0, y0, x1, y1))] per image
    hws: list  # (h, w) per image


class DetectionData(NamedTuple):
    """What :func:`prepare_data` read."""

    root: Path  # the folder actually read
    splits: dict  # split -> SplitData
    class_names: list  # sorted category names
    labels: dict  # split -> (N, C) labels in {1, 0, -1} (:func:`label_matrix`)


def label_matrix(objects: list, class_names: list[str], difficult: list | None = None,
                 policy: str = "ignore") -> np.ndarray:
    """(N, C) labels: 1 if a category is present, 0 if not; with VOC ``difficult`` flags
    (one list of booleans per image, aligned with ``objects``) a category present only as
    difficult objects is -1 (ignored by the metrics and unknown in training) under
    ``policy='ignore'`` (HCP-MLR-PL, DualCoOp) or 1 under ``'positive'``."""
    if policy not in DIFFICULT:
        raise ValueError(f"difficult must be one of {DIFFICULT}, got {policy!r}")
    y = np.zeros((len(objects), len(class_names)), dtype=np.int64)
    col = {c: k for k, c in enumerate(class_names)}
    for i, objs in enumerate(objects):
        flags = difficult[i] if difficult is not None else [False] * len(objs)
        for (c, _), hard in zip(objs, flags):
            if not hard:
                y[i, col[c]] = 1
            elif y[i, col[c]] != 1:
                y[i, col[c]] = 1 if policy == "positive" else UNKNOWN
    return y


def holds_detection_data(root, splits) -> bool:
    """True when ``root`` holds a COCO instances file or a VOC2007 ImageSets list of any of
    ``splits`` (a real dataset or an earlier export): then it is read as it is."""
    root = Path(root)
    return any((root / "annotations" / f"instances_{s}.json").is_file()
               or (root / "VOC2007" / "ImageSets" / "Main" / f"{s}.txt").is_file() for s in splits)


def subsample(n_have: int, n_want: int, seed: int, split: str, param: str) -> np.ndarray:
    """Sorted indices of a seeded uniform draw of ``n_want`` of a split's ``n_have`` images
    (all of them when ``n_want`` is 0 or equals ``n_have``); the draw follows (seed, split).
    Raises ValueError naming ``param`` when the split holds fewer images than asked."""
    if n_want < 0:
        raise ValueError(f"{param} must be at least 0, got {n_want}")
    if n_want > n_have:
        raise ValueError(f"{param}={n_want} but split {split!r} holds only {n_have} images; "
                         f"set {param} to at most {n_have} (0: the whole split)")
    if n_want in (0, n_have):
        return np.arange(n_have)
    rng = np.random.default_rng([seed, zlib.crc32(split.encode())])
    return np.sort(rng.choice(n_have, size=n_want, replace=False))


def prepare_data(root, data_format: str, sizes: dict[str, int], seed: int,
                 difficult: str = "ignore", size_names: dict[str, str] | None = None,
                 world: ToyWorldConfig | None = None) -> DetectionData:
    """Read every split of ``sizes`` with the reader of ``data_format``.

    ``root`` holding a dataset (:func:`holds_detection_data`) is read as it is and never
    written to; otherwise the toy world (COCO JSON + VOC XML + toyworld.json) is exported
    once into ``root/toy-<digest>/``, keyed by world (``world``, default the default toy
    world), seed and sizes (:func:`fgclip.toyworld.cache.toy_export`). A split holding more images than asked is
    subsampled (:func:`subsample`, seeded by ``seed``); fewer raises, naming the parameter
    (``size_names[split]``, e.g. "n_train"). On a toy export both readers must agree.

    Returns a :class:`DetectionData`: the folder read, splits[split] (:class:`SplitData`),
    the sorted class names and labels[split] (N, C) (:func:`label_matrix`).
    """
    size_names = size_names or {s: f"the size of split {s!r}" for s in sizes}
    world = world or ToyWorldConfig()

    def export(folder: Path) -> None:
        for split, n in sizes.items():
            if n <= 0:
                raise ValueError(f"{size_names[split]} must be > 0 for the toy export, got {n}")
            scenes = generate(world, n, seed=seed, split=split)
            export_coco(scenes, folder, split, world, seed)
            export_voc(scenes, folder, split)
        write_toyworld_meta(folder, world, seed)

    folder = toy_export(root, lambda r: holds_detection_data(r, sizes), export,
                        world=world, seed=seed, sizes=sizes)
    data = {s: read_detection_split(folder, s, data_format) for s in sizes}
    keep = {s: subsample(len(data[s][0]), n, seed, s, size_names[s]) for s, n in sizes.items()}
    data = {s: SplitData(*([part[i] for i in keep[s]] for part in d)) for s, d in data.items()}
    if (folder / "toyworld.json").is_file():  # the toy export has both formats: they must agree
        other = "voc" if data_format == "coco" else "coco"
        for s in sizes:
            b = read_detection_split(folder, s, other)[1]
            same = [sorted({c for c, _ in o}) for o in data[s].objects] == \
                [sorted({c for c, _ in b[i]}) for i in keep[s]]
            if not same:
                raise AssertionError(f"COCO and VOC readers disagree on the labels of split {s}")
    names = sorted({c for d in data.values() for objs in d.objects for c, _ in objs})
    voc = {s: read_voc(folder, s) for s in sizes} if data_format == "voc" else {}
    hard = {s: [[o.difficult for o in voc[s][i].objects] for i in keep[s]] if voc else None for s in sizes}
    labels = {s: label_matrix(d.objects, names, hard[s], difficult) for s, d in data.items()}
    return DetectionData(folder, data, names, labels)


def split_validation(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of n training images into (fit indices, validation indices)."""
    if not 0 < fraction < 1:
        raise ValueError(f"val_fraction must lie in (0, 1), got {fraction}")
    order = np.random.default_rng(seed).permutation(n)
    n_val = max(1, int(round(fraction * n)))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def check_validation_positives(labels: np.ndarray, proportions: list[float], seeds: list[int],
                               val_idx: np.ndarray) -> None:
    """Refuse, before any work, a validation split that has no known positive at some (ρ, seed):
    the validation mAP that chooses lr and epochs would be undefined there. labels (N, C) of
    the training split; the masks are those :func:`partial_label_draws` will draw."""
    for sd in seeds:
        for rho, known in known_masks(labels.shape, proportions, sd).items():
            if not ((labels[val_idx] == 1) & known[val_idx]).any():
                raise ValueError(
                    f"val_fraction: the validation split ({len(val_idx)} training images) has no known positive "
                    f"at {rho:.0%} known for seed {sd}, so the validation mAP that chooses lr and epochs is "
                    "undefined; raise val_fraction (or n_train) or drop that proportion")


def checked_validation_split(labels: np.ndarray, fraction: float, seed: int, proportions: list[float],
                             seeds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`split_validation` of the training labels (N, C), refused at once by
    :func:`check_validation_positives` when some (ρ, seed) leaves it without a known positive."""
    fit_idx, val_idx = split_validation(len(labels), fraction, seed)
    check_validation_positives(labels, proportions, seeds, val_idx)
    return fit_idx, val_idx


def partial_label_draws(labels: np.ndarray, proportions: list[float], seeds: list[int],
                        out_dir) -> tuple[dict, dict]:
    """Each training seed's nested known-label masks (:func:`fgclip.partial_labels.known_masks`),
    saved as ``out_dir/known_masks_seed<seed>.npz``, and the targets in {1, 0, -1} they make:
    masks[seed][ρ] (N, C) boolean, targets[(seed, ρ)] (N, C)."""
    masks = {sd: known_masks(labels.shape, proportions, sd) for sd in seeds}
    for sd in seeds:
        save_masks(Path(out_dir) / f"known_masks_seed{sd}.npz", masks[sd], sd)
    targets = {(sd, r): partial_targets(labels, m) for sd in seeds for r, m in masks[sd].items()}
    return masks, targets


def known_positive_table(labels: np.ndarray, masks: dict[int, dict[float, np.ndarray]],
                         class_names: list[str], rows: np.ndarray | None = None) -> pd.DataFrame:
    """Known positives per category (rows) at each proportion (columns), min-max over seeds.

    labels (N, C) 0/1; masks[seed][ρ] (N, C) boolean; ``rows``: count only these images.
    """
    if rows is not None:
        labels, masks = labels[rows], {sd: {r: m[rows] for r, m in ms.items()} for sd, ms in masks.items()}
    out = {}
    for rho in next(iter(masks.values())):
        counts = np.stack([((labels == 1) & m[rho]).sum(0) for m in masks.values()])  # (S, C)
        out[f"{rho:.0%} known"] = [f"{lo}" if lo == hi else f"{lo}-{hi}"
                                   for lo, hi in zip(counts.min(0), counts.max(0))]
    return pd.DataFrame(out, index=class_names)
