"""Chapter 5's stage: ONE shared split of the toy world and ONE frozen CLIP's features of it.

The toy world is exported once in every real format (:func:`fgclip.toyworld.export.export_all`,
made once per world, seed and sizes by :func:`fgclip.toyworld.cache.toy_export`) and read back
through the real readers: COCO (:func:`fgclip.datasets.read_coco_split`: images, sizes, boxes,
labels, captions) and FOIL (:func:`fgclip.datasets.read_foil_split`: each foil caption with its
original and the replaced word's index, which FOIL does not store and the reader derives).

Layout read (the export's, or a real root laid out the same way)::

    <root>/coco/annotations/instances_<split>.json, captions_<split>.json, <root>/coco/<split>/
    <root>/foil/foil_<split>.json, <root>/foil/<split>/

Features (:func:`encode_shared`): the whole image stretched to a square (chapter 4's
:func:`fgclip.studies.decoupling.features.square_transform`), so the map covers the full
image; dense (N, D, h, w), pooled (N, D) and the pre-pool map (N, C, h, w) from which SUM-CLIP's
:class:`fgclip.methods.sumclip.PoolMemory` is rebuilt (:meth:`SharedFeatures.memory`), fp32,
cached once per (model, weights digest, root, split and size, transform).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...datasets import DatasetFormatError, read_coco_split, read_foil_split
from ...datasets.boxes import Box
from ...evaluation import encode_texts
from ...methods.sumclip import PoolMemory, pool_memory
from ...metrics.misalignment import normalise_word
from ...models import encode_image_dense, encode_image_rows
from ...toyworld import SPLITS, ToyWorldConfig
from ...toyworld.cache import toy_export
from ...toyworld.export import FORMATS, export_all, load_toyworld_meta
from ..decoupling.features import cached_features, feature_cache_path, square_transform, weights_digest

FEATURE_KIND = "crosspaper-shared"  # the "data format" of the cache key: never shares a file with ch4's


# ---------------------------------------------------------------------------- the root
def required_files(root: Path, splits: Sequence[str]) -> list[Path]:
    """The files a shared root must hold for ``splits``: COCO instances and captions, FOIL."""
    return [f for s in splits for f in (root / "coco" / "annotations" / f"instances_{s}.json",
                                        root / "coco" / "annotations" / f"captions_{s}.json",
                                        root / "foil" / f"foil_{s}.json")]


def _check_sizes(sizes: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(sizes, Mapping) or not sizes:
        raise ValueError(f"parameter 'sizes' must map split names to image counts, got {sizes!r}")
    bad = {s: n for s, n in sizes.items() if isinstance(n, bool) or not isinstance(n, int) or n < 1}
    if bad:
        raise ValueError(f"parameter 'sizes': every split needs at least 1 image (an int), got {bad}")
    return dict(sizes)


def _holds_shared(root: Path, splits: Sequence[str]) -> bool:
    """True when ``root`` holds every required file; ValueError naming ``data_root`` when it
    holds a COCO or FOIL dataset that lacks some of them (it is never written into)."""
    need = required_files(root, splits)
    missing = [str(p.relative_to(root)) for p in need if not p.is_file()]
    if not missing:
        return True
    has_any = any((root / "coco" / "annotations").glob("*.json")) or any((root / "foil").glob("foil_*.json"))
    if has_any:
        raise ValueError(f"parameter 'data_root': {root} holds a COCO/FOIL dataset but not {missing} "
                         f"for the splits {list(splits)}; point data_root at a root with all of them, "
                         "or at a folder without coco/ and foil/ files for the toy export")
    return False


def shared_root(data_root: str | Path, world: ToyWorldConfig | None, seed: int,
                sizes: Mapping[str, int]) -> Path:
    """The folder chapter 5 reads: ``data_root`` itself when it holds COCO instances and
    captions and FOIL files of every split of ``sizes`` (split -> number of images), else
    the toy world (``world``, default ``ToyWorldConfig()``, as chapters 3 and 4) exported
    once in every format (:func:`fgclip.toyworld.export.export_all`) into
    ``data_root/toy-<digest>/`` (:func:`fgclip.toyworld.cache.toy_export`)."""
    sizes = _check_sizes(sizes)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"parameter 'seed' must be an int, got {seed!r}")
    world = world if world is not None else ToyWorldConfig()
    if not isinstance(world, ToyWorldConfig):
        raise ValueError(f"parameter 'world' must be a ToyWorldConfig or None, got {type(world).__name__}")
    root = Path(data_root)
    if _holds_shared(root, list(sizes)):
        return root
    unknown = sorted(set(sizes) - set(SPLITS))
    if unknown:
        raise ValueError(f"parameter 'sizes': the toy world has the splits {sorted(SPLITS)}, not {unknown}")
    return toy_export(root, lambda r: _holds_shared(r, list(sizes)),
                      lambda folder: export_all(world, folder, seed, sizes),
                      world=world, seed=seed, sizes=sizes, formats=list(FORMATS))


# --------------------------------------------------------------------------- the split
def word_categories(words: Sequence[str], categories: Sequence[str]) -> tuple[str | None, ...]:
    """Per word, the category it names (every word of a multi-word name, longest name first,
    compared without surrounding punctuation and case), None for a word that names none.
    Exact names only: a plural ("circles") names nothing."""
    clean = [normalise_word(w) for w in words]  # chapter 2's comparison of words
    names = sorted(((c, c.lower().split()) for c in categories), key=lambda x: -len(x[1]))
    out: list[str | None] = [None] * len(words)
    for j in range(len(words)):  # left to right: a word inside an earlier name is taken
        if out[j] is not None:
            continue
        for c, parts in names:
            if clean[j:j + len(parts)] == parts:
                out[j:j + len(parts)] = [c] * len(parts)
                break
    return tuple(out)


@dataclass(frozen=True)
class FoilItem:
    """One foil caption: its image, the original, which word was replaced and what each
    word of the foil caption names."""

    image: int  # index of the image in its SharedSplit
    original: str
    foil: str
    word_index: int  # the replaced word, an index into foil.split() (and original.split())
    true_word: str  # original.split()[word_index] (punctuation stripped)
    foil_word: str  # foil.split()[word_index] (punctuation stripped)
    foil_type: str  # "shape", "color", "relation", "count" on the toy world; "foil" if unknown
    categories: tuple[str | None, ...]  # per word of foil.split(): the category it names, or None

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(self.foil.split())


@dataclass(frozen=True, eq=False)
class SharedSplit:
    """One split read back through the real readers; rows follow the COCO instances file."""

    root: Path
    split: str
    image_ids: tuple[int, ...]  # (N,)
    paths: tuple[Path, ...]  # (N,) COCO image files
    hws: tuple[tuple[int, int], ...]  # (N,) image (H, W)
    categories: tuple[str, ...]  # (C,) the world's drawable categories, in the world's order
    labels: np.ndarray  # (N, C) int64 in {0, 1}
    boxes: tuple[dict[str, tuple[Box, ...]], ...]  # (N,) category -> its objects' (x0, y0, x1, y1)
    captions: tuple[tuple[str, ...], ...]  # (N,) COCO captions per image
    foils: tuple[FoilItem, ...]  # FOIL items whose image is among the N, in file order

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def foil_targets(self) -> np.ndarray:
        """(F,) the replaced word's index per foil caption: the target of the misalignment task."""
        return np.array([f.word_index for f in self.foils], dtype=int)


def _categories(root: Path, records) -> tuple[str, ...]:
    """The toy world's drawable categories (``coco/toyworld.json``), else on real data the
    categories of this split's objects in COCO id order."""
    meta = load_toyworld_meta(root / "coco")
    if meta is not None:
        return tuple(meta["config"]["categories"])
    ids = {o.category_id: o.category for r in records for o in r.objects}
    return tuple(ids[k] for k in sorted(ids))


def _foil_items(root: Path, split: str, index: Mapping[int, int], all_ids: set[int],
                categories: Sequence[str]) -> tuple[FoilItem, ...]:
    """FOIL pairs of the images in ``index`` (image id -> row), each checked against the file's words."""
    path, pairs = root / "foil" / f"foil_{split}.json", read_foil_split(root / "foil", split).pairs
    stray = sorted({p.image_id for p in pairs} - all_ids)
    if stray:
        raise DatasetFormatError(path, f"image ids {stray[:5]} (of {len(stray)}) are not in the COCO split "
                                 f"{root / 'coco' / 'annotations' / f'instances_{split}.json'}",
                                 field="annotations[].image_id")
    items = []
    for p in pairs:
        if p.image_id not in index:
            continue
        if (p.target_span, p.foil_span) != (p.target_word, p.foil_word):
            raise DatasetFormatError(path, f"foil_id {p.foil_id}: the captions differ in "
                                     f"{p.target_span!r} -> {p.foil_span!r}, the file says "
                                     f"{p.target_word!r} -> {p.foil_word!r}", field="annotations[].caption")
        items.append(FoilItem(index[p.image_id], p.original, p.foiled, p.word_index, p.target_span,
                              p.foil_span, p.foil_type or "foil", word_categories(p.foiled.split(), categories)))
    return tuple(items)


def _labels_and_boxes(records, categories: Sequence[str], instances: Path,
                      ) -> tuple[np.ndarray, tuple[dict[str, tuple[Box, ...]], ...]]:
    """labels (N, C) in {0, 1} and, per image, category -> its objects' boxes (file order)."""
    col = {c: k for k, c in enumerate(categories)}
    labels = np.zeros((len(records), len(categories)), dtype=np.int64)  # (N, C)
    boxes: list[dict[str, tuple[Box, ...]]] = []
    for i, r in enumerate(records):
        per: dict[str, list[Box]] = {}
        for o in r.objects:
            if o.category not in col:
                raise DatasetFormatError(instances, f"image {r.image_id}: category {o.category!r} is not one "
                                         "of the world's drawable categories", field="annotations[].category_id")
            per.setdefault(o.category, []).append(o.box)
            labels[i, col[o.category]] = 1
        boxes.append({c: tuple(b) for c, b in per.items()})
    return labels, tuple(boxes)


def read_shared(root: str | Path, split: str, n: int = 0) -> SharedSplit:
    """The first ``n`` images (0: all) of a shared root's split (:func:`shared_root`), read
    through the COCO reader (boxes, labels, captions, sizes) and the FOIL reader (foil items of
    those images). Every FOIL image must be in the COCO split (DatasetFormatError naming the
    FOIL file otherwise)."""
    root = Path(root)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"parameter 'n' must be an int >= 0 (0: the whole split), got {n!r}")
    missing = [str(p) for p in required_files(root, [split]) if not p.is_file()]
    if missing:
        raise ValueError(f"parameter 'split': {root} has no {missing} (see shared_root)")
    records = read_coco_split(root / "coco", split)
    if n > len(records):
        raise ValueError(f"parameter 'n': split {split!r} of {root} has {len(records)} images, fewer than {n}")
    categories, all_ids = _categories(root, records), {r.image_id for r in records}
    records = records[:n] if n else records
    labels, boxes = _labels_and_boxes(records, categories, root / "coco" / "annotations" / f"instances_{split}.json")
    index = {r.image_id: i for i, r in enumerate(records)}
    return SharedSplit(root, split, tuple(r.image_id for r in records), tuple(r.image_path for r in records),
                       tuple((r.height, r.width) for r in records), categories, labels, boxes,
                       tuple(tuple(r.captions) for r in records), _foil_items(root, split, index, all_ids, categories))


# ------------------------------------------------------------------------- the features
@dataclass(frozen=True, eq=False)
class SharedFeatures:
    """The frozen CLIP's fp32 features of one SharedSplit's images (rows as its paths)."""

    dense: torch.Tensor  # (N, D, h, w) per-position features in the joint space
    pooled: torch.Tensor  # (N, D) CLIP's global image embeddings
    feature_map: torch.Tensor  # (N, C, h, w) the backbone's map before the pooling
    path: Path  # the cache file

    @property
    def grid(self) -> tuple[int, int]:
        return tuple(self.dense.shape[-2:])

    def memory(self, clip, idx=slice(None)) -> PoolMemory:
        """SUM-CLIP's :class:`fgclip.methods.sumclip.PoolMemory` of images ``idx``, rebuilt from
        the cached map by CLIP's frozen attention pooling (projections only, no backbone)."""
        pool = getattr(clip.model.visual, "attnpool", None)
        if pool is None:
            raise TypeError(f"SUM-CLIP needs an attention-pooled ResNet; {clip.name} has no attnpool")
        return pool_memory(pool, self.feature_map[idx].to(pool.positional_embedding.device))


def _encode(clip, paths: Sequence[Path], transform, device: str, batch_size: int) -> dict[str, torch.Tensor]:
    """One fp32 pass of the frozen CLIP over image files: dense, pooled and the pre-pool map."""
    def per_batch(x: torch.Tensor) -> dict[str, torch.Tensor]:
        f = encode_image_dense(clip.model, x)  # no autocast: fp32 throughout
        return {"dense": f.dense.float().cpu(), "pooled": f.pooled.float().cpu(),
                "feature_map": f.feature_map.float().cpu()}
    return encode_image_rows(clip, list(paths), per_batch, batch_size, device, transform=transform,
                             desc="encode shared split")


def encode_shared(clip, split: SharedSplit, cache_dir: str | Path, device: str = "cpu",
                  batch_size: int = 128) -> SharedFeatures:
    """The split's frozen features through :func:`fgclip.studies.decoupling.features.square_transform`
    of the model's preprocess, read from or written (atomically) to one cache file named by
    model, weights digest, root, split and size, and transform
    (:func:`fgclip.studies.decoupling.features.feature_cache_path`; reused only while the image
    files are unchanged, :func:`fgclip.studies.decoupling.features.cached_features`).
    The model must be on ``device`` and in fp32."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"parameter 'batch_size' must be an int >= 1, got {batch_size!r}")
    param = next(clip.model.parameters())
    if param.device != torch.device(device):
        raise ValueError(f"parameter 'device': the model is on {param.device}, not {device!r}")
    if param.dtype != torch.float32:
        raise ValueError(f"parameter 'clip': the frozen CLIP must be fp32, got {param.dtype}")
    if len(split) == 0:
        raise ValueError("parameter 'split': no images")
    transform = square_transform(clip.preprocess)
    path = feature_cache_path(cache_dir, clip.name, str(clip.pretrained), split.root, FEATURE_KIND,
                              f"{split.split}-n{len(split)}", transform, weights_digest(clip.model.visual))
    out = cached_features(path, list(split.paths),
                          lambda files: _encode(clip, files, transform, device, batch_size))
    if any(len(out[k]) != len(split) for k in ("dense", "pooled", "feature_map")):
        raise ValueError(f"{path}: cached features do not hold {len(split)} rows; delete the file")
    return SharedFeatures(out["dense"], out["pooled"], out["feature_map"], path)


def name_embeddings(clip, names: Sequence[str], prompt: str = "a {}") -> torch.Tensor:
    """(C, D) L2-normalised text embeddings of ``prompt.format(name)`` (chapter 3's template
    by default), through :func:`fgclip.evaluation.encode_texts`, on the CPU."""
    if not names or len(set(names)) != len(names):
        raise ValueError(f"parameter 'names' must be distinct and non-empty, got {list(names)}")
    if prompt.count("{}") != 1:
        raise ValueError(f"parameter 'prompt' must hold one '{{}}' for the name, got {prompt!r}")
    return encode_texts(clip, [prompt.format(n) for n in names]).cpu()
